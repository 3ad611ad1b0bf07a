//! Segment reservations against a real server: `SEGMENT.NEXT` writes a top ahead of use into
//! the key and hands the values under it out from memory, writing and replicating nothing;
//! every value handed out is at most what the key holds (on the master and on its replicas);
//! and every write to the key behind the module's back — `SET`, `RESTORE`, `COPY`, `RENAME`,
//! a TTL, `SWAPDB`, a transaction, a script — makes the next call continue above the key's
//! new value.

use idgen_tests::{info_field, Server};
use redis::{cmd, Connection};

fn next(conn: &mut Connection, key: &str) -> i64 {
    cmd("SEGMENT.NEXT").arg(key).query(conn).unwrap()
}

fn get(conn: &mut Connection, key: &str) -> i64 {
    cmd("GET").arg(key).query(conn).unwrap()
}

fn writes(conn: &mut Connection) -> u64 {
    info_field(conn, "segment_writes").parse().unwrap()
}

/// Calls `SEGMENT.NEXT` until the key holds at least `ahead` more than the last value (a
/// reservation grows when used up fast); returns the last value.
fn reserve(conn: &mut Connection, key: &str, ahead: i64) -> i64 {
    for _ in 0..1000 {
        let value = next(conn, key);
        if get(conn, key) >= value + ahead {
            return value;
        }
    }
    panic!("SEGMENT.NEXT {key} never reserved {ahead} ahead in 1000 calls");
}

/// A reservation of at least one value ahead.
fn reserve_ahead(conn: &mut Connection, key: &str) -> i64 {
    reserve(conn, key, 1)
}

#[test]
fn single_calls_write_a_reservation_now_and_then_and_never_hand_out_above_the_key() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    const CALLS: u64 = 20_000;
    let before = writes(&mut conn);
    let mut last = 0;
    for _ in 0..CALLS {
        let value = next(&mut conn, "orders");
        assert!(value > last, "{value} after {last}");
        last = value;
    }
    let held = get(&mut conn, "orders");
    assert!(
        held >= last,
        "the key holds {held}, below {last} handed out"
    );
    let written = writes(&mut conn) - before;
    println!(
        "{CALLS} single calls wrote the key {written} times; it holds {held}, last value {last}"
    );
    // A reservation at least doubles when used up within a second; at the slowest this
    // machine runs (a few thousand calls a second) that is a few dozen writes.
    assert!(
        written * 20 <= CALLS,
        "{written} writes for {CALLS} calls: reservations do not grow"
    );
}

#[test]
fn dense_mode_writes_every_value_and_reserves_nothing() {
    let server = Server::start(&["segment-fence", "0"]);
    let mut conn = server.conn();
    let before = writes(&mut conn);
    for expected in 1..=500 {
        assert_eq!(next(&mut conn, "invoice"), expected);
        assert_eq!(get(&mut conn, "invoice"), expected);
    }
    assert_eq!(writes(&mut conn) - before, 500);
}

#[test]
fn a_replica_holds_at_least_every_value_handed_out_and_continues_above_them_when_promoted() {
    let master = Server::start(&["step", "2", "offset", "0"]);
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let mut conn = master.conn();
    let mut last = 0;
    for _ in 0..5_000 {
        last = next(&mut conn, "orders");
    }
    master.wait_replicated(1);
    let mut on_replica = replica.conn();
    let held = get(&mut on_replica, "orders");
    assert!(
        held >= last,
        "the replica holds {held}, below {last} handed out"
    );
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut on_replica)
        .unwrap();
    let after = next(&mut on_replica, "orders");
    assert!(after > held, "the promoted replica answered {after}");
}

#[test]
fn a_set_to_another_value_makes_the_next_call_continue_above_it() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let last = reserve(&mut conn, "k", 4);
    // Below the reservation's top, above the last value: from memory the next would be
    // last + 1; the seed is followed.
    let _: () = cmd("SET").arg("k").arg(last + 2).query(&mut conn).unwrap();
    assert_eq!(next(&mut conn, "k"), last + 3);
    reserve_ahead(&mut conn, "k");
    let _: () = cmd("SET")
        .arg("k")
        .arg(9_000_000_000i64)
        .query(&mut conn)
        .unwrap();
    assert_eq!(next(&mut conn, "k"), 9_000_000_001);
}

