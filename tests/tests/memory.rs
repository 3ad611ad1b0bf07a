//! What the module keeps for a key does not outlive the key: deleted or flushed counters
//! leave nothing behind, renamed or moved ones take it to their new name (`INFO idgen` `segment_keys_held`, and the
//! server's `used_memory`, measured with 10^6 keys deleted), while a `DEBUG RELOAD`, after
//! which the keys come back, keeps it.

use std::time::{Duration, Instant};

use idgen_tests::{info_field, Server};
use redis::cmd;

fn fenced(conn: &mut redis::Connection) -> u64 {
    info_field(conn, "segment_keys_held").parse().unwrap()
}

fn used_memory(conn: &mut redis::Connection) -> i64 {
    let info: String = cmd("INFO").arg("memory").query(conn).unwrap();
    idgen_tests::info_line(&info, "used_memory")
        .unwrap()
        .parse()
        .unwrap()
}

/// `SEGMENT.NEXT` on `count` keys named `prefix:i`, pipelined.
fn use_counters(conn: &mut redis::Connection, prefix: &str, count: u32) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(10_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("SEGMENT.NEXT")
                .arg(format!("{prefix}:{i}"))
                .ignore();
        }
        let () = pipe.query(conn).unwrap();
    }
}

/// `UNLINK` of the keys `use_counters` made.
fn unlink_counters(conn: &mut redis::Connection, prefix: &str, count: u32) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(10_000) {
        let mut unlink = cmd("UNLINK");
        for i in chunk {
            unlink.arg(format!("{prefix}:{i}"));
        }
        let _: i64 = unlink.query(conn).unwrap();
    }
}

#[test]
fn every_way_a_key_goes_takes_its_fence_state_with_it() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    use_counters(&mut conn, "day", 1000);
    assert_eq!(fenced(&mut conn), 1000);
    let _: i64 = cmd("DEL")
        .arg("day:0")
        .arg("day:1")
        .query(&mut conn)
        .unwrap();
    let _: i64 = cmd("UNLINK").arg("day:2").query(&mut conn).unwrap();
    let _: () = cmd("RENAME")
        .arg("day:3")
        .arg("renamed")
        .query(&mut conn)
        .unwrap();
    let _: i64 = cmd("MOVE").arg("day:4").arg(1).query(&mut conn).unwrap();
    // Valkey 8.1 leaves a connection that ran MOVE (or COPY … DB) in the destination
    // database when a module follows keyspace events; Redis and Valkey 9 do not.
    let () = cmd("SELECT").arg(0).query(&mut conn).unwrap();
    // A renamed or moved counter takes its state to its new name (not fenced again there),
    // and nothing stays under the old one.
    assert_eq!(fenced(&mut conn), 997);
    let renamed: i64 = cmd("SEGMENT.NEXT").arg("renamed").query(&mut conn).unwrap();
    assert_eq!(
        renamed, 1_000_000_002,
        "the renamed counter continues, unfenced"
    );
    let _: i64 = cmd("DEL").arg("renamed").query(&mut conn).unwrap();
    let () = cmd("SELECT").arg(1).query(&mut conn).unwrap();
    let _: i64 = cmd("DEL").arg("day:4").query(&mut conn).unwrap();
    let () = cmd("SELECT").arg(0).query(&mut conn).unwrap();
    // Expiry and eviction: see the tests below.
    assert_eq!(fenced(&mut conn), 995);
    // A key that comes back is fenced again on its next use: only values are skipped.
    let again: i64 = cmd("SEGMENT.NEXT").arg("day:0").query(&mut conn).unwrap();
    assert_eq!(again, 1_000_000_001);
    assert_eq!(fenced(&mut conn), 996);
}

