//! Both generators continue above everything issued before a restart, through every path:
//! DEBUG RELOAD, DEBUG LOADAOF, a restart from RDB, from AOF with and without the RDB
//! preamble — also when the wall clock after the restart is behind the last issued time —
//! and for keys moved with MIGRATE.

use std::time::{Duration, Instant};

use idgen_core::Layout;
use idgen_tests::{assert_unique, snowflake_batch, Server, ServerOptions};
use redis::{cmd, Connection};

const STEP: u64 = 8;

/// What was issued before the restart.
struct Before {
    ids: Vec<i64>,
    kept_last: i64,
    counter: i64,
    /// The largest time field (ms since epoch) of any ID issued.
    max_time_ms: u64,
}

fn time_ms(id: i64) -> u64 {
    Layout::default().decode(id, STEP).unwrap().time_ms
}

/// Issues on "kept" and on "gone" (a burst that borrows about a second ahead of the wall
/// clock), then deletes "gone": its IDs are then remembered by nothing but the instance's
/// own floor.
fn issue_before(conn: &mut Connection) -> Before {
    let mut ids = Vec::new();
    for _ in 0..5 {
        let batch: Vec<i64> = snowflake_batch(conn, "gone", 100_000).unwrap();
        ids.extend(batch);
    }
    let kept: Vec<i64> = snowflake_batch(conn, "kept", 10).unwrap();
    ids.extend(&kept);
    let _: i64 = cmd("DEL").arg("gone").query(conn).unwrap();
    let [_, counter, _]: [i64; 3] = cmd("SEGMENT.NEXT")
        .arg("counter")
        .arg("COUNT")
        .arg(1000)
        .query(conn)
        .unwrap();
    let max_time_ms = ids.iter().map(|&id| time_ms(id)).max().unwrap();
    Before {
        kept_last: kept[9],
        ids,
        counter,
        max_time_ms,
    }
}

/// After the restart, with the server's clock 30 s behind the restored floor: issuing goes
/// on at once from above the floor (never reusing a millisecond issued before the restart)
/// at real-time pace, and INFO says the clock is paced ahead. With the clock set to 0.5 s
/// behind, IDs still come from above the floor and above each key's last ID.
fn check_after(server: &Server, before: &Before) {
    let mut conn = server.conn();
    let first: i64 = cmd("SNOWFLAKE.NEXT").arg("fresh").query(&mut conn).unwrap();
    assert!(
        time_ms(first) > before.max_time_ms,
        "reused a millisecond issued before the restart"
    );
    assert_eq!(idgen_tests::info_field(&mut conn, "clock_paced"), "1");
    // (Which bursts the pace refuses is tested with an injected clock in
    // core/tests/snowflake_rules.rs: here it would depend on how long the restart took.)

    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("idgen.debug-clock-offset-ms")
        .arg(-500)
        .query(&mut conn)
        .unwrap();
    let fresh: Vec<i64> = snowflake_batch(&mut conn, "fresh", 1000).unwrap();
    assert!(fresh[0] > first);
    let kept: i64 = cmd("SNOWFLAKE.NEXT").arg("kept").query(&mut conn).unwrap();
    assert!(kept > before.kept_last);
    let counter: i64 = cmd("SEGMENT.NEXT").arg("counter").query(&mut conn).unwrap();
    assert!(counter > before.counter);
    assert_unique(
        before
            .ids
            .iter()
            .chain([&first])
            .chain(&fresh)
            .chain([&kept])
            .copied(),
    );
}

/// The restart fence is off, so that what keeps IDs from repeating here is the floor
/// restored from RDB aux data and the replayed AOF, and nothing else.
fn options(extra: &[&str]) -> ServerOptions {
    ServerOptions::module(&[
        "step",
        &STEP.to_string(),
        "offset",
        "3",
        "snowflake-restart-fence",
        "no",
    ])
    .server_args(&["--enable-protected-configs", "yes"])
    .server_args(extra)
}

