//! A million IDs in bursts far above 4,096 per millisecond: unique and increasing, the
//! clock borrowing milliseconds instead of waiting, and the server answering PING all the
//! while. Figures are printed; nothing here asserts on time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use idgen_tests::{assert_strictly_increasing, assert_unique, info_field, snowflake_batch, Server};
use redis::cmd;

const BATCH: usize = 10_000;
const BATCHES: usize = 100;

/// Sends PING until `stop`, returning every round trip.
fn ping_until(url: String, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let mut round_trips = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let pong: String = cmd("PING").query(&mut conn).unwrap();
        assert_eq!(pong, "PONG");
        round_trips.push(sent.elapsed());
        thread::sleep(Duration::from_micros(200));
    }
    round_trips
}

#[test]
fn a_million_snowflake_ids_in_bursts_are_unique_and_increasing() {
    // Without the restart fence: in the 2 s after a start the fence allows one millisecond's
    // sequence per elapsed millisecond, and whether 10,000-ID batches fit in that depends on
    // how fast the calls run (a fast server refused one in CI). Borrowing is what is tested.
    let server = Server::start(&["snowflake-restart-fence", "no"]);
    let stop = Arc::new(AtomicBool::new(false));
    let pinger = {
        let (url, stop) = (server.url(), stop.clone());
        thread::spawn(move || ping_until(url, stop))
    };
    // A second client issues single IDs on other keys at the same time.
    let singles = {
        let (url, stop) = (server.url(), stop.clone());
        thread::spawn(move || {
            let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut ids = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let id: i64 = cmd("SNOWFLAKE.NEXT").arg("other").query(&mut conn).unwrap();
                ids.push(id);
            }
            ids
        })
    };

    let mut conn = server.conn();
    let started = Instant::now();
    let mut burst = Vec::with_capacity(BATCH * BATCHES);
    for _ in 0..BATCHES {
        let ids: Vec<i64> = snowflake_batch(&mut conn, "burst", BATCH).unwrap();
        assert_eq!(ids.len(), BATCH);
        burst.extend(ids);
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let round_trips = pinger.join().unwrap();
    let singles = singles.join().unwrap();

    assert_strictly_increasing(&burst);
    assert_strictly_increasing(&singles);
    let total = assert_unique(burst.iter().chain(&singles).copied());
    let borrowed: u64 = info_field(&mut conn, "ms_borrowed").parse().unwrap();
    assert!(
        borrowed > 0,
        "a million IDs cannot fit in the milliseconds that passed"
    );
    assert!(
        !round_trips.is_empty(),
        "PING was answered during the burst"
    );
    let mut sorted = round_trips.clone();
    sorted.sort();
    println!(
        "burst: {} IDs in {:.3} s ({:.0} IDs/s) plus {} singles; {} ms borrowed; \
         PING during the burst: {} answered, median {:?}, p99 {:?}, max {:?}",
        burst.len(),
        elapsed.as_secs_f64(),
        burst.len() as f64 / elapsed.as_secs_f64(),
        singles.len(),
        borrowed,
        sorted.len(),
        sorted[sorted.len() / 2],
        sorted[sorted.len() * 99 / 100],
        sorted[sorted.len() - 1],
    );
    assert_eq!(total, burst.len() + singles.len());
}

#[test]
fn a_million_segment_values_in_ranges_are_unique() {
    let server = Server::start(&["step", "4", "offset", "3"]);
    let mut conn = server.conn();
    let mut values = Vec::new();
    for _ in 0..100 {
        let [first, last, step]: [i64; 3] = cmd("SEGMENT.NEXT")
            .arg("seq")
            .arg("COUNT")
            .arg(BATCH)
            .query(&mut conn)
            .unwrap();
        assert_eq!(step, 4);
        values.extend((first..=last).step_by(4));
    }
    assert_eq!(values.len(), 1_000_000);
    assert_strictly_increasing(&values);
    assert!(values.iter().all(|v| v % 4 == 3));
    // The key holds at least every value handed out (a reservation may reach higher).
    let stored: i64 = cmd("GET").arg("seq").query(&mut conn).unwrap();
    assert!(stored >= *values.last().unwrap(), "the key holds {stored}");
}
