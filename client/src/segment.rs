//! The client half of Leaf-segment: ranges taken from the server with
//! `SEGMENT.NEXT key COUNT n`, handed out locally.
//!
//! - Fast path, lock-free: the current range is behind an `ArcSwap`; taking a value is one
//!   atomic `fetch_add` on the range's cursor, so every value goes to exactly one caller.
//! - Double buffer: when a set fraction of the current range is used (10% by default, as in
//!   Leaf), the next range is fetched in the background, so callers do not wait at the
//!   switch unless both ranges run out.
//! - Demand-driven size: the next range is twice as large when the current one is being
//!   used faster than the target duration, and half as large when it would last more than
//!   twice that, within the configured bounds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use crate::client::Client;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::settings::SegmentOptions;

/// One range being handed out.
struct Range {
    first: i64,
    step: i64,
    count: u64,
    cursor: AtomicU64,
    /// The cursor value at which the next range is fetched.
    prefetch_at: u64,
    installed: Instant,
}

impl Range {
    fn empty() -> Self {
        Range {
            first: 0,
            step: 1,
            count: 0,
            cursor: AtomicU64::new(0),
            prefetch_at: u64::MAX,
            installed: Instant::now(),
        }
    }
}

struct Shared {
    client: Client,
    key: String,
    options: SegmentOptions,
    current: ArcSwap<Range>,
    /// The prefetched range, waiting for the current one to run out.
    next: Mutex<Option<Arc<Range>>>,
    fetching: AtomicBool,
    fetched: Notify,
    /// Serializes switching ranges (the slow path only).
    switching: tokio::sync::Mutex<()>,
    /// Size of the next range to fetch.
    size: AtomicU64,
}

/// A local buffer of segment values for one key. Cheap to clone; clones share the buffer.
///
/// Values are unique across every buffer and client of a deployment (they come from ranges
/// the servers hand out once) and increase within a range; across ranges from different
/// nodes (after a failover) they are unique but not ordered.
#[derive(Clone)]
pub struct SegmentBuffer {
    shared: Arc<Shared>,
}

impl SegmentBuffer {
    pub(crate) fn new(client: Client, key: &str, options: SegmentOptions) -> Self {
        let size = options
            .initial_size
            .clamp(options.min_size.max(1), options.max_size.max(1));
        SegmentBuffer {
            shared: Arc::new(Shared {
                client,
                key: key.to_string(),
                current: ArcSwap::from_pointee(Range::empty()),
                next: Mutex::new(None),
                fetching: AtomicBool::new(false),
                fetched: Notify::new(),
                switching: tokio::sync::Mutex::new(()),
                size: AtomicU64::new(size),
                options,
            }),
        }
    }

    /// The next value. Waits for the server only when no range is at hand.
    pub async fn next(&self) -> Result<i64> {
        loop {
            if let Some(value) = self.try_next() {
                return Ok(value);
            }
            let exhausted = self.shared.current.load_full();
            if exhausted.cursor.load(Ordering::Relaxed) < exhausted.count {
                continue; // switched meanwhile
            }
            self.switch_from(&exhausted).await?;
        }
    }

    /// The next value if the current range has one, without waiting: one atomic add on
    /// the range's cursor (and, once per range, starting the prefetch).
    pub fn try_next(&self) -> Option<i64> {
        // A guard, not a clone of the Arc: no shared reference count is touched.
        let range = self.shared.current.load();
        let index = range.cursor.fetch_add(1, Ordering::Relaxed);
        if index >= range.count {
            return None;
        }
        if index == range.prefetch_at {
            Arc::clone(&self.shared).start_prefetch(&range);
        }
        Some(range.first + index as i64 * range.step)
    }

    /// The size the next range will have.
    pub fn next_range_size(&self) -> u64 {
        self.shared.size.load(Ordering::Relaxed)
    }

    /// Replaces the used-up `exhausted` range: with the prefetched one if it is there, else
    /// after waiting for the fetch under way, else by fetching now.
    async fn switch_from(&self, exhausted: &Arc<Range>) -> Result<()> {
        let shared = &self.shared;
        let _switching = shared.switching.lock().await;
        loop {
            if !Arc::ptr_eq(&shared.current.load(), exhausted) {
                return Ok(()); // another caller switched while this one waited
            }
            let fetched = shared.fetched.notified();
            tokio::pin!(fetched);
            fetched.as_mut().enable();
            if let Some(next) = shared.next.lock().unwrap_or_else(|p| p.into_inner()).take() {
                shared.install(next);
                return Ok(());
            }
            if shared.fetching.load(Ordering::Acquire) {
                fetched.await;
                continue;
            }
            // Nothing prefetched and nothing under way (first use, or a prefetch failed).
            let range = shared.fetch().await?;
            shared.install(range);
            return Ok(());
        }
    }
}

impl Shared {
    /// Makes `range` current. The values of the range it replaces are counted as served
    /// now, in one add, rather than one shared atomic add per value on the fast path.
    fn install(&self, range: Arc<Range>) {
        let replaced = self.current.swap(range);
        Metrics::add(&self.client.metrics_ref().ids_served, replaced.count);
    }

    /// Starts fetching the next range in the background, unless one is already coming.
    fn start_prefetch(self: Arc<Self>, current: &Range) {
        if self.fetching.swap(true, Ordering::AcqRel) {
            return;
        }
        self.resize(current);
        tokio::spawn(async move {
            match self.fetch().await {
                Ok(range) => *self.next.lock().unwrap_or_else(|p| p.into_inner()) = Some(range),
                Err(error) => {
                    tracing::warn!(key = %self.key, %error, "prefetching a segment range failed")
                }
            }
            self.fetching.store(false, Ordering::Release);
            self.fetched.notify_waiters();
        });
    }

    /// Sizes the next range from how fast `current` is being used.
    fn resize(&self, current: &Range) {
        let used = current.prefetch_at.max(1);
        let elapsed = current.installed.elapsed();
        let projected = elapsed.mul_f64(current.count as f64 / used as f64);
        let target = self.options.target_duration;
        let size = self.size.load(Ordering::Relaxed);
        let resized = if projected < target {
            size.saturating_mul(2)
        } else if projected > target * 2 {
            size / 2
        } else {
            size
        };
        let bounded = resized.clamp(self.options.min_size.max(1), self.options.max_size.max(1));
        self.size.store(bounded, Ordering::Relaxed);
    }

    #[tracing::instrument(level = "debug", skip(self), fields(key = %self.key))]
    async fn fetch(&self) -> Result<Arc<Range>> {
        let size = self.size.load(Ordering::Relaxed);
        let range = self.client.take_segment_range(&self.key, size).await?;
        let prefetch_at =
            ((range.count as f64) * self.options.prefetch_after.clamp(0.0, 1.0)) as u64;
        Ok(Arc::new(Range {
            first: range.first,
            step: range.step as i64,
            count: range.count,
            cursor: AtomicU64::new(0),
            prefetch_at: prefetch_at.min(range.count.saturating_sub(1)),
            installed: Instant::now(),
        }))
    }
}