/// A server with AOF on, with or without (`preamble` yes/no) the RDB preamble.
fn aof_server(preamble: &str) -> Server {
    Server::start_with(options(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        preamble,
    ]))
    .unwrap_or_else(|failure| panic!("{}", failure.log))
}

/// Restarts `server` with its clock 30 s behind.
fn restart_behind(server: &mut Server) {
    server.terminate();
    server
        .start_again(&["debug-clock-offset-ms", "-30000"])
        .unwrap_or_else(|failure| panic!("restart failed:\n{}", failure.log));
}

fn wait_for_rewrite(conn: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = cmd("INFO").arg("persistence").query(conn).unwrap();
        let busy =
            info.contains("aof_rewrite_in_progress:1") || info.contains("aof_rewrite_scheduled:1");
        if !busy {
            return;
        }
        assert!(Instant::now() < deadline, "AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn restart_from_rdb() {
    let mut server = Server::start_with(options(&[])).unwrap();
    let mut conn = server.conn();
    let before = issue_before(&mut conn);
    let _: () = cmd("SAVE").query(&mut conn).unwrap();
    restart_behind(&mut server);
    check_after(&server, &before);
}

#[test]
fn restart_from_aof_with_rdb_preamble() {
    let mut server = aof_server("yes");
    let mut conn = server.conn();
    let _: i64 = cmd("SNOWFLAKE.NEXT").arg("early").query(&mut conn).unwrap();
    let _: String = cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_for_rewrite(&mut conn);
    // These writes follow the preamble as commands.
    let before = issue_before(&mut conn);
    restart_behind(&mut server);
    check_after(&server, &before);
}

#[test]
fn restart_from_aof_without_preamble() {
    let mut server = aof_server("no");
    let mut conn = server.conn();
    let before = issue_before(&mut conn);
    // Rewritten as commands: SNOWFLAKE.SETBOUND for each key that still exists.
    let _: String = cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_for_rewrite(&mut conn);
    let _: i64 = cmd("SNOWFLAKE.NEXT").arg("kept").query(&mut conn).unwrap();
    let before = Before {
        kept_last: cmd("SNOWFLAKE.NEXT").arg("kept").query(&mut conn).unwrap(),
        ..before
    };
    restart_behind(&mut server);
    let mut conn = server.conn();
    // "gone" was deleted before the rewrite, so nothing in the AOF remembers its burst:
    // without the RDB aux record, the floor comes from the kept keys and the restart fence.
    // Check what does hold: every kept key continues above its last ID, and the counter.
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("idgen.debug-clock-offset-ms")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    let kept: i64 = cmd("SNOWFLAKE.NEXT").arg("kept").query(&mut conn).unwrap();
    assert!(kept > before.kept_last);
    let counter: i64 = cmd("SEGMENT.NEXT").arg("counter").query(&mut conn).unwrap();
    assert!(counter > before.counter);
}

#[test]
fn restart_from_aof_without_preamble_replays_the_floor() {
    let mut server = aof_server("no");
    let mut conn = server.conn();
    // No rewrite after the burst: the AOF holds the bounds written (SNOWFLAKE.SETBOUND),
    // then the DEL.
    let before = issue_before(&mut conn);
    restart_behind(&mut server);
    check_after(&server, &before);
}

#[test]
fn debug_reload_and_debug_loadaof_continue_above() {
    let server = Server::start_with(options(&["--appendonly", "yes"])).unwrap();
    let mut conn = server.conn();
    let mut all = Vec::new();
    for reload in ["RELOAD", "LOADAOF", "RELOAD"] {
        let ids: Vec<i64> = snowflake_batch(&mut conn, "k", 5000).unwrap();
        let counter: i64 = cmd("SEGMENT.NEXT").arg("c").query(&mut conn).unwrap();
        let last = *ids.last().unwrap();
        all.extend(ids);
        let _: () = cmd("DEBUG").arg(reload).query(&mut conn).unwrap();
        let after: i64 = cmd("SNOWFLAKE.NEXT").arg("other").query(&mut conn).unwrap();
        let next: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
        assert!(next > last, "DEBUG {reload}");
        let counter_after: i64 = cmd("SEGMENT.NEXT").arg("c").query(&mut conn).unwrap();
        assert!(counter_after > counter, "DEBUG {reload}");
        all.extend([after, next]);
    }
    assert_unique(all);
}

#[test]
fn migrate_moves_a_key_whose_ids_continue_above_it() {
    // 3,000 IDs are more than one millisecond's sequence at step 2, which the restart
    // fence would refuse in the first milliseconds after the start: it is off.
    let source = Server::start(&["step", "2", "offset", "0", "snowflake-restart-fence", "no"]);
    let target = Server::start(&["step", "2", "offset", "1"]);
    let mut conn = source.conn();
    let ids: Vec<i64> = snowflake_batch(&mut conn, "moving", 3000).unwrap();
    let reply: String = cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(target.port())
        .arg("moving")
        .arg(0)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(reply, "OK");
    let mut target_conn = target.conn();
    let next: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("moving")
        .query(&mut target_conn)
        .unwrap();
    assert!(next > *ids.last().unwrap());
}

#[test]
fn the_segment_fence_applies_once_per_key_after_each_start_and_never_on_reload() {
    let next = |server: &Server, key: &str| -> i64 {
        cmd("SEGMENT.NEXT")
            .arg(key)
            .query(&mut server.conn())
            .unwrap()
    };
    // What the key holds: at least every value handed out (a reservation may reach higher);
    // whatever continues from the key continues above it.
    let held = |server: &Server, key: &str| -> i64 {
        cmd("GET").arg(key).query(&mut server.conn()).unwrap()
    };
    let mut a = Server::start_with(
        ServerOptions::module(&["step", "2", "offset", "0", "segment-fence", "1000"])
            .server_args(&["--appendonly", "yes"]),
    )
    .unwrap();
    // The start is an event: each key skips 1000 values on its first use, once.
    assert_eq!(next(&a, "k"), 1002);
    assert_eq!(next(&a, "k"), 1004);
    assert_eq!(next(&a, "j"), 1002);
    assert_eq!(
        idgen_tests::info_field(&mut a.conn(), "fences_applied"),
        "2"
    );
    // Reloading data is not an event: the key continues right above what it holds.
    let before = held(&a, "k");
    let _: () = cmd("DEBUG").arg("LOADAOF").query(&mut a.conn()).unwrap();
    assert_eq!(next(&a, "k"), before + 2);
    // A restart is.
    let before = held(&a, "k");
    a.terminate();
    a.start_again(&[]).unwrap();
    assert_eq!(next(&a, "k"), before + 1000 + 2);
    assert_eq!(next(&a, "k"), before + 1000 + 4);
    // A replica's start arms it too: the promoted replica's first use of a key skips it.
    let b = Server::start_replica(&a, &["step", "2", "offset", "1", "segment-fence", "1000"]);
    a.wait_replicated(1);
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut b.conn())
        .unwrap();
    let before = held(&b, "k");
    assert_eq!(before % 2, 0, "the replica holds the master's value");
    assert_eq!(next(&b, "k"), before + 1000 + 1);
    assert_eq!(next(&b, "k"), before + 1000 + 3);
    assert_eq!(idgen_tests::info_field(&mut b.conn(), "promotions"), "1");
    // A promotion does not arm it again: b back to replica (a full sync) and promoted.
    let before = held(&b, "k");
    let _: () = cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(a.port())
        .query(&mut b.conn())
        .unwrap();
    b.wait_in_sync();
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut b.conn())
        .unwrap();
    assert_eq!(next(&b, "k"), before + 2);
    assert_eq!(idgen_tests::info_field(&mut b.conn(), "promotions"), "2");
}
