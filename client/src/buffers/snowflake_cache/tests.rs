//! The snowflake cache's rules on tokio's paused clock, with a counting source whose IDs
//! carry the (tokio) time they were issued.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::buffers::source::counting::CountingSource;
use crate::error::Error;

fn cache_with(source: &Arc<CountingSource>, options: SnowflakeCacheOptions) -> SnowflakeCache {
    SnowflakeCache::new(source.clone(), "k", options)
}

/// The round trip a counting source takes on the paused clock: each half of `nominal`
/// rounds up to a whole millisecond (tokio's timer).
fn effective_round_trip(nominal_ms: u64) -> Duration {
    Duration::from_millis(nominal_ms.div_ceil(2) * 2)
}

fn batches(source: &CountingSource) -> Vec<u32> {
    source.batch_sizes.lock().unwrap().clone()
}

/// What `n` calls, one every `every`, got: their IDs, how many waited for a fetch, and the
/// worst age of an ID (from its issue to its hand-out) among the calls after the first
/// `warm_up`. Waits are the cache's own count: on the paused clock, a call that yields
/// its task budget while a fetch sleeps lets the clock jump, which is not a wait.
struct Run {
    ids: Vec<i64>,
    waits: u64,
    /// IDs thrown away after the warm-up.
    discarded: u64,
    worst_age: Duration,
}

async fn take_paced(
    source: &CountingSource,
    cache: &SnowflakeCache,
    n: usize,
    every: Duration,
    warm_up: usize,
) -> Run {
    let mut run = Run {
        ids: Vec::new(),
        waits: 0,
        discarded: 0,
        worst_age: Duration::ZERO,
    };
    let (mut waits_before, mut discarded_before) = (0, 0);
    for i in 0..n {
        if i == warm_up {
            waits_before = cache.wait_stats().waits;
            discarded_before = cache.discarded();
        }
        let id = cache.next().await.unwrap();
        let now = Instant::now();
        if i >= warm_up {
            run.worst_age = run.worst_age.max(now - source.issued_at(id));
        }
        run.ids.push(id);
        tokio::time::advance(every).await;
    }
    run.waits = cache.wait_stats().waits - waits_before;
    run.discarded = cache.discarded() - discarded_before;
    run
}

#[tokio::test(start_paused = true)]
async fn at_a_steady_rate_nobody_waits_and_ids_are_at_most_two_round_trips_plus_10_ms_old() {
    for (round_trip_ms, every_us) in [(1, 1_000), (5, 20), (50, 1_000), (50, 20)] {
        let round_trip = Duration::from_millis(round_trip_ms);
        let source = Arc::new(CountingSource::with_round_trip(round_trip));
        let cache = cache_with(&source, SnowflakeCacheOptions::default());
        let every = Duration::from_micros(every_us);
        // Warm-up: two seconds of calls. A caller that makes its next call only after the
        // last one returned loses the calls it would have made while waiting, so the
        // cold start's doubling from 16 IDs runs at what it gets, not at 50,000 IDs/s:
        // at 50 ms it takes about 1.2 s.
        let warm_up = (2_000_000 / every_us) as usize;
        let run = take_paced(&source, &cache, warm_up * 2, every, warm_up).await;
        let case = format!("round trip {round_trip_ms} ms, a call every {every_us} µs");
        assert_eq!(run.waits, 0, "{case}");
        assert!(
            run.worst_age <= effective_round_trip(round_trip_ms) * 2 + Duration::from_millis(10),
            "{case}: {:?}",
            run.worst_age
        );
        assert!(run.ids.windows(2).all(|w| w[0] < w[1]), "{case}");
        // At most a few IDs of the warm-up's last (doubled) batch.
        assert!(
            run.discarded <= warm_up as u64 / 1_000,
            "{case}: {}",
            run.discarded
        );
        assert_eq!(source.most_under_way.load(Ordering::SeqCst), 1, "{case}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_batch_holds_one_round_trip_and_2_ms_of_use_at_most_the_configured_batch() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(10)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    // 10,000 IDs/s: 120 IDs a batch (a little more: the rate estimate takes a higher
    // sample at once and a lower one halfway).
    take_paced(&source, &cache, 20_000, Duration::from_micros(100), 0).await;
    let sizes = batches(&source);
    let steady = &sizes[sizes.len() - 10..];
    assert!(
        steady.iter().all(|&n| (115..=150).contains(&n)),
        "{sizes:?}"
    );

    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(10)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default().batch(50));
    take_paced(&source, &cache, 5_000, Duration::from_micros(100), 0).await;
    assert!(batches(&source).iter().all(|&n| n <= 50));
}

#[tokio::test(start_paused = true)]
async fn callers_that_find_the_cache_empty_share_one_fetch_and_batches_grow_meanwhile() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(10)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for _ in 0..200 {
                    ids.push(cache.next().await.unwrap());
                }
                ids
            })
        })
        .collect();
    let mut all = HashSet::new();
    for caller in callers {
        let ids = caller.await.unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "each caller's IDs increase"
        );
        all.extend(ids);
    }
    assert_eq!(all.len(), 1_600, "no ID twice");
    assert_eq!(
        source.most_under_way.load(Ordering::SeqCst),
        1,
        "one fetch at a time"
    );
    let sizes = batches(&source);
    assert_eq!(
        sizes[..4],
        [16, 64, 256, 1024],
        "growing four times a batch while callers keep waiting"
    );
}

