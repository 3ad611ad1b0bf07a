//! The client half of Leaf-segment: ranges taken from the server with
//! `SEGMENT.NEXT key COUNT n`, handed out locally.
//!
//! - Fast path, lock-free: taking a value is one atomic `fetch_add` on a cursor plus a few
//!   plain loads (see `range_slots.rs`); no value goes to two callers (a caller that loses
//!   a race with a range switch skips a value rather than share one).
//! - Double buffer: when a set fraction of the current range is used (10% by default, as in
//!   Leaf), the next range is fetched in the background, so callers do not wait at the
//!   switch unless both ranges run out.
//! - Demand-driven size: the next range is twice as large when the current one is being
//!   used faster than the target duration, and half as large when it would last more than
//!   twice that, within the configured bounds.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Result;
use crate::metrics::Metrics;
use crate::range_slots::{Epoch, RangeSlots, RangeSpec, Taken};
use crate::settings::SegmentOptions;
use crate::source::IdSource;

struct Shared {
    source: Arc<dyn IdSource>,
    key: String,
    options: SegmentOptions,
    /// The range being handed out.
    current: RangeSlots,
    /// When the current range was installed, to size the next one.
    installed_at: Mutex<Instant>,
    /// The prefetched range, waiting for the current one to run out.
    next: Mutex<Option<RangeSpec>>,
    fetching: AtomicBool,
    fetched: Notify,
    /// Serializes switching ranges (the slow path only).
    switching: tokio::sync::Mutex<()>,
    /// Size of the next range to fetch.
    size: AtomicU64,
}

/// The future of [`SegmentBuffer::next`].
#[must_use = "futures do nothing unless awaited"]
pub struct NextValue<'a> {
    buffer: &'a SegmentBuffer,
    state: NextState<'a>,
}

enum NextState<'a> {
    /// What the fast path got when `next` was called.
    Taken(std::result::Result<i64, Epoch>),
    /// Waiting for the next range.
    Waiting(Pin<Box<dyn Future<Output = Result<i64>> + Send + 'a>>),
    Finished,
}

impl std::fmt::Debug for NextValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            NextState::Taken(Ok(_)) => "ready",
            NextState::Taken(Err(_)) => "range used up",
            NextState::Waiting(_) => "waiting for the next range",
            NextState::Finished => "finished",
        };
        f.debug_struct("NextValue")
            .field("key", &self.buffer.shared.key)
            .field("state", &state)
            .finish()
    }
}

impl Future for NextValue<'_> {
    type Output = Result<i64>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<i64>> {
        let this = &mut *self;
        loop {
            match std::mem::replace(&mut this.state, NextState::Finished) {
                NextState::Taken(Ok(value)) => return Poll::Ready(Ok(value)),
                NextState::Taken(Err(exhausted)) => {
                    this.state = NextState::Waiting(Box::pin(this.buffer.next_after(exhausted)));
                }
                NextState::Waiting(mut waiting) => {
                    let poll = waiting.as_mut().poll(cx);
                    if poll.is_pending() {
                        this.state = NextState::Waiting(waiting);
                    }
                    return poll;
                }
                NextState::Finished => panic!("SegmentBuffer::next polled after it completed"),
            }
        }
    }
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

impl std::fmt::Debug for SegmentBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentBuffer")
            .field("key", &self.shared.key)
            .field("next_range_size", &self.next_range_size())
            .finish_non_exhaustive()
    }
}

