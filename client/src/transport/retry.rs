//! When a call is tried again: one policy for every mode that retries in place (Cluster and
//! Sentinel; `Nodes` mode moves on to the next node instead).

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// How long a retried call waits between attempts when nothing says otherwise.
pub(crate) const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Tries again, every [`RETRY_EVERY`], the errors `retry_on` accepts, until a deadline; a
/// DRIFT refusal that names when the request fits is tried again then (at least 1 ms, at
/// most [`RETRY_EVERY`] later).
#[derive(Clone, Copy)]
pub(crate) struct RetryPolicy {
    deadline: Instant,
    retry_on: fn(&Error) -> bool,
}

impl RetryPolicy {
    /// A policy for a call starting at `now` that may be retried for `retry_for`.
    pub(crate) fn new(now: Instant, retry_for: Duration, retry_on: fn(&Error) -> bool) -> Self {
        RetryPolicy {
            deadline: now + retry_for,
            retry_on,
        }
    }

    /// How long to wait before trying again after `error` at `now`, or `None`: give up
    /// and return the error.
    pub(crate) fn wait_after(&self, error: &Error, now: Instant) -> Option<Duration> {
        if now >= self.deadline || !(self.retry_on)(error) {
            return None;
        }
        Some(
            error
                .fits_in()
                .map_or(RETRY_EVERY, |wait| wait.min(RETRY_EVERY)),
        )
    }
}

/// Now, on tokio's clock (which tests can pause and advance), as the `Instant` a
/// [`RetryPolicy`] compares with.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Runs `attempt` until it succeeds or `policy` gives up, sleeping between attempts as the
/// policy says: the loop of every mode that retries in place. Each failed attempt is counted
/// in `metrics` (a transport error, or a refusal) and logged with `what` failed.
pub(crate) async fn until_done<T, Attempt>(
    policy: RetryPolicy,
    metrics: &Metrics,
    what: &str,
    mut attempt: impl FnMut() -> Attempt,
) -> Result<T>
where
    Attempt: Future<Output = Result<T>>,
{
    loop {
        let error = match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if matches!(error, Error::Transport(_)) {
            Metrics::add(&metrics.transport_errors, 1);
        } else {
            Metrics::add(&metrics.refusals, 1);
        }
        let Some(wait) = policy.wait_after(&error, now()) else {
            return Err(error);
        };
        tracing::warn!(%error, ?wait, "{what} failed; retrying");
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drift(retry_in: Option<Duration>) -> Error {
        Error::Drift {
            message: String::new(),
            retry_in,
        }
    }

    fn transport() -> Error {
        Error::Transport(redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )))
    }

    #[test]
    fn retryable_errors_wait_a_step_or_what_the_server_names_until_the_deadline() {
        let start = Instant::now();
        let policy = RetryPolicy::new(start, Duration::from_secs(1), Error::is_retryable);
        let ms = Duration::from_millis;
        assert_eq!(policy.wait_after(&transport(), start), Some(RETRY_EVERY));
        assert_eq!(policy.wait_after(&drift(Some(ms(3))), start), Some(ms(3)));
        assert_eq!(policy.wait_after(&drift(Some(ms(0))), start), Some(ms(1)));
        assert_eq!(
            policy.wait_after(&drift(Some(ms(5000))), start),
            Some(RETRY_EVERY)
        );
        assert_eq!(policy.wait_after(&drift(None), start), Some(RETRY_EVERY));
        let late = start + Duration::from_secs(1);
        assert_eq!(
            policy.wait_after(&transport(), late),
            None,
            "past the deadline"
        );
        let overflow = Error::Overflow {
            message: String::new(),
        };
        assert_eq!(policy.wait_after(&overflow, start), None, "not retryable");
        let noperm = Error::Auth {
            code: "NOPERM".into(),
            message: String::new(),
        };
        assert_eq!(
            policy.wait_after(&noperm, start),
            None,
            "needs a configuration change"
        );
    }

    #[test]
    fn a_mode_may_retry_more_than_the_retryable_errors() {
        fn or_readonly(error: &Error) -> bool {
            error.is_retryable()
                || matches!(error, Error::Server { code, .. } if code == "READONLY")
        }
        let start = Instant::now();
        let policy = RetryPolicy::new(start, Duration::from_secs(1), or_readonly);
        let readonly = Error::Server {
            code: "READONLY".into(),
            message: String::new(),
        };
        assert_eq!(policy.wait_after(&readonly, start), Some(RETRY_EVERY));
    }

    /// Runs `until_done` over scripted attempts on a paused clock; returns the answer, the
    /// attempts made and the time that passed.
    async fn scripted(
        retry_for: Duration,
        script: Vec<Result<u32>>,
    ) -> (Result<u32>, usize, Duration, Metrics) {
        tokio::time::pause();
        let started = tokio::time::Instant::now();
        let policy = RetryPolicy::new(now(), retry_for, Error::is_retryable);
        let metrics = Metrics::default();
        let mut script = script.into_iter();
        let mut attempts = 0;
        let answer = until_done(policy, &metrics, "the call", || {
            attempts += 1;
            let next = script.next().expect("more attempts than scripted");
            async move { next }
        })
        .await;
        (answer, attempts, started.elapsed(), metrics)
    }

    /// The paused clock's sleeps end on the next whole millisecond after the wait.
    fn assert_waited(waited: Duration, expected: Duration, sleeps: u32) {
        let slack = Duration::from_millis(u64::from(sleeps));
        assert!(
            waited >= expected && waited <= expected + slack,
            "waited {waited:?}, expected {expected:?}"
        );
    }

    #[tokio::test]
    async fn a_failover_then_a_drift_refusal_are_waited_out_and_the_call_succeeds() {
        let ms = Duration::from_millis;
        let (answer, attempts, waited, metrics) = scripted(
            Duration::from_secs(5),
            vec![Err(transport()), Err(drift(Some(ms(7)))), Ok(42)],
        )
        .await;
        assert_eq!(answer.unwrap(), 42);
        assert_eq!(attempts, 3);
        // 100 ms after the lost connection, then the 7 ms the refusal named.
        assert_waited(waited, RETRY_EVERY + ms(7), 2);
        let seen = metrics.snapshot();
        assert_eq!((seen.transport_errors, seen.refusals), (1, 1));
    }

    #[tokio::test]
    async fn an_error_retrying_cannot_fix_ends_the_call_inside_the_retry_window() {
        let noperm = Error::Auth {
            code: "NOPERM".into(),
            message: String::new(),
        };
        let (answer, attempts, waited, _) = scripted(
            Duration::from_secs(5),
            vec![Err(transport()), Err(noperm), Ok(42)],
        )
        .await;
        assert!(matches!(answer, Err(Error::Auth { .. })), "{answer:?}");
        assert_eq!(attempts, 2);
        assert_waited(waited, RETRY_EVERY, 1);
    }

    #[tokio::test]
    async fn the_last_error_is_the_answer_once_the_window_has_passed() {
        let (answer, attempts, waited, _) = scripted(
            Duration::from_millis(250),
            (0..10).map(|_| Err(transport())).collect(),
        )
        .await;
        assert!(matches!(answer, Err(Error::Transport(_))), "{answer:?}");
        // Attempts at 0, 100, 200 and 300 ms: the fourth failure is past the deadline.
        assert_eq!(attempts, 4);
        assert_waited(waited, RETRY_EVERY * 3, 3);
    }
}
