//! A prefetching snowflake cache (the idea of Baidu UidGenerator's ring buffer): IDs are
//! fetched in batches, one round trip each, and handed out locally.
//!
//! - One fetch in flight (`fetch_flight.rs`), run as its own task; callers that find the
//!   cache empty wait for it.
//! - Timed and sized from measurements (`fetch_plan.rs`): a refill starts once the cached IDs
//!   would last less than one and a half round trips (plus 3 ms) at the measured rate, and
//!   a batch holds one round trip plus 2 ms of use (doubling while callers wait), at most
//!   `batch` IDs. A batch that lasts about one round trip keeps IDs young: at steady rates
//!   an ID is handed out about two round trips plus 5 ms after the server issued it.
//! - Ordered: IDs are handed out under one lock, in the order they were issued; an ID not
//!   above the last one handed out (a batch from another node after a failover) is thrown
//!   away, so IDs from one cache strictly increase.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
use crate::fetch_flight::{FetchFlight, Flight, LandOnDrop};
use crate::fetch_plan::{self, Pace};
use crate::id::Id;
use crate::metrics::Metrics;
use crate::settings::SnowflakeCacheOptions;
use crate::source::IdSource;
use crate::wait_stats::{WaitCounter, WaitStats, WaitTimer};

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
    pace: Pace,
    /// IDs handed out since `sampled_at`, for the next rate sample.
    handed: u64,
    sampled_at: Instant,
    /// Since when callers find the cache empty, and for how long it was empty since
    /// `sampled_at`: the rate is measured over the time IDs were at hand, since callers
    /// that wait take none.
    dry_since: Option<Instant>,
    dry: Duration,
    /// The size of the last batch asked for.
    last_batch: u32,
    /// Whether a caller found the cache empty since the last batch was asked for.
    callers_waited: bool,
}

struct Shared {
    source: Arc<dyn IdSource>,
    key: String,
    options: SnowflakeCacheOptions,
    store: Mutex<Store>,
    flight: FetchFlight,
    /// IDs thrown away: older than `max_age`, or out of order.
    discarded: AtomicU64,
    waits: WaitCounter,
}

