//! What the module does when a client does to a segment counter what docs/guarantees.md says
//! an operator must not (its "must not" list): a `SET` below values this instance handed out
//! is continued above, counted and logged; a deliberate reset (`DEL`, then `SET`) still
//! restarts the counter lower; a TTL on a counter is counted and warned about, and a counter
//! that expires too. Also on a promoted replica and after a restart.

use std::time::{Duration, Instant};

use idgen_tests::{Server, ServerOptions};
use redis::cmd;

fn info(conn: &mut redis::Connection, field: &str) -> String {
    let text: String = cmd("INFO").arg("idgen").query(conn).unwrap();
    idgen_tests::info_line(&text, &format!("idgen_{field}"))
        .unwrap_or_else(|| panic!("no idgen_{field} in {text}"))
}

fn next(conn: &mut redis::Connection, key: &str) -> i64 {
    cmd("SEGMENT.NEXT").arg(key).query(conn).unwrap()
}

fn next_count(conn: &mut redis::Connection, key: &str, count: u64) -> (i64, i64) {
    let [first, last, _step]: [i64; 3] = cmd("SEGMENT.NEXT")
        .arg(key)
        .arg("COUNT")
        .arg(count)
        .query(conn)
        .unwrap();
    (first, last)
}

fn set(conn: &mut redis::Connection, key: &str, value: i64) {
    let () = cmd("SET").arg(key).arg(value).query(conn).unwrap();
}

/// Polls (every 100 ms, at most 20 s) until `done`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The example: after `SEGMENT.NEXT inv COUNT 5` answered 1000000001..1000000005,
/// `SET inv 5` used to make the next calls answer 6, 7, 8, 9.
#[test]
fn a_set_below_values_handed_out_is_continued_above_counted_and_logged() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    assert_eq!(
        next_count(&mut conn, "inv", 5),
        (1_000_000_001, 1_000_000_005)
    );
    set(&mut conn, "inv", 5);
    let after: Vec<i64> = (0..4).map(|_| next(&mut conn, "inv")).collect();
    assert!(after[0] > 1_000_000_005, "{after:?}");
    assert!(after.windows(2).all(|pair| pair[0] < pair[1]), "{after:?}");
    assert_eq!(info(&mut conn, "segment_counters_lowered"), "1");
    // The key again holds a bound above everything handed out (what a replica or a restart
    // continues from).
    let held: i64 = cmd("GET").arg("inv").query(&mut conn).unwrap();
    assert!(held >= after[3]);
    assert!(
        server
            .log()
            .contains("segment counter 'inv' was set to 5, below the 1000000005"),
        "{}",
        server.log()
    );
    wait_until("the warning is in INFO", || {
        info(&mut conn, "warnings").contains("a SET lowered segment counters")
    });

    // Seeding upwards is what SET is for: continued from, and not counted.
    set(&mut conn, "inv", 5_000_000_000);
    assert_eq!(next(&mut conn, "inv"), 5_000_000_001);
    assert_eq!(info(&mut conn, "segment_counters_lowered"), "1");
}

/// A reset on purpose: DEL makes the module forget the counter, and the SET after it is
/// where the counter continues (plus the restart fence, as for any counter first used since a
/// start; none here: `segment-fence 0`).
#[test]
fn a_counter_deleted_then_set_lower_restarts_there() {
    let server = Server::start(&["segment-fence", "0"]);
    let mut conn = server.conn();
    assert_eq!(next_count(&mut conn, "inv", 5), (1, 5));
    set(&mut conn, "inv", 2);
    assert_eq!(next(&mut conn, "inv"), 6, "a plain SET does not lower it");
    let deleted: i64 = cmd("DEL").arg("inv").query(&mut conn).unwrap();
    assert_eq!(deleted, 1);
    set(&mut conn, "inv", 2);
    assert_eq!(
        next(&mut conn, "inv"),
        3,
        "DEL then SET restarts the counter"
    );
    assert_eq!(info(&mut conn, "segment_counters_lowered"), "1");
}

