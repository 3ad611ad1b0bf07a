//! A prefetching snowflake cache (the idea of Baidu UidGenerator's ring buffer): IDs are
//! fetched in batches, one round trip each, and handed out locally.
//!
//! - One fetch in flight (`fetch_flight.rs`), run as its own task; callers that find the
//!   cache empty wait for it.
//! - Timed and sized from measurements, as `snowflake_plan.rs` says (callers' rate and
//!   bursts from `demand.rs`). After a batch grown fourfold arrives to waiting callers, the
//!   next is sized only once they have taken their backlog from it ([`CATCH_UP_TICKS`], or
//!   sooner if it runs dry): grown again if it fell short, by the rate if it did not.
//! - Timed for bursts far apart: a due refill waits on a timer to land just before the
//!   burst that needs it ([`snowflake_plan::refill_delay`]); a caller that finds the cache
//!   empty starts it at once.
//! - Young: an ID older than [`snowflake_plan::young_limit`] is thrown away.
//! - Paced: a batch refused with DRIFT naming when it fits is asked for again then (for up
//!   to `PACED_RETRY_FOR`): the cache chose its size, so the server's pace is a wait.
//! - Ordered: IDs are handed out under one lock, in the order they were issued; an ID not
//!   above the last one handed out (a batch from another node after a failover) is thrown
//!   away, so IDs from one cache strictly increase.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::buffers::demand::DemandMeter;
use crate::buffers::fetch_flight::{self, FetchFlight, Flight};
use crate::buffers::measured::Measured;
use crate::buffers::options::SnowflakeCacheOptions;
use crate::buffers::snowflake_plan;
use crate::buffers::source::IdSource;
use crate::buffers::wait_stats::WaitStats;
use crate::error::Result;
use crate::id::Id;
use crate::metrics::Metrics;

/// How long after a batch that callers waited for arrives they are taking their backlog
/// from it, at least: a task paced by tokio's 1 ms timer finishes what fell due before it
/// waited, sleeps a tick, then takes what fell due meanwhile.
const CATCH_UP_TICKS: Duration = Duration::from_millis(2);

/// How long a batch the server refused for pacing its ID clock (DRIFT: just restarted with
/// its restart fence on, or past `max-drift-ms` after bursts) is asked for again, each time
/// when the server said it fits, before the callers waiting for it get the refusal. The
/// cache chose the batch's size, not its callers: a pace the server sets is a wait, not an
/// error, as long as it is short.
const PACED_RETRY_FOR: Duration = Duration::from_secs(1);

/// The first batch, before a rate is measured.
const FIRST_BATCH: u32 = 16;

/// One fetched batch: its IDs (increasing) and when it arrived.
struct Batch {
    ids: VecDeque<i64>,
    fetched: Instant,
}

/// The cache's IDs and the measurements that time and size its refills.
struct Store {
    batches: VecDeque<Batch>,
    /// IDs cached in all batches.
    cached: usize,
    /// The last ID handed out (or thrown away for order): every later ID is above it.
    last: Option<i64>,
    /// The measured round trip, and the rate as `demand` last estimated it.
    measured: Measured,
    demand: DemandMeter,
    /// The size of the last batch asked for.
    last_batch: u32,
    /// Whether a caller found the cache empty since the last batch was asked for (or since
    /// a fourfold batch arrived, see `backlog_until`).
    callers_waited: bool,
    /// How many batches in a row callers waited for.
    waits_in_a_row: u32,
    /// Whether callers found the cache empty since the last batch arrived: what they take
    /// at once when the next one arrives is their backlog.
    callers_waiting: bool,
    /// Until when IDs are taken by callers catching up after waiting for a batch: their
    /// backlog, taken at once, is not a burst they make by habit.
    catch_up_until: Option<Instant>,
    /// Until when callers that waited for a fourfold batch take their backlog from it (see
    /// `CATCH_UP_TICKS`). No refill starts meanwhile unless the cache runs dry: the next
    /// batch is sized once it is known whether this one covered them (grown again if not,
    /// by the rate if so). Sized at the first take after the arrival, batches went on
    /// growing fourfold for a shortage the batch at hand had already met: to 100,000 IDs
    /// for a cold task taking 50,000 a second through a 50 ms round trip, thrown away.
    backlog_until: Option<Instant>,
    /// When the refill under way is to start, if it waits for its time (see
    /// `snowflake_plan::refill_delay`); cleared by a caller that finds the cache
    /// empty, which starts it at once.
    refill_at: Option<Instant>,
}

