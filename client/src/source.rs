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
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Mutex;

    use super::*;

    /// Segment values 1, 2, 3… and snowflake IDs 0, 1, 2…, in the order asked for; records
    /// the size of every range and batch asked for.
    #[derive(Default)]
    pub(crate) struct CountingSource {
        segment_cursor: AtomicI64,
        snowflake_cursor: AtomicI64,
        pub(crate) range_sizes: Mutex<Vec<u64>>,
        pub(crate) batch_sizes: Mutex<Vec<u32>>,
        metrics: Metrics,
    }

    impl IdSource for CountingSource {
        fn segment_range<'a>(&'a self, _key: &'a str, count: u64) -> Pending<'a, SegmentRange> {
            self.range_sizes.lock().unwrap().push(count);
            let first = self
                .segment_cursor
                .fetch_add(count as i64, Ordering::Relaxed)
                + 1;
            Box::pin(async move {
                Ok(SegmentRange {
                    first,
                    last: first + count as i64 - 1,
                    step: 1,
                    count,
                })
            })
        }

        fn snowflakes<'a>(&'a self, _key: &'a str, count: u32) -> Pending<'a, Vec<i64>> {
            self.batch_sizes.lock().unwrap().push(count);
            let first = self
                .snowflake_cursor
                .fetch_add(i64::from(count), Ordering::Relaxed);
            Box::pin(async move { Ok((first..first + i64::from(count)).collect()) })
        }

        fn metrics(&self) -> &Metrics {
            &self.metrics
        }
    }
}
