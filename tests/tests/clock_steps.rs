//! A wall clock that misbehaves never stops a node: with the test clock knob
//! (`idgen.debug-clock-offset-ms`, which moves the wall clock the module reads and not its
//! monotonic clock, as a real clock step would), a jump of an hour forward and back, a step
//! of a minute back under load, and a restart while the clock runs an hour ahead.
//!
//! Each test prints what it saw: run with `--nocapture`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use idgen_tests::{
    assert_strictly_increasing, assert_unique, info_field, snowflake_batch, Server, ServerOptions,
};
use redis::{cmd, Connection};

const HOUR_MS: i64 = 3_600_000;

fn server(extra: &[&str]) -> Server {
    Server::start_with(
        ServerOptions::module(&[])
            .server_args(&["--enable-protected-configs", "yes"])
            .server_args(extra),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log))
}

fn set_clock_offset(conn: &mut Connection, offset_ms: i64) {
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("idgen.debug-clock-offset-ms")
        .arg(offset_ms)
        .query(conn)
        .unwrap();
}

/// Sends `SNOWFLAKE.NEXT key COUNT 1000` at about `per_second` calls a second for
/// `duration`; returns the IDs of the answered calls and the error codes of the others.
fn paced_calls(
    conn: &mut Connection,
    key: &str,
    per_second: u32,
    duration: Duration,
) -> (Vec<i64>, Vec<String>) {
    let (mut ids, mut errors) = (Vec::new(), Vec::new());
    let gap = Duration::from_secs(1) / per_second;
    let start = Instant::now();
    let mut next = start;
    while next < start + duration {
        match snowflake_batch(conn, key, 1000) {
            Ok(batch) => ids.extend(batch),
            Err(error) => errors.push(error.code().unwrap_or("?").to_string()),
        }
        next += gap;
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    (ids, errors)
}

#[test]
fn an_hour_forward_and_back_keeps_the_node_issuing() {
    let server = server(&[]);
    let mut conn = server.conn();
    let mut all = snowflake_batch(&mut conn, "orders", 1000).unwrap();
    // A bad NTP source sets the clock an hour ahead for a second, then it is corrected.
    set_clock_offset(&mut conn, HOUR_MS);
    let (ahead, ahead_errors) = paced_calls(&mut conn, "orders", 200, Duration::from_secs(1));
    all.extend(ahead);
    set_clock_offset(&mut conn, 0);
    let (after, errors) = paced_calls(&mut conn, "orders", 200, Duration::from_millis(2600));
    let calls = after.len() / 1000 + errors.len();
    let answered = after.len() / 1000;
    println!(
        "+1 h for 1 s, then back: {answered} of {calls} COUNT 1000 calls answered at ~200/s \
         ({} refused while ahead); clock_ahead_ms {}, clock_paced {}",
        ahead_errors.len(),
        info_field(&mut conn, "clock_ahead_ms"),
        info_field(&mut conn, "clock_paced"),
    );
    assert!(
        answered * 10 >= calls * 9,
        "only {answered} of {calls} calls answered: {errors:?}"
    );
    assert_eq!(info_field(&mut conn, "clock_paced"), "1");
    let ahead_ms: i64 = info_field(&mut conn, "clock_ahead_ms").parse().unwrap();
    assert!(
        ahead_ms > HOUR_MS - 10_000,
        "the ID clock should still run about an hour ahead"
    );
    assert!(
        server.log().contains("ahead of the wall clock"),
        "the log says why"
    );
    all.extend(after);
    assert_strictly_increasing(&all);
}

#[test]
fn a_minute_back_under_load_never_stops_issuing() {
    let server = server(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (url, stop) = (server.url(), stop.clone());
            thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let key = format!("k{worker}");
                let (mut ids, mut refused, mut answered_late) = (Vec::new(), 0u64, 0u64);
                let mut late = false;
                while !stop.load(Ordering::Relaxed) {
                    match snowflake_batch(&mut conn, &key, 100) {
                        Ok(batch) => {
                            ids.extend(batch);
                            answered_late += u64::from(late);
                        }
                        Err(error) => {
                            assert_eq!(error.code(), Some("DRIFT"), "{error}");
                            refused += 1;
                        }
                    }
                    late = late || info_step_seen(&mut conn);
                }
                (ids, refused, answered_late)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    set_clock_offset(&mut server.conn(), -60_000);
    thread::sleep(Duration::from_millis(700));
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let (mut refused, mut answered_after_step) = (0, 0);
    for worker in workers {
        let (ids, worker_refused, late) = worker.join().unwrap();
        assert_strictly_increasing(&ids);
        all.extend(ids);
        refused += worker_refused;
        answered_after_step += late;
    }
    println!(
        "-60 s under load (4 clients, COUNT 100): {} IDs, {answered_after_step} calls answered \
         after the step, {refused} bursts refused (DRIFT)",
        all.len()
    );
    assert_unique(all.iter().copied());
    assert!(
        answered_after_step > 0,
        "the node stopped issuing after the step"
    );
}

/// Whether the server has seen its wall clock step back (a call noticed it).
fn info_step_seen(conn: &mut Connection) -> bool {
    info_field(conn, "clock_step_backs") != "0"
}

#[test]
fn a_restart_while_an_hour_ahead_continues_above_at_once() {
    let mut server = server(&["--appendonly", "yes"]);
    let mut conn = server.conn();
    set_clock_offset(&mut conn, HOUR_MS);
    let before = snowflake_batch(&mut conn, "orders", 1000).unwrap();
    // The clock is corrected, then the server restarts (its config has no offset).
    set_clock_offset(&mut conn, 0);
    server.terminate();
    server
        .start_again(&[])
        .unwrap_or_else(|failure| panic!("restart failed:\n{}", failure.log));
    let mut conn = server.conn();
    let after = snowflake_batch(&mut conn, "orders", 1000).unwrap();
    let other: i64 = cmd("SNOWFLAKE.NEXT").arg("fresh").query(&mut conn).unwrap();
    println!(
        "restart while 1 h ahead: first ID after it {} (last before {}), clock_paced {}",
        after[0],
        before[999],
        info_field(&mut conn, "clock_paced")
    );
    assert!(after[0] > before[999]);
    assert!(
        other > before[999],
        "every key continues above the restored floor"
    );
    assert_eq!(info_field(&mut conn, "clock_paced"), "1");
}

/// Single pipelined calls read the server's time for each command where the server keeps
/// one (Redis 7.2+, Valkey) and the clock elsewhere: either way the IDs of a stream that
/// runs for most of a second carry the time they were issued at, not the time the stream
/// began (a time read once and kept would leave them hundreds of milliseconds behind, or
/// borrowing ahead).
#[test]
fn pipelined_single_ids_carry_the_time_they_are_issued_at() {
    // Without the restart fence, which starts a fresh server's IDs 2 s ahead.
    let server = Server::start(&["snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let unix_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let started = Instant::now();
    let mut checked = 0;
    while started.elapsed() < Duration::from_millis(800) {
        let mut pipe = redis::pipe();
        for _ in 0..200 {
            pipe.cmd("SNOWFLAKE.NEXT").arg("stream");
        }
        let sent = unix_now();
        let ids: Vec<i64> = pipe.query(&mut conn).unwrap();
        let answered = unix_now();
        assert_strictly_increasing(&ids);
        for id in [ids[0], ids[ids.len() - 1]] {
            let parts: Vec<redis::Value> =
                cmd("SNOWFLAKE.DECODE").arg(id).query(&mut conn).unwrap();
            let issued: i64 = redis::from_redis_value_ref(&parts[1]).unwrap();
            // 200 IDs fit in one millisecond's sequence: no borrowing ahead is needed. The
            // 2 ms allow for the test's and the server's clocks being read at different
            // moments within a millisecond.
            assert!(
                issued >= sent - 2 && issued <= answered + 2,
                "an ID of {issued} for a batch sent at {sent} and answered at {answered}"
            );
            checked += 1;
        }
    }
    assert!(checked > 10, "{checked} batches checked");
}