impl Store {
    /// Brings the measured burst up to date with what callers took lately, as of `now`.
    fn refresh_burst(&mut self, now: Instant) {
        self.measured.burst = self.demand.largest_burst(now);
    }

    /// How long an ID may be cached before it is handed out (see
    /// `snowflake_plan::young_limit`), as of `now`.
    fn young_limit(&mut self, now: Instant, max_age: Duration) -> Duration {
        self.refresh_burst(now);
        snowflake_plan::young_limit(&self.measured, max_age)
    }

    /// How long the cached IDs last from `now` at the measured rate (see
    /// `snowflake_plan::time_left`).
    fn time_left(&self, now: Instant, limit: Duration) -> Duration {
        let batches = self.batches.iter().map(|batch| {
            let young_until = batch.fetched + limit;
            (batch.ids.len(), young_until.saturating_duration_since(now))
        });
        snowflake_plan::time_left(batches, &self.measured)
    }
}

struct Shared {
    source: Arc<dyn IdSource>,
    key: String,
    options: SnowflakeCacheOptions,
    store: Mutex<Store>,
    flight: FetchFlight,
    /// Wakes a refill waiting for its time when callers find the cache empty.
    refill_now: Notify,
    /// IDs thrown away: older than `max_age`, or out of order.
    discarded: AtomicU64,
}

