//! What the local buffers take IDs from: ranges and batches issued by the servers. A
//! narrow interface below [`crate::Client`], so that `SegmentBuffer` and `SnowflakeCache`
//! do not depend on the client itself, and can be tested with a source of their own.

use std::future::Future;
use std::pin::Pin;

use idgen_core::SegmentRange;

use crate::error::Result;
use crate::metrics::Metrics;

/// A boxed future: the buffers call a source only on their slow path (a refill).
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Issues segment ranges and snowflake batches, and keeps the counters they are served into.
pub(crate) trait IdSource: Send + Sync + 'static {
    /// `count` segment values for `key`, none handed out yet.
    fn segment_range<'a>(&'a self, key: &'a str, count: u64) -> Pending<'a, SegmentRange>;
    /// `count` increasing snowflake IDs for `key`, not yet counted as served.
    fn snowflakes<'a>(&'a self, key: &'a str, count: u32) -> Pending<'a, Vec<i64>>;
    /// The counters IDs handed out locally are added to.
    fn metrics(&self) -> &Metrics;
}

/// A source that counts instead of asking a server, for the buffers' unit tests.
#[cfg(test)]
pub(crate) mod counting {
    use std::sync::atomic::{AtomicI64, AtomicU32, AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::error::Error;

    /// Segment values 1, 2, 3… in the order asked for; snowflake IDs that carry the time
    /// they were issued (see [`CountingSource::issued_at`]), increasing. Each call takes
    /// `round_trip` on tokio's clock (the IDs are issued half-way), can be made to fail,
    /// and records its size and how many calls were under way at once.
    pub(crate) struct CountingSource {
        segment_cursor: AtomicI64,
        snowflake_cursor: Mutex<i64>,
        pub(crate) range_sizes: Mutex<Vec<u64>>,
        pub(crate) batch_sizes: Mutex<Vec<u32>>,
        pub(crate) round_trip: Mutex<Duration>,
        /// Calls still to fail (with a retryable error, after the round trip).
        pub(crate) failures: AtomicU32,
        /// Snowflake calls still to be refused with DRIFT, naming a wait of `drift_wait`
        /// (a server pacing its ID clock: just restarted, or after a burst).
        pub(crate) drift_refusals: AtomicU32,
        pub(crate) drift_wait: Mutex<Duration>,
        under_way: AtomicUsize,
        pub(crate) most_under_way: AtomicUsize,
        /// Snowflake IDs are shifted by this, to play a node whose IDs are lower.
        pub(crate) snowflake_shift: AtomicI64,
        started: Instant,
        metrics: Metrics,
    }

    impl Default for CountingSource {
        fn default() -> Self {
            CountingSource {
                segment_cursor: AtomicI64::new(0),
                snowflake_cursor: Mutex::new(0),
                range_sizes: Mutex::default(),
                batch_sizes: Mutex::default(),
                round_trip: Mutex::new(Duration::ZERO),
                failures: AtomicU32::new(0),
                drift_refusals: AtomicU32::new(0),
                drift_wait: Mutex::new(Duration::from_millis(3)),
                under_way: AtomicUsize::new(0),
                most_under_way: AtomicUsize::new(0),
                snowflake_shift: AtomicI64::new(0),
                started: Instant::now(),
                metrics: Metrics::default(),
            }
        }
    }

    /// IDs per microsecond of issue time in the snowflake IDs.
    const PER_MICROSECOND: i64 = 1000;

    impl CountingSource {
        /// A source whose calls take `round_trip`.
        pub(crate) fn with_round_trip(round_trip: Duration) -> Self {
            let source = CountingSource::default();
            *source.round_trip.lock().unwrap() = round_trip;
            source
        }

        /// When the snowflake `id` was issued.
        pub(crate) fn issued_at(&self, id: i64) -> Instant {
            self.started + Duration::from_micros((id / PER_MICROSECOND) as u64)
        }

        /// Half a round trip there, `issue`, half back; one call more under way meanwhile.
        async fn call<T>(&self, issue: impl FnOnce() -> T) -> Result<T> {
            let half = *self.round_trip.lock().unwrap() / 2;
            let under_way = self.under_way.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_under_way.fetch_max(under_way, Ordering::SeqCst);
            if !half.is_zero() {
                tokio::time::sleep(half).await;
            }
            let issued = issue();
            if !half.is_zero() {
                tokio::time::sleep(half).await;
            }
            self.under_way.fetch_sub(1, Ordering::SeqCst);
            let fail = self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fail {
                return Err(Error::Transport(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "the test source failed",
                ))));
            }
            Ok(issued)
        }
    }

    impl IdSource for CountingSource {
        fn segment_range<'a>(&'a self, _key: &'a str, count: u64) -> Pending<'a, SegmentRange> {
            self.range_sizes.lock().unwrap().push(count);
            Box::pin(self.call(move || {
                let first = self
                    .segment_cursor
                    .fetch_add(count as i64, Ordering::Relaxed)
                    + 1;
                SegmentRange {
                    first,
                    last: first + count as i64 - 1,
                    step: 1,
                    count,
                }
            }))
        }

        fn snowflakes<'a>(&'a self, _key: &'a str, count: u32) -> Pending<'a, Vec<i64>> {
            self.batch_sizes.lock().unwrap().push(count);
            let refused = self
                .drift_refusals
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if refused {
                let retry_in = *self.drift_wait.lock().unwrap();
                return Box::pin(async move {
                    self.call(|| ()).await?;
                    Err(Error::Drift {
                        message: "the test source paces its ID clock".into(),
                        retry_in: Some(retry_in),
                    })
                });
            }
            Box::pin(self.call(move || {
                let now = self.started.elapsed().as_micros() as i64 * PER_MICROSECOND;
                let mut cursor = self.snowflake_cursor.lock().unwrap();
                let first = (*cursor + 1).max(now);
                *cursor = first + i64::from(count) - 1;
                let shift = self.snowflake_shift.load(Ordering::SeqCst);
                (first..=*cursor).map(|id| id - shift).collect()
            }))
        }

        fn metrics(&self) -> &Metrics {
            &self.metrics
        }
    }
}
