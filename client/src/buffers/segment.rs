//! The client half of Leaf-segment: ranges taken from the server with
//! `SEGMENT.NEXT key COUNT n`, handed out locally.
//!
//! - Fast path, lock-free: taking a value is one atomic `fetch_add` on a cursor plus a few
//!   plain loads (see `range_slots.rs`); no value goes to two callers (a caller that loses
//!   a race with a range switch skips a value rather than share one).
//! - Cooperative: values take units of tokio's task budget (`cooperate.rs`), so that a
//!   caller that never yields still lets its siblings and the background fetch run.
//! - Double buffer: the next range is fetched in the background, timed and sized from
//!   measurements as `segment_plan.rs` says.
//! - One fetch in flight (`fetch_flight.rs`), run as its own task; callers that find both
//!   ranges used up wait for it, and get its error if it fails.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::time::Instant;

use crate::buffers::cooperate::poll_budget;
use crate::buffers::fetch_flight::{self, FetchFlight};
use crate::buffers::measured::Measured;
use crate::buffers::options::SegmentOptions;
use crate::buffers::range_slots::{Block, Epoch, RangeSlots, RangeSpec, Taken, TakenBlock};
use crate::buffers::segment_plan::{self, RangeBounds, MIN_RATE_SAMPLE};
use crate::buffers::source::IdSource;
use crate::buffers::wait_stats::WaitStats;
use crate::error::Result;
use crate::metrics::Metrics;

/// What the slow path knows: the prefetched range and the measurements that size the next.
struct Reserve {
    /// The prefetched range, waiting for the current one to run out.
    spare: Option<RangeSpec>,
    measured: Measured,
    /// When the current range was installed.
    installed_at: Instant,
    /// When a caller first found the current range used up.
    exhausted_at: Option<Instant>,
    /// Size of the next range to fetch.
    size: u64,
}

struct Shared {
    source: Arc<dyn IdSource>,
    key: String,
    bounds: RangeBounds,
    /// The range being handed out.
    current: RangeSlots,
    /// Everything else, behind a lock the fast path never takes. Installs happen under it.
    reserve: Mutex<Reserve>,
    flight: FetchFlight,
}

/// The future of [`SegmentBuffer::next`] and [`LocalSegmentBuffer::next`](crate::LocalSegmentBuffer::next).
#[must_use = "futures do nothing unless awaited"]
pub struct NextValue<'a> {
    state: NextState<'a>,
}

enum NextState<'a> {
    /// The value taken when `next` was called.
    Taken(i64),
    /// The value taken when `next` was called, at a checkpoint (one value in
    /// `VALUES_PER_UNIT`): handed out once the task has taken a unit of its cooperative
    /// budget.
    TakenAtCheckpoint(i64),
    /// The range was used up: the slow path starts at the first poll.
    Exhausted(&'a SegmentBuffer, Epoch),
    /// Waiting for the next range.
    Waiting(Pin<Box<dyn Future<Output = Result<i64>> + Send + 'a>>),
    Finished,
}

impl std::fmt::Debug for NextValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            NextState::Taken(_) | NextState::TakenAtCheckpoint(_) => "ready",
            NextState::Exhausted(..) => "range used up",
            NextState::Waiting(_) => "waiting for the next range",
            NextState::Finished => "finished",
        };
        f.debug_struct("NextValue").field("state", &state).finish()
    }
}

impl Future for NextValue<'_> {
    type Output = Result<i64>;

    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<i64>> {
        let this = &mut *self;
        if let NextState::Taken(value) = this.state {
            this.state = NextState::Finished;
            return Poll::Ready(Ok(value));
        }
        this.poll_slow(cx)
    }
}

impl<'a> NextValue<'a> {
    /// A value in hand, handed out at the first poll (after a unit of the task's budget if
    /// `cooperate`).
    #[inline(always)]
    pub(crate) fn taken(value: i64, cooperate: bool) -> Self {
        let state = if cooperate {
            NextState::TakenAtCheckpoint(value)
        } else {
            NextState::Taken(value)
        };
        NextValue { state }
    }

    /// The value `future` gets from the server.
    pub(crate) fn waiting(future: impl Future<Output = Result<i64>> + Send + 'a) -> Self {
        NextValue {
            state: NextState::Waiting(Box::pin(future)),
        }
    }