/// Prefetched snowflake IDs for one key. Cheap to clone; clones share the cache.
///
/// What a caller can rely on:
/// - **Order**: the IDs one cache hands out strictly increase in the order the calls take
///   them, across all tasks and clones: if one `next` returns before another starts, the
///   second returns a larger ID. (Different caches, even for the same key, are ordered only
///   as the servers' IDs are: by time, k-sorted.)
/// - **Staleness**: batches are sized to last about one round trip and refills timed to
///   land just before the cache runs dry (for callers that take in bursts, just before the
///   burst that needs it), so an ID's time is within about two round trips of when it is
///   handed out. No ID is handed out more than about two round trips (plus a few
///   milliseconds, and three intervals between bursts for callers that take in bursts)
///   after its batch arrived, nor more than `max_age`: older ones are thrown away (see
///   [`SnowflakeCache::discarded`]). At rates so low that one ID lasts longer than that,
///   the cache keeps one ID for the next caller, up to `max_age`.
/// - **Waiting**: a caller waits on the server only when the cache is empty (at first use,
///   or when demand jumps); the wait lasts at most one fetch — bounded by the client's
///   `connect_timeout` (when a new connection is needed) plus `response_timeout` — and
///   ends with that fetch's error if it fails. A batch the server refuses only to pace its
///   ID clock (`Error::Drift` naming when it fits: a server just restarted, whose restart
///   fence issues one millisecond's IDs per millisecond, or one past `max-drift-ms`) is
///   asked for again when it fits, for up to a second: callers wait those milliseconds
///   rather than get the refusal.
#[derive(Clone)]
pub struct SnowflakeCache {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SnowflakeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnowflakeCache")
            .field("key", &self.shared.key)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl SnowflakeCache {
    pub(crate) fn new(
        source: Arc<dyn IdSource>,
        key: &str,
        options: SnowflakeCacheOptions,
    ) -> Self {
        SnowflakeCache {
            shared: Arc::new(Shared {
                source,
                key: key.to_string(),
                options,
                store: Mutex::new(Store {
                    batches: VecDeque::new(),
                    cached: 0,
                    last: None,
                    measured: Measured::default(),
                    demand: DemandMeter::new(Instant::now()),
                    callers_waiting: false,
                    catch_up_until: None,
                    backlog_until: None,
                    refill_at: None,
                    last_batch: FIRST_BATCH / 2,
                    callers_waited: true,
                    waits_in_a_row: 0,
                }),
                flight: FetchFlight::default(),
                refill_now: Notify::new(),
                discarded: AtomicU64::new(0),
            }),
        }
    }

    /// The next ID: from the cache when it has a fresh one, else after the fetch under way
    /// (or one started now) lands. Takes a unit of the task's cooperative budget on every
    /// call, so that a loop over a full cache still lets the runtime run the refill and the
    /// other tasks on its worker (a call takes a lock, so one unit per ID costs little).
    pub async fn next(&self) -> Result<i64> {
        tokio::task::consume_budget().await;
        let shared = &self.shared;
        let take = || {
            let (id, refill) = shared.take();
            if refill {
                Shared::launch(shared);
            }
            id
        };
        let id = shared
            .flight
            .take_or_wait(take, || Shared::launch(shared))
            .await?;
        Metrics::add(&shared.source.metrics().ids_served, 1);
        Ok(id)
    }

    /// The next ID as an [`Id`], to write in any of its forms (`id.to_string()`, or
    /// `id.format(IdFormat::Base62)` for a short sortable string).
    pub async fn next_id(&self) -> Result<Id> {
        self.next().await.map(Id::from)
    }

    /// How many fresh IDs the cache holds now.
    pub fn cached(&self) -> usize {
        let mut store = self.shared.lock();
        self.shared.drop_stale(&mut store, Instant::now());
        store.cached
    }

    /// How many calls waited for a batch from the server, and the longest wait since the
    /// last read.
    pub fn wait_stats(&self) -> WaitStats {
        self.shared.flight.wait_stats()
    }

    /// How many fetched IDs were thrown away rather than handed out: older than `max_age`,
    /// or not above an ID already handed out (a batch from another node after a failover).
    pub fn discarded(&self) -> u64 {
        self.shared.discarded.load(Ordering::Relaxed)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        crate::lock::lock(&self.store)
    }

    /// Throws away used-up batches and those older than the young limit; returns how many
    /// IDs, and the limit.
    fn drop_stale(&self, store: &mut Store, now: Instant) -> (usize, Duration) {
        let limit = store.young_limit(now, self.options.max_age);
        let mut thrown = 0;
        while let Some(batch) = store.batches.front() {
            let stale = now.saturating_duration_since(batch.fetched) > limit;
            if !batch.ids.is_empty() && !stale {
                break;
            }
            thrown += batch.ids.len();
            store.cached -= batch.ids.len();
            store.batches.pop_front();
        }
        self.discarded.fetch_add(thrown as u64, Ordering::Relaxed);
        (thrown, limit)
    }

    /// Takes a fresh ID if there is one, and says whether a refill is due.
    fn take(&self) -> (Option<i64>, bool) {
        let now = Instant::now();
        let mut store = self.lock();
        let (thrown, limit) = self.drop_stale(&mut store, now);
        let id = store
            .batches
            .front_mut()
            .and_then(|batch| batch.ids.pop_front());
        match id {
            Some(id) => {
                store.cached -= 1;
                store.last = Some(id);
                if store.catch_up_until.is_some_and(|until| now < until) {
                    store.demand.took_catching_up(1, now);
                } else {
                    store.demand.took(1, now);
                }
                store.measured.rate = store.demand.rate();
            }
            None => {
                if thrown == 0 {
                    // Demand outran the batches (not: they only grew too old, a low rate).
                    store.callers_waited = true;
                    store.callers_waiting = true;
                }
                store.backlog_until = None;
                if store.refill_at.take().is_some() {
                    // The refill waiting for its time starts now.
                    self.refill_now.notify_waiters();
                }
            }
        }
        let time_left = store.time_left(now, limit);
        let due = snowflake_plan::refill_due(store.cached, time_left, &store.measured);
        let taking_backlog = store.backlog_until.is_some_and(|until| now < until);
        let refill = due && !taking_backlog && !self.flight.is_running();
        if refill && id.is_some() {
            // What the burst under way will still take is not there for the next ones.
            let beyond = (store.cached as u64).saturating_sub(store.demand.burst_left(now));
            store.refill_at = snowflake_plan::refill_delay(beyond, time_left, &store.measured)
                .map(|delay| now + delay);
        }
        (id, refill)
    }

    /// Starts a refill in its own task unless one is under way; returns the flight to wait
    /// for.
    fn launch(self: &Arc<Self>) -> Flight {
        fetch_flight::launch(
            self,
            |shared| &shared.flight,
            |shared| async move {
                let timed = shared.wait_for_refill_time().await;
                let count = shared.plan_batch(timed);
                let deadline = Instant::now() + PACED_RETRY_FOR;
                loop {
                    let started = Instant::now();
                    let error = match shared.source.snowflakes(&shared.key, count).await {
                        Ok(ids) => {
                            Metrics::add(&shared.source.metrics().snowflake_batches_fetched, 1);
                            shared.store_batch(ids, started);
                            return None;
                        }
                        Err(error) => error,
                    };
                    shared.lock().measured.observe_round_trip(started.elapsed());
                    match error.fits_in() {
                        Some(wait) if Instant::now() + wait <= deadline => {
                            tracing::debug!(key = %shared.key, count, ?wait, %error,
                                "the server paces its ID clock; asking again when the batch fits");
                            tokio::time::sleep(wait).await;
                        }
                        _ => {
                            tracing::warn!(key = %shared.key, %error, "fetching snowflake IDs failed");
                            return Some(error);
                        }
                    }
                }
            },
        )
    }

    /// Waits until the refill's time (if it has one) or until callers find the cache empty;
    /// returns whether the refill starts at its time.
    async fn wait_for_refill_time(&self) -> bool {
        let mut waited = false;
        loop {
            let woken = self.refill_now.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let Some(at) = self.lock().refill_at else {
                return false;
            };
            if Instant::now() >= at {
                self.lock().refill_at = None;
                return waited;
            }
            waited = true;
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                () = woken => {}
            }
        }
    }