/// Replicated: the correction the master writes reaches the replica, which continues above
/// it once promoted; and a restart continues above it from the AOF.
#[test]
fn a_lowered_counter_stays_above_on_a_promoted_replica_and_after_a_restart() {
    let options = ServerOptions::module(&["step", "2", "offset", "0"]).server_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let mut master = Server::start_with(options).unwrap();
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let mut conn = master.conn();
    let (_, last) = next_count(&mut conn, "inv", 5);
    set(&mut conn, "inv", 5);
    let corrected = next(&mut conn, "inv");
    assert!(corrected > last);
    master.wait_replicated(1);

    let mut promoted = replica.conn();
    let held: i64 = cmd("GET").arg("inv").query(&mut promoted).unwrap();
    assert!(
        held >= corrected,
        "the replica holds {held}, below {corrected}"
    );
    let () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut promoted)
        .unwrap();
    let from_replica = next(&mut promoted, "inv");
    assert!(from_replica > corrected, "{from_replica} after {corrected}");

    master.terminate();
    master.start_again(&[]).unwrap();
    let mut conn = master.conn();
    let after_restart = next(&mut conn, "inv");
    assert!(
        after_restart > corrected,
        "{after_restart} after {corrected}"
    );
}

#[test]
fn a_ttl_on_a_counter_is_counted_warned_about_and_removed_by_the_next_write() {
    let mut master = Server::start_with(
        ServerOptions::module(&["step", "2", "offset", "0"]).server_args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]),
    )
    .unwrap();
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let mut conn = master.conn();
    next(&mut conn, "k");
    let _: i64 = cmd("EXPIRE").arg("k").arg(100).query(&mut conn).unwrap();
    assert_eq!(info(&mut conn, "segment_ttls_seen"), "1");
    next(&mut conn, "k");
    let ttl: i64 = cmd("TTL").arg("k").query(&mut conn).unwrap();
    assert_eq!(ttl, -1, "the next write of the counter removes the TTL");
    master.wait_replicated(1);
    let ttl: i64 = cmd("TTL").arg("k").query(&mut replica.conn()).unwrap();
    assert_eq!(ttl, -1, "and so does the replica");

    // A counter that expires: counted, and said in INFO and the log.
    next(&mut conn, "gone");
    let _: i64 = cmd("PEXPIRE").arg("gone").arg(1).query(&mut conn).unwrap();
    wait_until("the expiry is counted", || {
        info(&mut conn, "segment_counters_expired") == "1"
    });
    wait_until("the warning is in INFO and the log", || {
        info(&mut conn, "warnings").contains("segment counter keys were given a TTL")
            && master
                .log()
                .contains("guarantee at risk: segment counter keys were given a TTL")
    });

    // After a restart the removed TTL stays removed, and the counter continues above.
    let before: i64 = cmd("GET").arg("k").query(&mut conn).unwrap();
    master.terminate();
    master.start_again(&[]).unwrap();
    let mut conn = master.conn();
    let ttl: i64 = cmd("TTL").arg("k").query(&mut conn).unwrap();
    assert_eq!(ttl, -1);
    assert!(next(&mut conn, "k") > before);
}

fn rename(conn: &mut redis::Connection, from: &str, to: &str) {
    let () = cmd("RENAME").arg(from).arg(to).query(conn).unwrap();
}

/// Issue 42 item 7: what the module remembers of a counter follows the key. The issue's
/// reproduction: after a lowering `SET`, two renames used to make the module forget the
/// counter, and its next call repeated 1000000006 (the fence above the lowered 5).
#[test]
fn a_lowered_counter_renamed_away_and_back_is_still_continued_above() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let (_, last) = next_count(&mut conn, "inv", 5);
    set(&mut conn, "inv", 5);
    let corrected = next(&mut conn, "inv");
    assert!(corrected > last);
    set(&mut conn, "inv", 5);
    rename(&mut conn, "inv", "tmp");
    rename(&mut conn, "tmp", "inv");
    let after = next(&mut conn, "inv");
    assert!(after > corrected, "{after} repeats or precedes {corrected}");
    assert_eq!(info(&mut conn, "segment_counters_lowered"), "2");
    assert_eq!(info(&mut conn, "segment_keys_held"), "1", "tmp is not kept");

    // Renamed onto a key the module holds: the counter continues above both histories.
    let (_, other_last) = next_count(&mut conn, "other", 3);
    rename(&mut conn, "inv", "other");
    let merged = next(&mut conn, "other");
    assert!(
        merged > after && merged > other_last,
        "{merged} after {after} and {other_last}"
    );
    assert_eq!(info(&mut conn, "segment_keys_held"), "1");
}