#[tokio::test(start_paused = true)]
async fn ids_increase_across_callers_in_the_order_they_are_taken() {
    let source = Arc::new(CountingSource::default());
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    let other = cache.clone();
    let mut last = 0;
    for _ in 0..1_000 {
        let (a, b) = tokio::join!(cache.next(), other.next());
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.min(b) > last && a != b);
        last = a.max(b);
    }
}

#[tokio::test(start_paused = true)]
async fn a_batch_below_an_id_already_handed_out_is_thrown_away_not_handed_out() {
    let source = Arc::new(CountingSource::default());
    let cache = cache_with(&source, SnowflakeCacheOptions::default().batch(100));
    let mut ids = vec![cache.next().await.unwrap()];
    // A failover: the next node's IDs are 50 lower.
    source.snowflake_shift.store(50, Ordering::SeqCst);
    for _ in 0..300 {
        ids.push(cache.next().await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(cache.discarded() >= 50, "{}", cache.discarded());
}

#[tokio::test(start_paused = true)]
async fn ids_older_than_max_age_are_thrown_away_never_handed_out() {
    let source = Arc::new(CountingSource::default());
    let options = SnowflakeCacheOptions::default().max_age(Duration::from_secs(1));
    let cache = cache_with(&source, options);
    let first = cache.next().await.unwrap();
    let cached = cache.cached();
    assert!(cached > 0);
    tokio::time::advance(Duration::from_millis(1_001)).await;
    assert_eq!(cache.cached(), 0, "the batch is 1,001 ms old");
    assert_eq!(cache.discarded(), cached as u64);
    let next = cache.next().await.unwrap();
    assert!(next > first);
    assert!(Instant::now() - source.issued_at(next) < Duration::from_millis(1));
}

#[tokio::test(start_paused = true)]
async fn callers_waiting_on_a_failed_fetch_get_its_retryable_error_then_the_next_call_fetches() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(20)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    source.failures.store(1, Ordering::SeqCst);
    let (a, b) = tokio::join!(cache.next(), cache.next());
    assert!(a.unwrap_err().is_retryable());
    assert!(b.unwrap_err().is_retryable());
    assert_eq!(batches(&source).len(), 1, "one fetch for both");
    assert_eq!(cache.wait_stats().waits, 2);
    assert!(cache.next().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_batch_refused_while_the_server_paces_its_clock_is_asked_again_when_it_fits() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(20)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    source.drift_refusals.store(2, Ordering::SeqCst);
    let started = Instant::now();
    let (a, b) = tokio::join!(cache.next(), cache.next());
    assert_ne!(a.unwrap(), b.unwrap(), "both callers served");
    let sizes = batches(&source);
    assert_eq!(sizes.len(), 3, "refused twice, then served: {sizes:?}");
    assert!(
        sizes.iter().all(|&size| size == sizes[0]),
        "the same batch again"
    );
    // Three round trips and the two 3 ms waits the refusals named, nothing more.
    assert_eq!(started.elapsed(), Duration::from_millis(66));
}

#[tokio::test(start_paused = true)]
async fn a_pace_longer_than_a_second_reaches_the_callers_as_the_servers_refusal() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(20)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    source.drift_refusals.store(1, Ordering::SeqCst);
    *source.drift_wait.lock().unwrap() = Duration::from_secs(2);
    let refused = cache.next().await.unwrap_err();
    assert!(
        matches!(refused, Error::Drift { retry_in: Some(wait), .. } if wait == Duration::from_secs(2)),
        "{refused:?}"
    );
    assert_eq!(batches(&source).len(), 1, "not asked again");
    assert!(cache.next().await.is_ok(), "the next call fetches again");
}

/// What `tasks` callers sharing `rate` IDs/s, each woken every millisecond to take what is
/// due (the bench's paced load, on the paused clock), got over three seconds: the waits
/// after the first second, and the IDs thrown away and the ages (sorted) in the last.
struct PacedRun {
    waits: u64,
    late_discarded: u64,
    late_ages: Vec<Duration>,
}

async fn paced_tasks(
    cache: &SnowflakeCache,
    source: &Arc<CountingSource>,
    rate: f64,
    tasks: usize,
) -> PacedRun {
    let started = Instant::now();
    let warm_up = Duration::from_secs(1);
    let late = Duration::from_secs(2);
    let until = Duration::from_secs(3);
    let callers: Vec<_> = (0..tasks)
        .map(|_| {
            let (cache, source) = (cache.clone(), source.clone());
            tokio::spawn(async move {
                let per_task = rate / tasks as f64;
                let (mut done, mut ages) = (0u64, Vec::new());
                while started.elapsed() < until {
                    let due = (started.elapsed().as_secs_f64() * per_task) as u64;
                    while done < due {
                        let id = cache.next().await.unwrap();
                        let now = Instant::now();
                        if now - started >= late {
                            ages.push(now - source.issued_at(id));
                        }
                        done += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                ages
            })
        })
        .collect();
    tokio::time::sleep_until(started + warm_up).await;
    let waits_before = cache.wait_stats().waits;
    tokio::time::sleep_until(started + late).await;
    let discarded_before = cache.discarded();
    let mut run = PacedRun {
        waits: 0,
        late_discarded: 0,
        late_ages: Vec::new(),
    };
    for caller in callers {
        run.late_ages.extend(caller.await.unwrap());
    }
    run.waits = cache.wait_stats().waits - waits_before;
    run.late_discarded = cache.discarded() - discarded_before;
    run.late_ages.sort();
    run
}

/// The bench's paced cases. After a second nobody waits; in the last second nothing is
/// thrown away and the 99th percentile of an ID's age is at most two round trips plus
/// 10 ms (the target), bursts far apart included (16 tasks woken together at
/// 1,000 IDs/s take 16 IDs every 16 ms: their refills start on a timer, to land just
/// before the burst that needs them). The round trip here is the source's on the paused
/// clock (each half rounds up to a whole millisecond).
#[tokio::test(start_paused = true)]
async fn paced_callers_do_not_wait_and_get_ids_about_two_round_trips_old() {
    let mut failed = Vec::new();
    for round_trip_ms in [1, 5, 25, 52] {
        for rate in [1_000.0, 50_000.0] {
            for tasks in [1, 4, 16] {
                let round_trip = Duration::from_millis(round_trip_ms);
                let source = Arc::new(CountingSource::with_round_trip(round_trip));
                let cache = cache_with(&source, SnowflakeCacheOptions::default());
                let run = paced_tasks(&cache, &source, rate, tasks).await;
                let last_second = &run.late_ages;
                let p99 = last_second[last_second.len() * 99 / 100];
                let effective = effective_round_trip(round_trip_ms);
                let limit = effective * 2 + Duration::from_millis(10);
                if run.waits > 0 || p99 > limit || run.late_discarded > 0 {
                    let sizes = batches(&source);
                    failed.push(format!(
                        "{round_trip_ms} ms, {rate}/s, {tasks} tasks: {} waits, {} thrown away, \
                         p99 {p99:?} (limit {limit:?}), last batches {:?}",
                        run.waits,
                        run.late_discarded,
                        &sizes[sizes.len().saturating_sub(6)..]
                    ));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// At rates so low that an ID lasts longer than the round trips, the cache keeps the next
/// caller's ID (up to `max_age`) rather than throwing it away and fetching on every call.
#[tokio::test(start_paused = true)]
async fn at_two_calls_a_second_nobody_waits_and_a_call_costs_at_most_one_fetch() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(5)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    let (mut waits_before, mut discarded_before, mut worst) = (0, 0, Duration::ZERO);
    for call in 0..40 {
        if call == 4 {
            // Before: the first batch (16 IDs, before a rate is known) grew old.
            waits_before = cache.wait_stats().waits;
            discarded_before = cache.discarded();
        }
        let id = cache.next().await.unwrap();
        if call >= 4 {
            worst = worst.max(Instant::now() - source.issued_at(id));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(cache.wait_stats().waits - waits_before, 0);
    assert_eq!(cache.discarded() - discarded_before, 0);
    assert!(worst <= Duration::from_secs(1), "{worst:?}");
    // One fetch a call, and the first batch (16 IDs) and the one that replaced it.
    assert!(batches(&source).len() <= 42, "{:?}", batches(&source));
}

/// A task paced at 50,000 IDs a second that starts cold through a 52 ms round trip falls
/// behind while the first small batches come and go, and takes its backlog at once when
/// one arrives. Batches grow fourfold while it waits, and stop growing once one covers
/// it: none is more than eight times the steady batch, and little is thrown away.
#[tokio::test(start_paused = true)]
async fn a_cold_start_grows_batches_until_one_covers_the_callers_and_no_further() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(52)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    let run = paced_tasks(&cache, &source, 50_000.0, 1).await;
    let sizes = batches(&source);
    let steady = *sizes.last().unwrap();
    let largest = *sizes.iter().max().unwrap();
    assert!(
        largest <= steady * 8,
        "largest batch {largest}, steady {steady}: {sizes:?}"
    );
    assert!(
        cache.discarded() <= u64::from(steady),
        "{} thrown away: {sizes:?}",
        cache.discarded()
    );
    assert_eq!(run.waits, 0, "after the first second");
}

/// A refill waiting for its time (bursts far apart) starts at once when a caller finds the
/// cache empty: that caller waits one round trip, not until the refill's time.
#[tokio::test(start_paused = true)]
async fn a_caller_that_finds_the_cache_empty_starts_a_refill_waiting_for_its_time() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(2)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    // 16 IDs every 16 ms until the refills are timed.
    for _ in 0..200 {
        for _ in 0..16 {
            cache.next().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(16)).await;
    }
    assert!(
        cache.shared.lock().refill_at.is_none(),
        "no refill waits yet"
    );
    for _ in 0..16 {
        cache.next().await.unwrap();
    }
    let refill_at = cache.shared.lock().refill_at;
    let waiting_for = refill_at.expect("a refill waits for its time") - Instant::now();
    assert!(waiting_for >= Duration::from_millis(4), "{waiting_for:?}");
    // Reading the stats also starts the longest wait over.
    let waits_before = cache.wait_stats().waits;
    // The refill's task is asleep until its time; 1 ms later, an unexpected caller takes
    // more than the cache holds.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let more = cache.shared.lock().cached + 10;
    for _ in 0..more {
        cache.next().await.unwrap();
    }
    let stats = cache.wait_stats();
    assert!(stats.waits > waits_before, "the cache ran dry");
    assert!(
        stats.longest <= Duration::from_millis(2),
        "waited {:?}, the refill was due in {waiting_for:?}",
        stats.longest
    );
}

/// Four tasks that never yield on their own share a cache on two workers, with a source
/// that takes 10 ms (the real clock), through ten batches after a warm-up of seven (the
/// cold start's growth): none goes without an ID while the others take twice the largest
/// batch of the window. With the unit of cooperative budget each call takes, the longest
/// gap was 18–37 thousand IDs (a task can miss most of one batch, then waits for the next
/// with the others); without it, the tasks on the workers never yield while IDs are at hand,
/// and the tasks woken behind them missed 6 to 10 whole batches of 100,000 in a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_busy_callers_on_two_workers_all_get_ids_throughout() {
    use std::sync::atomic::AtomicBool;
    const TASKS: usize = 4;
    use crate::buffers::segment::tests::{measure_window, BusyTask, BUSY_RUNS};
    let _one_at_a_time = BUSY_RUNS.lock().await;
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(10)));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    let handed_out = Arc::new(AtomicU64::new(0));
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (cache, handed_out) = (cache.clone(), handed_out.clone());
            let (measuring, stop) = (measuring.clone(), stop.clone());
            tokio::spawn(async move {
                let mut task = BusyTask::new();
                loop {
                    std::hint::black_box(cache.next().await.unwrap());
                    let count = handed_out.fetch_add(1, Ordering::Relaxed) + 1;
                    task.took(count, measuring.load(Ordering::Relaxed));
                    if stop.load(Ordering::Relaxed) {
                        return task;
                    }
                }
            })
        })
        .collect();
    let out = measure_window(tasks, &measuring, &stop, || batches(&source).len(), 8..18).await;
    // The batches asked for in the window: from the eighth to the eighteenth.
    let batches = batches(&source);
    let largest = u64::from(batches[7..].iter().copied().max().unwrap());
    eprintln!("batches {batches:?}; per task: {out:?}");
    for (n, task) in out.iter().enumerate() {
        assert!(task.taken > 0, "task {n} got no ID in the window");
        assert!(
            task.gap_in_values <= 2 * largest,
            "task {n} went {} IDs ({:?}) without one, batches of {largest} or fewer",
            task.gap_in_values,
            task.gap
        );
    }
}