impl SegmentBuffer {
    pub(crate) fn new(source: Arc<dyn IdSource>, key: &str, options: SegmentOptions) -> Self {
        let size = options
            .initial_size
            .clamp(options.min_size.max(1), options.max_size.max(1));
        SegmentBuffer {
            shared: Arc::new(Shared {
                source,
                key: key.to_string(),
                current: RangeSlots::new(),
                installed_at: Mutex::new(Instant::now()),
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
    ///
    /// The value is taken when `next` is called; the returned future is ready at once unless
    /// the range was used up. A future dropped without being awaited skips its value (no
    /// other caller gets it). (A plain `async fn` would carry the slow path's state in every
    /// call's future, and the fast path would pay for it whenever the compiler does not
    /// inline it.)
    #[inline]
    pub fn next(&self) -> NextValue<'_> {
        NextValue {
            buffer: self,
            state: NextState::Taken(self.take()),
        }
    }

    /// The slow path of [`next`](Self::next): switches ranges until one has a value.
    async fn next_after(&self, mut exhausted: Epoch) -> Result<i64> {
        loop {
            self.switch_from(exhausted).await?;
            match self.take() {
                Ok(value) => return Ok(value),
                Err(epoch) => exhausted = epoch,
            }
        }
    }

    /// The next value if the current range has one, without waiting: one atomic add on
    /// the range's cursor (and, once per range, starting the prefetch).
    #[inline]
    pub fn try_next(&self) -> Option<i64> {
        self.take().ok()
    }

    /// A value of the current range, or the epoch of the used-up range.
    #[inline]
    fn take(&self) -> std::result::Result<i64, Epoch> {
        match self.shared.current.take() {
            Taken::Value {
                value,
                prefetch_due,
            } => {
                if prefetch_due {
                    self.start_prefetch();
                }
                Ok(value)
            }
            Taken::Exhausted(epoch) => Err(epoch),
        }
    }

    /// Kept out of line so that the fast path stays small.
    #[cold]
    #[inline(never)]
    fn start_prefetch(&self) {
        Arc::clone(&self.shared).start_prefetch();
    }

    /// The size the next range will have.
    pub fn next_range_size(&self) -> u64 {
        self.shared.size.load(Ordering::Relaxed)
    }

    /// Replaces the used-up range of epoch `exhausted`: with the prefetched one if it is
    /// there, else after waiting for the fetch under way, else by fetching now.
    async fn switch_from(&self, exhausted: Epoch) -> Result<()> {
        let shared = &self.shared;
        let _switching = shared.switching.lock().await;
        loop {
            if shared.current.epoch() != exhausted {
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
    /// Only one caller installs at a time: it holds `switching`.
    fn install(&self, range: RangeSpec) {
        *self.installed_at.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let replaced = self.current.install(range);
        Metrics::add(&self.source.metrics().ids_served, replaced.count);
    }

    /// Starts fetching the next range in the background, unless one is already coming.
    fn start_prefetch(self: Arc<Self>) {
        if self.fetching.swap(true, Ordering::AcqRel) {
            return;
        }
        self.resize();
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

    /// Sizes the next range from how fast the current one is being used: its prefetch
    /// point has just been reached.
    fn resize(&self) {
        let current = self.current.current();
        let used = current.prefetch_at.max(1);
        let elapsed = self
            .installed_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed();
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
    async fn fetch(&self) -> Result<RangeSpec> {
        let size = self.size.load(Ordering::Relaxed);
        let range = self.source.segment_range(&self.key, size).await?;
        let prefetch_at =
            ((range.count as f64) * self.options.prefetch_after.clamp(0.0, 1.0)) as u64;
        Ok(RangeSpec {
            first: range.first,
            step: range.step as i64,
            count: range.count,
            prefetch_at: prefetch_at.min(range.count.saturating_sub(1)),
        })
    }
}

#[cfg(test)]
mod tests {
    //! Range sizing and prefetch, on tokio's paused clock: time moves only when a test
    //! advances it.
    use std::time::Duration;

    use super::*;
    use crate::source::counting::CountingSource;

    fn new_buffer(initial: u64) -> (Arc<CountingSource>, SegmentBuffer) {
        let source = Arc::new(CountingSource::default());
        let options = SegmentOptions::default()
            .initial_size(initial)
            .min_size(10)
            .max_size(1000)
            .prefetch_after(0.1)
            .target_duration(Duration::from_secs(10));
        (source.clone(), SegmentBuffer::new(source, "k", options))
    }

    /// Takes `n` values, then lets the background prefetch run.
    async fn take(buffer: &SegmentBuffer, n: usize) -> Vec<i64> {
        let mut values = Vec::new();
        for _ in 0..n {
            values.push(buffer.next().await.unwrap());
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        values
    }

    fn sizes(source: &CountingSource) -> Vec<u64> {
        source.range_sizes.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_range_used_faster_than_the_target_doubles_the_next_up_to_the_maximum() {
        let (source, buffer) = new_buffer(100);
        assert_eq!(take(&buffer, 11).await, (1..=11).collect::<Vec<_>>());
        assert_eq!(sizes(&source), [100, 200], "prefetched at 10% use, doubled");
        take(&buffer, 89 + 21).await; // the rest of the first range, 10% of the second
        assert_eq!(sizes(&source), [100, 200, 400]);

        let (source, buffer) = new_buffer(600);
        take(&buffer, 61).await;
        assert_eq!(sizes(&source), [600, 1000], "bounded by max_size");
    }

    #[tokio::test(start_paused = true)]
    async fn a_range_lasting_over_twice_the_target_halves_the_next_down_to_the_minimum() {
        let (source, buffer) = new_buffer(100);
        take(&buffer, 1).await;
        // 10 values in 5 s: the range of 100 would last 50 s, over twice the 10 s target.
        tokio::time::advance(Duration::from_secs(5)).await;
        take(&buffer, 10).await;
        assert_eq!(sizes(&source), [100, 50]);

        let (source, buffer) = new_buffer(15);
        take(&buffer, 1).await;
        tokio::time::advance(Duration::from_secs(60)).await;
        take(&buffer, 1).await;
        assert_eq!(sizes(&source), [15, 10], "bounded by min_size");
    }

    #[tokio::test(start_paused = true)]
    async fn a_range_lasting_about_the_target_keeps_its_size() {
        let (source, buffer) = new_buffer(100);
        take(&buffer, 1).await;
        // 10 values in 1.5 s: 15 s for the range, within 1 to 2 times the target.
        tokio::time::advance(Duration::from_millis(1500)).await;
        take(&buffer, 10).await;
        assert_eq!(sizes(&source), [100, 100]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_range_is_at_hand_before_the_current_one_runs_out() {
        let (source, buffer) = new_buffer(100);
        let first = take(&buffer, 100).await;
        assert_eq!(
            sizes(&source).len(),
            2,
            "fetched in the background at 10% use"
        );
        // The 101st value comes from the prefetched range: no fetch at the switch.
        assert_eq!(buffer.try_next(), None, "the current range is used up");
        let next = buffer.next().await.unwrap();
        assert_eq!((first[99], next), (100, 101));
        assert_eq!(sizes(&source).len(), 2);
        assert_eq!(source.metrics().ids_served.load(Ordering::Relaxed), 100);
    }
}