#[test]
fn expired_and_evicted_counters_take_their_state_with_them() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    // SEGMENT.NEXT and PEXPIRE in one pipeline on one connection: the keys expire (the
    // server's active expiry) within moments, each with its `expired` event.
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SEGMENT.NEXT").arg(format!("day:{i}")).ignore();
    }
    for i in 0..1000 {
        pipe.cmd("PEXPIRE").arg(format!("day:{i}")).arg(1).ignore();
    }
    let () = pipe.query(&mut conn).unwrap();
    wait_for_fenced(&mut conn, 0);
    // Eviction: with a memory limit and allkeys-lru, new counters push old ones out.
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut conn)
        .unwrap();
    let used: String = cmd("INFO").arg("memory").query(&mut conn).unwrap();
    let used: u64 = idgen_tests::info_line(&used, "used_memory")
        .unwrap()
        .parse()
        .unwrap();
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used + 2_000_000)
        .query(&mut conn)
        .unwrap();
    use_counters(&mut conn, "tenant", 100_000);
    // Lift the limit before counting: the server goes on evicting from a timer when a round
    // of eviction runs out of time, and would between the two counts.
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    let keys: u64 = cmd("DBSIZE").query(&mut conn).unwrap();
    assert!(keys < 100_000, "nothing was evicted ({keys} keys)");
    assert_eq!(fenced(&mut conn), keys, "held keys beside the keys left");
}

/// Polls `segment_keys_held` until it is `expected` (the flush check runs on a timer).
fn wait_for_fenced(conn: &mut redis::Connection, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while fenced(conn) != expected {
        assert!(
            Instant::now() < deadline,
            "segment_keys_held stayed {} (expected {expected})",
            fenced(conn)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_flush_forgets_the_keys_it_removed_and_a_reload_forgets_none() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    use_counters(&mut conn, "day", 1000);
    let _: () = cmd("SELECT").arg(1).query(&mut conn).unwrap();
    use_counters(&mut conn, "other", 10);
    let _: () = cmd("SELECT").arg(0).query(&mut conn).unwrap();
    assert_eq!(fenced(&mut conn), 1010);

    // DEBUG RELOAD flushes and loads the same keys again: nothing is forgotten, so a key
    // continues without a second fence.
    let _: () = cmd("DEBUG").arg("RELOAD").query(&mut conn).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fenced(&mut conn), 1010);
    let next: i64 = cmd("SEGMENT.NEXT").arg("day:7").query(&mut conn).unwrap();
    assert_eq!(next, 1_000_000_002, "not fenced again after a reload");

    // FLUSHDB of database 1 forgets its keys only; FLUSHALL forgets the rest.
    let _: () = cmd("SELECT").arg(1).query(&mut conn).unwrap();
    let _: () = cmd("FLUSHDB").query(&mut conn).unwrap();
    let _: () = cmd("SELECT").arg(0).query(&mut conn).unwrap();
    wait_for_fenced(&mut conn, 1000);
    let _: () = cmd("FLUSHALL").query(&mut conn).unwrap();
    wait_for_fenced(&mut conn, 0);
    // A key made again after the flush is fenced again: values skip, never repeat.
    let again: i64 = cmd("SEGMENT.NEXT").arg("day:7").query(&mut conn).unwrap();
    assert_eq!(again, 1_000_000_001);
    assert_eq!(fenced(&mut conn), 1);
}

#[test]
fn a_million_counters_gone_leave_at_most_8_bytes_each() {
    const KEYS: u32 = 1_000_000;
    let server = Server::start(&[]);
    let mut conn = server.conn();
    // Warm up the allocator and the server's own structures with a first round.
    use_counters(&mut conn, "warm", 1000);
    unlink_counters(&mut conn, "warm", 1000);
    let before = used_memory(&mut conn);
    let started = Instant::now();
    use_counters(&mut conn, "tenant", KEYS);
    assert_eq!(fenced(&mut conn), u64::from(KEYS));
    let full = used_memory(&mut conn);
    unlink_counters(&mut conn, "tenant", KEYS);
    assert_eq!(fenced(&mut conn), 0);
    // The server shrinks its own key table after mass deletions in its cron (about 8 MB
    // for 10^6 keys): wait for that, up to 10 s, so that what is measured is what stays.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = used_memory(&mut conn);
    while after - before > 8 * i64::from(KEYS) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = used_memory(&mut conn);
    }
    let left_per_key = (after - before) as f64 / f64::from(KEYS);
    println!(
        "{KEYS} counters ({:?}): used_memory {before} B before, {full} B with them ({:.0} B a key), {after} B after they were deleted: {left_per_key:.2} B a key left behind",
        started.elapsed(),
        (full - before) as f64 / f64::from(KEYS),
    );
    assert!(
        left_per_key <= 8.0,
        "{left_per_key} bytes a key left behind"
    );
}