#[test]
fn restore_copy_rename_and_a_ttl_void_the_reservation_even_with_the_same_value() {
    let server = Server::start(&[]);
    let mut conn = server.conn();

    // RESTORE of the key's own dump: the same number, written behind the module's back.
    reserve_ahead(&mut conn, "k");
    let held = get(&mut conn, "k");
    let dump: Vec<u8> = cmd("DUMP").arg("k").query(&mut conn).unwrap();
    let _: () = cmd("RESTORE")
        .arg("k")
        .arg(0)
        .arg(dump)
        .arg("REPLACE")
        .query(&mut conn)
        .unwrap();
    assert_eq!(next(&mut conn, "k"), held + 1, "after RESTORE");

    // COPY onto the key from a key holding the same number.
    reserve_ahead(&mut conn, "k");
    let held = get(&mut conn, "k");
    let _: () = cmd("SET").arg("twin").arg(held).query(&mut conn).unwrap();
    let copied: i64 = cmd("COPY")
        .arg("twin")
        .arg("k")
        .arg("REPLACE")
        .query(&mut conn)
        .unwrap();
    assert_eq!(copied, 1);
    assert_eq!(next(&mut conn, "k"), held + 1, "after COPY");

    // RENAME onto the key.
    reserve_ahead(&mut conn, "k");
    let held = get(&mut conn, "k");
    let _: () = cmd("SET").arg("twin").arg(held).query(&mut conn).unwrap();
    let _: () = cmd("RENAME").arg("twin").arg("k").query(&mut conn).unwrap();
    assert_eq!(next(&mut conn, "k"), held + 1, "after RENAME");

    // A TTL: the next call continues above and, as SET does, leaves no TTL.
    reserve_ahead(&mut conn, "k");
    let held = get(&mut conn, "k");
    let _: i64 = cmd("EXPIRE").arg("k").arg(100).query(&mut conn).unwrap();
    assert_eq!(next(&mut conn, "k"), held + 1, "after EXPIRE");
    let ttl: i64 = cmd("TTL").arg("k").query(&mut conn).unwrap();
    assert_eq!(ttl, -1);
}

#[test]
fn swapdb_moves_the_records_with_the_data_and_voids_the_reservations() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    reserve_ahead(&mut conn, "k");
    let held_in_db0 = get(&mut conn, "k");
    // db 1's key was never used by SEGMENT.NEXT.
    let _: () = cmd("SELECT").arg(1).query(&mut conn).unwrap();
    let _: () = cmd("SET").arg("k").arg(5_000).query(&mut conn).unwrap();
    let _: () = cmd("SWAPDB").arg(0).arg(1).query(&mut conn).unwrap();
    // db 1 now holds the counter db 0 had: it continues above its value, fenced once already.
    assert_eq!(next(&mut conn, "k"), held_in_db0 + 1);
    // db 0 holds a key this start never used: its first use is fenced.
    let _: () = cmd("SELECT").arg(0).query(&mut conn).unwrap();
    assert_eq!(next(&mut conn, "k"), 5_000 + 1_000_000_000 + 1);
}

#[test]
fn a_write_in_a_transaction_or_a_script_is_seen_by_the_next_call_in_it() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    reserve_ahead(&mut conn, "k");
    let (_, (), after): (i64, (), i64) = redis::pipe()
        .atomic()
        .cmd("SEGMENT.NEXT")
        .arg("k")
        .cmd("SET")
        .arg("k")
        .arg(7_000_000_000i64)
        .cmd("SEGMENT.NEXT")
        .arg("k")
        .query(&mut conn)
        .unwrap();
    assert_eq!(after, 7_000_000_001);
    reserve_ahead(&mut conn, "k");
    let after: i64 = redis::Script::new(
        "redis.call('SEGMENT.NEXT', KEYS[1]); redis.call('SET', KEYS[1], ARGV[1]); \
         return redis.call('SEGMENT.NEXT', KEYS[1])",
    )
    .key("k")
    .arg(8_000_000_000i64)
    .invoke(&mut conn)
    .unwrap();
    assert_eq!(after, 8_000_000_001);
}

#[test]
fn a_call_served_from_memory_leaves_a_watch_alone_and_one_that_writes_aborts_it() {
    let server = Server::start(&[]);
    let (mut watcher, mut other) = (server.conn(), server.conn());
    reserve_ahead(&mut other, "k");
    // WATCH, another client's call, then a transaction: whether EXEC ran.
    let watched = |watcher: &mut Connection, other: &mut Connection| -> bool {
        let _: () = cmd("WATCH").arg("k").query(watcher).unwrap();
        next(other, "k");
        let _: () = cmd("MULTI").query(watcher).unwrap();
        let _: () = cmd("PING").query(watcher).unwrap();
        let exec: redis::Value = cmd("EXEC").query(watcher).unwrap();
        exec != redis::Value::Nil
    };
    // The key's value is unchanged: the transaction goes through.
    assert!(watched(&mut watcher, &mut other));
    // After a write behind the reservation, the next call writes the key: it aborts.
    let _: () = cmd("SET").arg("k").arg(1).query(&mut other).unwrap();
    assert!(!watched(&mut watcher, &mut other));
}