    #[cold]
    #[inline(never)]
    fn poll_slow(&mut self, cx: &mut Context<'_>) -> Poll<Result<i64>> {
        if let NextState::TakenAtCheckpoint(value) = self.state {
            if poll_budget(cx).is_pending() {
                // The task used up its budget: give the worker back (to the tasks queued on
                // it, the fetch among them); the value stays ours.
                return Poll::Pending;
            }
            self.state = NextState::Finished;
            return Poll::Ready(Ok(value));
        }
        if let NextState::Exhausted(buffer, epoch) = self.state {
            self.state = NextState::Waiting(Box::pin(buffer.next_after(epoch)));
        }
        match &mut self.state {
            NextState::Waiting(waiting) => {
                let poll = waiting.as_mut().poll(cx);
                if poll.is_ready() {
                    self.state = NextState::Finished;
                }
                poll
            }
            _ => panic!("SegmentBuffer::next polled after it completed"),
        }
    }
}

/// A local buffer of segment values for one key. Cheap to clone; clones share the buffer.
///
/// Values are unique across every buffer and client of a deployment (they come from ranges
/// the servers hand out once) and increase within a range; across ranges from different
/// nodes (after a failover) they are unique but not ordered.
///
/// Callers wait on the server only when both the current and the prefetched range are used
/// up (at first use, or when demand outruns what the measurements predicted); such a wait
/// lasts at most one fetch — bounded by the client's `connect_timeout` (when a new
/// connection is needed) plus `response_timeout` — and ends with that fetch's error if it
/// fails ([`crate::Error::is_retryable`] tells whether to try again).
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
        let bounds = RangeBounds {
            min_size: options.min_size.max(1),
            max_size: options.max_size.max(options.min_size.max(1)),
            target_duration: options.target_duration,
            prefetch_after: options.prefetch_after,
        };
        let size = options.initial_size.clamp(bounds.min_size, bounds.max_size);
        SegmentBuffer {
            shared: Arc::new(Shared {
                source,
                key: key.to_string(),
                bounds,
                current: RangeSlots::new(),
                reserve: Mutex::new(Reserve {
                    spare: None,
                    measured: Measured::default(),
                    installed_at: Instant::now(),
                    exhausted_at: None,
                    size,
                }),
                flight: FetchFlight::default(),
            }),
        }
    }

    /// The next value. Waits for the server only when no range is at hand.
    ///
    /// The value is taken when `next` is called; the returned future is ready at once unless
    /// the range was used up, or the task has used up its cooperative budget: one value in
    /// 256 takes a unit of it, and a task that has taken 128 units since it last yielded
    /// yields once, keeping its value, so that the runtime runs the other tasks queued on
    /// its worker (other callers of this buffer, the background fetch). A loop on `next`
    /// therefore lets its siblings run every 32,768 values: about 0.1 ms for a task alone,
    /// a few milliseconds while tasks on two workers contend for the buffer (each value is
    /// then a cache miss). A future dropped without being awaited skips its value (no other
    /// caller gets it).
    #[inline(always)]
    pub fn next(&self) -> NextValue<'_> {
        NextValue {
            state: match self.take() {
                Ok((value, false)) => NextState::Taken(value),
                Ok((value, true)) => NextState::TakenAtCheckpoint(value),
                Err(epoch) => NextState::Exhausted(self, epoch),
            },
        }
    }

    /// The slow path of [`next`](Self::next): switches ranges until one has a value.
    async fn next_after(&self, mut exhausted: Epoch) -> Result<i64> {
        loop {
            self.switch_from(exhausted).await?;
            match self.take() {
                Ok((value, _)) => return Ok(value),
                Err(epoch) => exhausted = epoch,
            }
        }
    }

    /// The next value if the current range has one, without waiting: one atomic add on
    /// the range's cursor (and, once per range, starting the prefetch).
    #[inline]
    pub fn try_next(&self) -> Option<i64> {
        self.take().ok().map(|(value, _)| value)
    }

    /// Up to `wanted` values of the current range, taken with one atomic add (see
    /// `LocalSegmentBuffer`), and whether the caller takes a unit of the cooperative budget
    /// before using them (the block holds a checkpoint); or the epoch of the used-up range.
    pub(crate) fn take_block(&self, wanted: u64) -> std::result::Result<(Block, bool), Epoch> {
        match self.shared.current.take_block(wanted) {
            TakenBlock::Values {
                block,
                prefetch_due,
                checkpoint,
            } => {
                if prefetch_due {
                    self.prefetch();
                }
                Ok((block, checkpoint))
            }
            TakenBlock::Exhausted(epoch) => Err(epoch),
        }
    }

    /// A value of the current range and whether its caller takes a unit of the cooperative
    /// budget before using it (one value in
    /// [`VALUES_PER_UNIT`](crate::buffers::cooperate::VALUES_PER_UNIT), a checkpoint), or the epoch
    /// of the used-up range.
    #[inline(always)]
    fn take(&self) -> std::result::Result<(i64, bool), Epoch> {
        match self.shared.current.take() {
            Taken::Value {
                value,
                prefetch_due,
                checkpoint,
            } => {
                if prefetch_due {
                    self.prefetch();
                }
                Ok((value, checkpoint))
            }
            Taken::Exhausted(epoch) => Err(epoch),
        }
    }

    /// Starts fetching the next range unless one is at hand or under way. Once per range:
    /// out of line, so that the fast path stays one atomic add and a test or two.
    #[cold]
    #[inline(never)]
    fn prefetch(&self) {
        let shared = &self.shared;
        let mut reserve = shared.lock();
        let current = shared.current.current();
        if current.prefetch_at >= MIN_RATE_SAMPLE {
            // The part used so far says how fast values go now.
            let elapsed = reserve.installed_at.elapsed();
            reserve
                .measured
                .observe_use(current.prefetch_at + 1, elapsed);
        }
        if reserve.spare.is_none() {
            drop(reserve);
            Shared::launch(shared);
        }
    }

    /// The size the next range will have.
    pub fn next_range_size(&self) -> u64 {
        self.shared.lock().size
    }

    /// How many calls waited for a range from the server, and the longest wait since the
    /// last read.
    pub fn wait_stats(&self) -> WaitStats {
        self.shared.flight.wait_stats()
    }

    /// Replaces the used-up range of epoch `exhausted`: with the prefetched one if it is
    /// there, else after the fetch under way (or one started now) lands. Returns that
    /// fetch's error if it failed.
    pub(crate) async fn switch_from(&self, exhausted: Epoch) -> Result<()> {
        let shared = &self.shared;
        let switched = || {
            let mut reserve = shared.lock();
            if shared.current.epoch() != exhausted {
                return Some(()); // another caller switched
            }
            let now = Instant::now();
            reserve.exhausted_at.get_or_insert(now);
            let range = reserve.spare.take()?;
            shared.install(&mut reserve, range, now);
            Some(())
        };
        shared
            .flight
            .take_or_wait(switched, || Shared::launch(shared))
            .await
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Reserve> {
        crate::lock::lock(&self.reserve)
    }

    /// Makes `range` current, with its prefetch point placed from the measurements. The
    /// values of the range it replaces are counted as served now, in one add, rather than
    /// one shared atomic add per value on the fast path.
    fn install(&self, reserve: &mut Reserve, mut range: RangeSpec, now: Instant) {
        let replaced = self.current.current();
        if let Some(exhausted_at) = reserve.exhausted_at.take() {
            if replaced.count >= MIN_RATE_SAMPLE {
                let lasted = exhausted_at.saturating_duration_since(reserve.installed_at);
                reserve.measured.observe_use(replaced.count, lasted);
            }
        }
        range.prefetch_at =
            segment_plan::prefetch_index(range.count, &reserve.measured, &self.bounds);
        reserve.installed_at = now;
        if reserve.measured.rate > 0.0 {
            reserve.size = segment_plan::range_size(&reserve.measured, &self.bounds);
        }
        let replaced = self.current.install(range);
        Metrics::add(&self.source.metrics().ids_served, replaced.count);
    }

    /// Starts fetching the next range in its own task unless a fetch is under way; returns
    /// the flight to wait for.
    fn launch(self: &Arc<Self>) -> crate::buffers::fetch_flight::Flight {
        fetch_flight::launch(
            self,
            |shared| &shared.flight,
            |shared| async move {
                let size = {
                    let mut reserve = shared.lock();
                    // Before a rate is measured, the configured first size.
                    if reserve.measured.rate > 0.0 {
                        reserve.size = segment_plan::range_size(&reserve.measured, &shared.bounds);
                    }
                    reserve.size
                };
                let started = Instant::now();
                let outcome = shared.source.segment_range(&shared.key, size).await;
                let mut reserve = shared.lock();
                reserve.measured.observe_round_trip(started.elapsed());
                match outcome {
                    Ok(range) => {
                        reserve.spare = Some(RangeSpec {
                            first: range.first,
                            step: range.step as i64,
                            count: range.count,
                            prefetch_at: u64::MAX, // placed at install
                        });
                        None
                    }
                    Err(error) => {
                        drop(reserve);
                        tracing::warn!(key = %shared.key, %error, "fetching a segment range failed");
                        Some(error)
                    }
                }
            },
        )
    }
}

#[cfg(test)]
pub(crate) mod tests;
