//! The snowflake cache's rules on tokio's paused clock, with a counting source whose IDs
//! carry the (tokio) time they were issued.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::source::counting::CountingSource;

fn cache_with(source: &Arc<CountingSource>, options: SnowflakeCacheOptions) -> SnowflakeCache {
    SnowflakeCache::new(source.clone(), "k", options)
}

fn batches(source: &CountingSource) -> Vec<u32> {
    source.batch_sizes.lock().unwrap().clone()
}

/// What `n` calls, one every `every`, got: their IDs, how many waited, and the worst age of
/// an ID (from its issue to its hand-out) among the calls after the first `warm_up`.
struct Run {
    ids: Vec<i64>,
    waits: usize,
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
        worst_age: Duration::ZERO,
    };
    for i in 0..n {
        let before = Instant::now();
        let id = cache.next().await.unwrap();
        let now = Instant::now();
        if i >= warm_up {
            run.waits += usize::from(now > before);
            run.worst_age = run.worst_age.max(now - source.issued_at(id));
        }
        run.ids.push(id);
        tokio::time::advance(every).await;
    }
    run
}

#[tokio::test(start_paused = true)]
async fn at_a_steady_rate_nobody_waits_and_ids_are_at_most_two_round_trips_plus_10_ms_old() {
    for (round_trip_ms, every_us) in [(1, 1_000), (5, 20), (50, 1_000), (50, 20)] {
        let round_trip = Duration::from_millis(round_trip_ms);
        let source = Arc::new(CountingSource::with_round_trip(round_trip));
        let cache = cache_with(&source, SnowflakeCacheOptions::default());
        let every = Duration::from_micros(every_us);
        // Warm-up: one second of calls.
        let warm_up = (1_000_000 / every_us) as usize;
        let run = take_paced(&source, &cache, warm_up * 2, every, warm_up).await;
        let case = format!("round trip {round_trip_ms} ms, a call every {every_us} µs");
        assert_eq!(run.waits, 0, "{case}");
        assert!(
            run.worst_age <= round_trip * 2 + Duration::from_millis(10),
            "{case}: {:?}",
            run.worst_age
        );
        assert!(run.ids.windows(2).all(|w| w[0] < w[1]), "{case}");
        assert_eq!(cache.discarded(), 0, "{case}");
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
async fn callers_that_find_the_cache_empty_share_one_fetch_and_batches_double_meanwhile() {
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
    assert_eq!(sizes[..4], [16, 32, 64, 128], "doubling while callers wait");
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

/// A caller woken by a 1 ms timer takes what is due in a burst (and catches up after a
/// wait): batches follow the average rate, not the bursts.
#[tokio::test(start_paused = true)]
async fn a_caller_that_takes_in_bursts_gets_ids_as_young_as_a_steady_one() {
    let round_trip = Duration::from_millis(7);
    let source = Arc::new(CountingSource::with_round_trip(round_trip));
    let cache = cache_with(&source, SnowflakeCacheOptions::default());
    let started = Instant::now();
    let (mut done, mut worst) = (0u64, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(2) {
        let due = (started.elapsed().as_secs_f64() * 50_000.0) as u64;
        while done < due {
            let id = cache.next().await.unwrap();
            done += 1;
            if started.elapsed() > Duration::from_secs(1) {
                worst = worst.max(Instant::now() - source.issued_at(id));
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        worst <= round_trip * 2 + Duration::from_millis(10),
        "{worst:?} {:?}",
        batches(&source)
    );
    assert_eq!(cache.discarded(), 0);
}
