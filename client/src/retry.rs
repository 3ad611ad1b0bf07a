//! When a call is tried again: one policy for every mode that retries in place (Cluster and
//! Sentinel; `Nodes` mode moves on to the next node instead).

use std::time::{Duration, Instant};

use crate::error::Error;

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
        Some(match error {
            Error::Drift {
                retry_in: Some(wait),
                ..
            } => (*wait).clamp(Duration::from_millis(1), RETRY_EVERY),
            _ => RETRY_EVERY,
        })
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
}
