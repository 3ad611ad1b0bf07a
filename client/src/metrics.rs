//! Counters a user can read with [`crate::Client::metrics`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, shared by every clone of a client.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) ids_served: AtomicU64,
    pub(crate) ranges_fetched: AtomicU64,
    pub(crate) snowflake_batches_fetched: AtomicU64,
    pub(crate) failovers: AtomicU64,
    pub(crate) refusals: AtomicU64,
    pub(crate) transport_errors: AtomicU64,
}

impl Metrics {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        MetricsSnapshot {
            ids_served: get(&self.ids_served),
            ranges_fetched: get(&self.ranges_fetched),
            snowflake_batches_fetched: get(&self.snowflake_batches_fetched),
            failovers: get(&self.failovers),
            refusals: get(&self.refusals),
            transport_errors: get(&self.transport_errors),
        }
    }
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// IDs handed to callers: snowflakes as they are handed out, segment values when their
    /// range is used up and replaced (so the range in use is not counted yet).
    pub ids_served: u64,
    /// Segment ranges taken from the servers.
    pub ranges_fetched: u64,
    /// Snowflake batches fetched for prefetching caches.
    pub snowflake_batches_fetched: u64,
    /// Calls moved to another node after a node failed or refused.
    pub failovers: u64,
    /// Refusals from servers (DRIFT, OVERFLOW, EXHAUSTED and other error replies).
    pub refusals: u64,
    /// Connection failures and timeouts.
    pub transport_errors: u64,
}