    /// The size of the batch to fetch now, from the rate and bursts measured so far; `timed`
    /// when the refill started at its time (see `wait_for_refill_time`).
    fn plan_batch(&self, timed: bool) -> u32 {
        let mut store = self.lock();
        let now = Instant::now();
        store.refresh_burst(now);
        store.waits_in_a_row = if store.callers_waited {
            store.waits_in_a_row + 1
        } else {
            0
        };
        let planned = snowflake_plan::batch(
            &store.measured,
            store.last_batch,
            store.waits_in_a_row,
            self.options.batch.max(1),
        );
        // What the cache must still serve before the batch lands: the rest of the burst
        // under way and, for a refill started at its time, the whole bursts it holds beyond
        // that, which come before the refill lands. Beyond that, a part of a burst is a
        // surplus to leave out of the batch.
        let burst_left = store.demand.burst_left(now);
        let needed_first = if timed {
            let burst = store.measured.burst.max(1);
            let beyond = (store.cached as u64).saturating_sub(burst_left);
            burst_left + beyond / burst * burst
        } else {
            burst_left
        };
        let count = snowflake_plan::trimmed_batch(
            &store.measured,
            planned,
            store.cached,
            needed_first,
            store.demand.last_interval(),
        );
        store.last_batch = count;
        store.callers_waited = false;
        count
    }

    /// Adds a fetched batch, keeping only IDs above every ID cached or handed out.
    fn store_batch(&self, ids: Vec<i64>, started: Instant) {
        let mut store = self.lock();
        store.measured.observe_round_trip(started.elapsed());
        let now = Instant::now();
        if std::mem::take(&mut store.callers_waiting) {
            store.catch_up_until = Some(now + snowflake_plan::young_span(&store.measured));
            // `waits_in_a_row` is still what this batch was planned with.
            if snowflake_plan::grows_fourfold(store.waits_in_a_row) {
                store.backlog_until = Some(now + CATCH_UP_TICKS);
                // Whether callers fall short from now on is news about this batch.
                store.callers_waited = false;
            }
        }
        let floor = store
            .batches
            .back()
            .and_then(|batch| batch.ids.back().copied())
            .or(store.last);
        let fetched = ids.len();
        let ids: VecDeque<i64> = ids
            .into_iter()
            .filter(|&id| floor.is_none_or(|floor| id > floor))
            .collect();
        self.discarded
            .fetch_add((fetched - ids.len()) as u64, Ordering::Relaxed);
        store.cached += ids.len();
        store.batches.push_back(Batch { ids, fetched: now });
    }
}

#[cfg(test)]
mod tests;