/// The same across databases: `MOVE` takes what the module holds for the counter along.
#[test]
fn a_lowered_counter_moved_to_another_database_and_back_is_still_continued_above() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    next_count(&mut conn, "inv", 5);
    set(&mut conn, "inv", 5);
    let corrected = next(&mut conn, "inv");
    set(&mut conn, "inv", 5);
    let moved: i64 = cmd("MOVE").arg("inv").arg(1).query(&mut conn).unwrap();
    assert_eq!(moved, 1);
    let () = cmd("SELECT").arg(1).query(&mut conn).unwrap();
    let in_db1 = next(&mut conn, "inv");
    assert!(
        in_db1 > corrected,
        "{in_db1} repeats or precedes {corrected}"
    );
    set(&mut conn, "inv", 5);
    let moved: i64 = cmd("MOVE").arg("inv").arg(0).query(&mut conn).unwrap();
    assert_eq!(moved, 1);
    let () = cmd("SELECT").arg(0).query(&mut conn).unwrap();
    let back = next(&mut conn, "inv");
    assert!(back > in_db1, "{back} repeats or precedes {in_db1}");
    assert_eq!(info(&mut conn, "segment_counters_lowered"), "3");
    assert_eq!(info(&mut conn, "segment_keys_held"), "1");
}

/// `COPY … REPLACE` and `RESTORE … REPLACE` of a lower value onto a counter the module holds
/// are caught like a lowering `SET`: the next call continues above what was handed out.
#[test]
fn a_lower_value_copied_or_restored_onto_a_counter_is_continued_above() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let (_, last) = next_count(&mut conn, "inv", 5);
    set(&mut conn, "low", 5);
    let copied: i64 = cmd("COPY")
        .arg("low")
        .arg("inv")
        .arg("REPLACE")
        .query(&mut conn)
        .unwrap();
    assert_eq!(copied, 1);
    let after_copy = next(&mut conn, "inv");
    assert!(after_copy > last, "{after_copy} repeats or precedes {last}");

    let dump: Vec<u8> = cmd("DUMP").arg("low").query(&mut conn).unwrap();
    let () = cmd("RESTORE")
        .arg("inv")
        .arg(0)
        .arg(dump)
        .arg("REPLACE")
        .query(&mut conn)
        .unwrap();
    let after_restore = next(&mut conn, "inv");
    assert!(
        after_restore > after_copy,
        "{after_restore} repeats or precedes {after_copy}"
    );
}

/// Moves `key` from `conn`'s server to the server on `port` with `MIGRATE`.
fn migrate(conn: &mut redis::Connection, key: &str, port: u16) {
    let reply: String = cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(port)
        .arg(key)
        .arg(0)
        .arg(5000)
        .query(conn)
        .unwrap();
    assert_eq!(reply, "OK");
}

/// `MIGRATE` (a slot moved key by key on Redis 7 and 8, or by hand) away and back: the key
/// leaves with its lowered value and comes back through `RESTORE`; its next call here
/// continues above what this instance handed out, as after a rename away and back.
#[test]
fn a_lowered_counter_migrated_away_and_back_is_still_continued_above() {
    let home = Server::start(&[]);
    let away = Server::start(&[]);
    let mut conn = home.conn();
    next_count(&mut conn, "inv", 5);
    set(&mut conn, "inv", 5);
    let corrected = next(&mut conn, "inv");
    set(&mut conn, "inv", 5);
    migrate(&mut conn, "inv", away.port());
    migrate(&mut away.conn(), "inv", home.port());
    let back = next(&mut conn, "inv");
    assert!(back > corrected, "{back} repeats or precedes {corrected}");

    // A deliberate reset (DEL, then SET) still restarts the counter lower afterwards.
    let deleted: i64 = cmd("DEL").arg("inv").query(&mut conn).unwrap();
    assert_eq!(deleted, 1);
    set(&mut conn, "inv", 5);
    let reset = next(&mut conn, "inv");
    assert!(
        reset < back,
        "DEL then SET restarts the counter: {reset} after {back}"
    );
}