/// Prefetched snowflake IDs for one key. Cheap to clone; clones share the cache.
///
/// What a caller can rely on:
/// - **Order**: the IDs one cache hands out strictly increase in the order the calls take
///   them, across all tasks and clones: if one `next` returns before another starts, the
///   second returns a larger ID. (Different caches, even for the same key, are ordered only
///   as the servers' IDs are: by time, k-sorted.)
/// - **Staleness**: an ID is never handed out more than `max_age` after its batch arrived
///   (older ones are thrown away). At steady rates batches are sized to last about one round
///   trip and refills timed to land just before the cache runs dry, so an ID's time is
///   usually within about two round trips plus 5 ms of when it is handed out. At rates so
///   low that one ID lasts longer than that, an ID waits in the cache for the next caller,
///   up to `max_age`.
/// - **Waiting**: a caller waits on the server only when the cache is empty (at first use,
///   or when demand jumps); the wait lasts at most one fetch — bounded by the client's
///   `connect_timeout` (when a new connection is needed) plus `response_timeout` — and
///   ends with that fetch's error if it fails.
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
                    pace: Pace::default(),
                    handed: 0,
                    sampled_at: Instant::now(),
                    dry_since: None,
                    dry: Duration::ZERO,
                    last_batch: FIRST_BATCH / 2,
                    callers_waited: true,
                }),
                flight: FetchFlight::default(),
                discarded: AtomicU64::new(0),
                waits: WaitCounter::default(),
            }),
        }
    }

    /// The next ID: from the cache when it has a fresh one, else after the fetch under way
    /// (or one started now) lands. Takes a unit of the task's cooperative budget, so that a
    /// loop over a full cache still lets the runtime run the refill.
    pub async fn next(&self) -> Result<i64> {
        tokio::task::consume_budget().await;
        let shared = &self.shared;
        let mut waited_for: Option<Flight> = None;
        let mut timer = WaitTimer::new(&shared.waits);
        loop {
            let landed = shared.flight.landed();
            tokio::pin!(landed);
            landed.as_mut().enable();
            let (id, refill) = shared.take();
            if refill {
                Shared::launch(shared);
            }
            if let Some(id) = id {
                Metrics::add(&shared.source.metrics().ids_served, 1);
                return Ok(id);
            }
            if let Some(error) = waited_for.and_then(|flight| shared.flight.failure_since(flight)) {
                return Err(error);
            }
            waited_for = Some(Shared::launch(shared));
            timer.waiting();
            landed.await;
        }
    }

    /// The next ID as an [`Id`], to write in any of its forms (`id.to_string()`, or
    /// `id.format(IdFormat::Base62)` for a short sortable string).
    pub async fn next_id(&self) -> Result<Id> {
        self.next().await.map(Id::from)
    }

    /// How many fresh IDs the cache holds now.
    pub fn cached(&self) -> usize {
        let mut store = self.shared.lock();
        self.shared.drop_stale(&mut store);
        store.cached
    }

    /// How many calls waited for a batch from the server, and the longest wait since the
    /// last read.
    pub fn wait_stats(&self) -> WaitStats {
        self.shared.waits.read()
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

    /// Throws away used-up batches and those older than `max_age`; returns how many IDs.
    fn drop_stale(&self, store: &mut Store) -> usize {
        let mut thrown = 0;
        while let Some(batch) = store.batches.front() {
            let stale = batch.fetched.elapsed() > self.options.max_age;
            if !batch.ids.is_empty() && !stale {
                break;
            }
            thrown += batch.ids.len();
            store.cached -= batch.ids.len();
            store.batches.pop_front();
        }
        self.discarded.fetch_add(thrown as u64, Ordering::Relaxed);
        thrown
    }

    /// Takes a fresh ID if there is one, and says whether a refill is due.
    fn take(&self) -> (Option<i64>, bool) {
        let mut store = self.lock();
        let thrown = self.drop_stale(&mut store);
        let id = store
            .batches
            .front_mut()
            .and_then(|batch| batch.ids.pop_front());
        match id {
            Some(id) => {
                store.cached -= 1;
                store.handed += 1;
                store.last = Some(id);
            }
            None => {
                store.dry_since.get_or_insert_with(Instant::now);
                // Demand outran the batches, unless they only grew too old (a low rate).
                store.callers_waited |= thrown == 0;
            }
        }
        let due = fetch_plan::snowflake_refill_due(store.cached, &store.pace);
        (id, due && !self.flight.is_running())
    }

    /// Starts a refill in its own task unless one is under way; returns the flight to wait
    /// for.
    fn launch(self: &Arc<Self>) -> Flight {
        let flight = match self.flight.start() {
            Ok(flight) => flight,
            Err(running) => return running,
        };
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let landing = LandOnDrop::new(&shared.flight, flight);
            let count = shared.plan_batch();
            let started = Instant::now();
            let outcome = shared.source.snowflakes(&shared.key, count).await;
            let error = match outcome {
                Ok(ids) => {
                    Metrics::add(&shared.source.metrics().snowflake_batches_fetched, 1);
                    shared.store_batch(ids, started);
                    None
                }
                Err(error) => {
                    shared.lock().pace.observe_round_trip(started.elapsed());
                    tracing::warn!(key = %shared.key, %error, "fetching snowflake IDs failed");
                    Some(error)
                }
            };
            landing.land(error);
        });
        flight
    }

    /// The size of the batch to fetch now, from the rate since the last one was asked for.
    fn plan_batch(&self) -> u32 {
        let mut store = self.lock();
        let now = Instant::now();
        if let Some(since) = store.dry_since {
            store.dry += now.saturating_duration_since(since);
            store.dry_since = Some(now);
        }
        let elapsed = now.saturating_duration_since(store.sampled_at);
        // Callers that waited took nothing meanwhile: a rate measured over a span that was
        // mostly dry says little about demand, so the batch doubles instead.
        let starved = store.callers_waited && store.dry * 4 >= elapsed;
        // The rate over the time IDs were at hand: callers that waited took none.
        let at_hand = elapsed.saturating_sub(store.dry);
        let measured = at_hand >= fetch_plan::MIN_SNOWFLAKE_RATE_SPAN && store.handed > 0;
        if measured {
            let handed = store.handed;
            store.pace.observe_use(handed, at_hand);
        }
        if measured || starved {
            store.handed = 0;
            store.sampled_at = now;
            store.dry = Duration::ZERO;
        }
        let count = fetch_plan::snowflake_batch(
            &store.pace,
            store.last_batch,
            starved || (store.callers_waited && !measured),
            self.options.batch.max(1),
        );
        store.last_batch = count;
        store.callers_waited = false;
        count
    }

    /// Adds a fetched batch, keeping only IDs above every ID cached or handed out.
    fn store_batch(&self, ids: Vec<i64>, started: Instant) {
        let mut store = self.lock();
        store.pace.observe_round_trip(started.elapsed());
        if let Some(since) = store.dry_since.take() {
            store.dry += Instant::now().saturating_duration_since(since);
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
        store.batches.push_back(Batch {
            ids,
            fetched: Instant::now(),
        });
    }
}

#[cfg(test)]
mod tests;
