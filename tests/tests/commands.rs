//! Every command's reply shape, and the module behaving as a Redis citizen: configs, COMMAND
//! DOCS, key specs, INFO, key type, DUMP/RESTORE, COPY, keyspace notifications.

use idgen_core::{Layout, DEFAULT_EPOCH_UNIX_MS};
use idgen_tests::{
    assert_strictly_increasing, assert_unique, info_field, now_ms, snowflake_batch, Server,
};
use redis::{cmd, Value};

#[test]
fn snowflake_next_replies_an_integer_or_an_array_of_increasing_ids() {
    // Without the restart fence, IDs carry the current time from the first call on.
    let server = Server::start(&["step", "6", "offset", "2", "snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let before = now_ms();
    let one: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("orders")
        .query(&mut conn)
        .unwrap();
    let batch: Vec<i64> = snowflake_batch(&mut conn, "orders", 5000).unwrap();
    let after = now_ms();
    assert_eq!(batch.len(), 5000);
    let mut all = vec![one];
    all.extend(&batch);
    assert_strictly_increasing(&all);
    let layout = Layout::default();
    for id in &all {
        let parts = layout.decode(*id, 6).unwrap();
        assert_eq!(parts.offset, 2, "every ID carries this instance's offset");
        assert_eq!(parts.shard, 0);
        // 5000 IDs at 683 per ms may borrow up to 8 ms ahead.
        assert!(
            parts.unix_ms >= before && parts.unix_ms <= after + 10,
            "{parts:?}"
        );
    }
    // COUNT 1 is still an array: the shape depends on the option, not on the count.
    let single: Value = cmd("SNOWFLAKE.NEXT")
        .arg("orders")
        .arg("COUNT")
        .arg(1)
        .query(&mut conn)
        .unwrap();
    assert!(
        matches!(single, Value::Array(ref items) if items.len() == 1),
        "{single:?}"
    );
}

#[test]
fn after_a_start_ids_begin_above_the_restart_fence() {
    let started = now_ms();
    // 4 IDs per millisecond, so that the batch below needs 25 s of sequence: refused
    // whenever it comes within 25 s of the start, however slow the machine (with 4,096 per
    // millisecond it needed 25 ms, and a loaded machine sent it later than that).
    let server = Server::start(&[
        "max-drift-ms",
        "3000",
        "shard-bits",
        "20",
        "sequence-bits",
        "2",
    ]);
    let layout = Layout {
        shard_bits: 20,
        sequence_bits: 2,
        ..Layout::default()
    };
    let mut conn = server.conn();
    let id: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    let issued_at = layout.decode(id, 1).unwrap().unix_ms;
    // Anything issued before a crash was at most max-drift-ms ahead: start above that.
    assert!(
        issued_at >= started + 2999 && issued_at <= now_ms() + 3000,
        "{issued_at}"
    );
    // A batch that would need to borrow beyond the bound says the fence is why.
    let refused: redis::RedisResult<Vec<i64>> = snowflake_batch(&mut conn, "k", 100_000);
    let error = refused.unwrap_err();
    assert_eq!(error.code(), Some("DRIFT"));
    assert!(error.to_string().contains("restart fence is on"), "{error}");
    // A boolean, as Redis's own INFO fields are: 0 or 1.
    assert_eq!(info_field(&mut conn, "snowflake_restart_fence"), "1");
}

#[test]
fn snowflake_ids_are_unique_across_keys_and_keep_the_shard() {
    // Switching to a lower shard within a millisecond moves the key to the next one; right
    // after a start the restart fence leaves no room for that, so it is off here.
    let server = Server::start(&["default-shard", "7", "snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let mut all = Vec::new();
    for round in 0..200 {
        for key in ["a", "b", "c"] {
            let id: i64 = cmd("SNOWFLAKE.NEXT").arg(key).query(&mut conn).unwrap();
            all.push(id);
            let sharded: i64 = cmd("SNOWFLAKE.NEXT")
                .arg(key)
                .arg("SHARD")
                .arg(round % 1024)
                .query(&mut conn)
                .unwrap();
            all.push(sharded);
            assert_eq!(
                Layout::default().decode(sharded, 1).unwrap().shard,
                round % 1024
            );
        }
    }
    assert_eq!(Layout::default().decode(all[0], 1).unwrap().shard, 7);
    assert_unique(all);
}

#[test]
fn segment_next_continues_above_the_key_in_the_offset_class() {
    // The arithmetic, without the fence a start puts before each key's first value.
    let server = Server::start(&["step", "6", "offset", "2", "segment-fence", "0"]);
    let mut conn = server.conn();
    let first: i64 = cmd("SEGMENT.NEXT").arg("invoice").query(&mut conn).unwrap();
    assert_eq!(first, 2);
    let range: Vec<i64> = cmd("SEGMENT.NEXT")
        .arg("invoice")
        .arg("COUNT")
        .arg(1000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(range, vec![8, 8 + 999 * 6, 6]);
    let stored: i64 = cmd("GET").arg("invoice").query(&mut conn).unwrap();
    assert_eq!(stored, 8 + 999 * 6, "the key holds the high-water mark");

    // An operator's seed, such as a database's max id, is continued above.
    let _: () = cmd("SET")
        .arg("seeded")
        .arg(5_000_000)
        .query(&mut conn)
        .unwrap();
    let next: i64 = cmd("SEGMENT.NEXT").arg("seeded").query(&mut conn).unwrap();
    // 5,000,000 is itself ≡ 2 (mod 6), so it counts as handed out: next is 5,000,006.
    assert_eq!(next, 5_000_006);
    let _: () = cmd("SET")
        .arg("seeded")
        .arg(5_000_001)
        .query(&mut conn)
        .unwrap();
    // 5,000,001 is below the 5,000,006 this instance handed out: a lowering SET, continued
    // above what was handed out rather than handing 5,000,006 out a second time.
    let next: i64 = cmd("SEGMENT.NEXT").arg("seeded").query(&mut conn).unwrap();
    assert_eq!(next, 5_000_012);
}

/// SEGMENT.NEXT writes the new mark into the key's string in place: it must read back as
/// the plain integer, also when its length changes or the old value was a shared small
/// integer, and the key must stay a plain string INCR and GET understand, without a TTL.
#[test]
fn segment_next_leaves_a_plain_integer_string_without_ttl() {
    let server = Server::start(&["step", "1", "offset", "0", "segment-fence", "0"]);
    let mut conn = server.conn();
    let get = |conn: &mut redis::Connection, key: &str| -> String {
        cmd("GET").arg(key).query(conn).unwrap()
    };
    // 9 (a shared small integer in Redis) → 10, and 99,999 → 100,000: the string grows by
    // a digit.
    let _: () = cmd("SET").arg("g").arg(9).query(&mut conn).unwrap();
    let next: i64 = cmd("SEGMENT.NEXT").arg("g").query(&mut conn).unwrap();
    assert_eq!((next, get(&mut conn, "g")), (10, "10".to_string()));
    let _: Vec<i64> = cmd("SEGMENT.NEXT")
        .arg("g")
        .arg("COUNT")
        .arg(99_990)
        .query(&mut conn)
        .unwrap();
    assert_eq!(get(&mut conn, "g"), "100000");
    // The key is still a string INCR understands, and its TTL is gone after SEGMENT.NEXT.
    let incremented: i64 = cmd("INCR").arg("g").query(&mut conn).unwrap();
    assert_eq!(incremented, 100_001);
    let _: () = cmd("EXPIRE").arg("g").arg(1000).query(&mut conn).unwrap();
    let _: i64 = cmd("SEGMENT.NEXT").arg("g").query(&mut conn).unwrap();
    let ttl: i64 = cmd("TTL").arg("g").query(&mut conn).unwrap();
    assert_eq!(ttl, -1, "SEGMENT.NEXT removes a TTL, as SET does");
    assert_eq!(get(&mut conn, "g"), "100002");
    let kind: String = cmd("TYPE").arg("g").query(&mut conn).unwrap();
    assert_eq!(kind, "string");
}

#[test]
fn decode_gives_time_shard_sequence_and_offset() {
    let server = Server::start(&["step", "4", "offset", "3"]);
    let mut conn = server.conn();
    let id: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("k")
        .arg("SHARD")
        .arg(9)
        .query(&mut conn)
        .unwrap();
    let parts: Vec<Value> = cmd("SNOWFLAKE.DECODE").arg(id).query(&mut conn).unwrap();
    let fields: Vec<String> = parts
        .iter()
        .step_by(2)
        .map(|v| redis::from_redis_value_ref(v).unwrap())
        .collect();
    assert_eq!(
        fields,
        ["unix_ms", "utc", "time_ms", "shard", "sequence", "offset"]
    );
    let value = |i: usize| -> i64 { redis::from_redis_value_ref(&parts[2 * i + 1]).unwrap() };
    let expected = Layout::default().decode(id, 4).unwrap();
    assert_eq!(value(0) as u64, expected.unix_ms);
    assert_eq!(value(2) as u64, expected.unix_ms - DEFAULT_EPOCH_UNIX_MS);
    assert_eq!(value(3), 9);
    assert_eq!(value(4) as u64, expected.sequence);
    assert_eq!(value(5), 3);
    let utc: String = redis::from_redis_value_ref(&parts[3]).unwrap();
    assert_eq!(utc, idgen_core::utc::format_unix_ms(expected.unix_ms));
}

#[test]
fn bound_and_setbound_read_and_move_a_key_forward() {
    // Without the restart fence IDs start at the current time, so operator bounds a little
    // ahead stay within max-drift-ms.
    let server = Server::start(&["snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let none: Option<i64> = cmd("SNOWFLAKE.BOUND").arg("k").query(&mut conn).unwrap();
    assert_eq!(none, None);
    let id: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    // The bound is ahead of the ID: it covers the next idgen.max-drift-ms / 2 of IDs.
    let bound: i64 = cmd("SNOWFLAKE.BOUND").arg("k").query(&mut conn).unwrap();
    let time = |id: i64| id >> 22;
    assert_eq!(time(bound) - time(id), 1000, "a lease of max-drift-ms / 2");
    let backwards: redis::RedisResult<()> = cmd("SNOWFLAKE.SETBOUND")
        .arg("k")
        .arg(bound - 1)
        .query(&mut conn);
    assert!(backwards
        .unwrap_err()
        .to_string()
        .contains("only moves a key's bound forward"));
    let with_owner: redis::RedisResult<()> = cmd("SNOWFLAKE.SETBOUND")
        .arg("k")
        .arg(bound + 1)
        .arg(5)
        .query(&mut conn);
    assert!(with_owner
        .unwrap_err()
        .to_string()
        .contains("owner is written by replication"));
    // An operator's bound: every instance, this one too, continues above it.
    let _: () = cmd("SNOWFLAKE.SETBOUND")
        .arg("k")
        .arg(bound + 1000)
        .query(&mut conn)
        .unwrap();
    let next: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    assert!(next > bound + 1000);
    // The old name still works (AOF files of earlier versions contain it): a bound with no
    // owner, here on a new key.
    let _: () = cmd("SNOWFLAKE.SETLAST")
        .arg("j")
        .arg(next)
        .query(&mut conn)
        .unwrap();
    let bound_j: i64 = cmd("SNOWFLAKE.BOUND").arg("j").query(&mut conn).unwrap();
    assert_eq!(bound_j, next);
    let after: i64 = cmd("SNOWFLAKE.NEXT").arg("j").query(&mut conn).unwrap();
    assert!(after > next);
    let type_name: String = cmd("TYPE").arg("k").query(&mut conn).unwrap();
    assert_eq!(type_name, "snowflake");
}

#[test]
fn configs_are_visible_and_cannot_change_at_runtime() {
    let server = Server::start(&["step", "6", "offset", "5", "max-drift-ms", "500"]);
    let mut conn = server.conn();
    let configs: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("idgen.*")
        .query(&mut conn)
        .unwrap();
    let pairs: std::collections::HashMap<_, _> = configs
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    assert_eq!(pairs["idgen.step"], "6");
    assert_eq!(pairs["idgen.offset"], "5");
    assert_eq!(pairs["idgen.max-drift-ms"], "500");
    assert_eq!(pairs["idgen.time-bits"], "41");
    assert_eq!(pairs["idgen.snowflake-restart-fence"], "yes");
    assert_eq!(pairs["idgen.time-unit-ms"], "1");
    assert_eq!(pairs["idgen.identity-conflicts"], "refuse");
    assert_eq!(pairs["idgen.lease-workers"], "0");
    assert_eq!(pairs["idgen.lease-max-ms"], "10000");
    assert_eq!(pairs.len(), 15, "{pairs:?}");
    let refused: redis::RedisResult<()> = cmd("CONFIG")
        .arg("SET")
        .arg("idgen.offset")
        .arg(1)
        .query(&mut conn);
    assert!(refused.is_err());
    assert_eq!(info_field(&mut conn, "offset"), "5");
}

#[test]
fn info_section_shows_identity_layout_and_counters() {
    let server = Server::start(&["step", "3", "offset", "1"]);
    let mut conn = server.conn();
    let _: Vec<i64> = snowflake_batch(&mut conn, "k", 10).unwrap();
    let _: Vec<i64> = cmd("SEGMENT.NEXT")
        .arg("s")
        .arg("COUNT")
        .arg(7)
        .query(&mut conn)
        .unwrap();
    let _: redis::RedisResult<()> = cmd("SEGMENT.NEXT").arg("k").query(&mut conn);
    assert_eq!(info_field(&mut conn, "step"), "3");
    assert_eq!(info_field(&mut conn, "offset"), "1");
    assert_eq!(info_field(&mut conn, "layout_runs_out"), "2093-09-06");
    assert_eq!(info_field(&mut conn, "snowflake_ids_per_ms"), "1365");
    assert_eq!(info_field(&mut conn, "snowflake_ids_issued"), "10");
    assert_eq!(info_field(&mut conn, "segment_ids_issued"), "7");
    assert_eq!(info_field(&mut conn, "errors"), "1");
}

#[test]
fn command_docs_and_key_specs_describe_the_commands() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let keys: Vec<String> = cmd("COMMAND")
        .arg("GETKEYS")
        .arg("SNOWFLAKE.NEXT")
        .arg("orders")
        .arg("COUNT")
        .arg(5)
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys, ["orders"]);
    let keys: Vec<String> = cmd("COMMAND")
        .arg("GETKEYS")
        .arg("SEGMENT.NEXT")
        .arg("invoice")
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys, ["invoice"]);
    for name in ["snowflake.next", "segment.next", "snowflake.decode"] {
        let docs: Value = cmd("COMMAND")
            .arg("DOCS")
            .arg(name)
            .query(&mut conn)
            .unwrap();
        let text = format!("{docs:?}");
        assert!(
            text.contains("summary") && text.contains("complexity"),
            "{name}: {text}"
        );
    }
    // COMMAND INFO: [name, arity, flags, first key, last key, step, ACL categories, tips, …].
    // `fast` is for O(1) commands: SEGMENT.NEXT is (its reply is a range whatever COUNT is);
    // SNOWFLAKE.NEXT is O(COUNT). Both issue different values for the same call: the tip
    // says so to clients and proxies.
    for (command, fast) in [("snowflake.next", false), ("segment.next", true)] {
        let info: Vec<Vec<Value>> = cmd("COMMAND")
            .arg("INFO")
            .arg(command)
            .query(&mut conn)
            .unwrap();
        let words = |value: &Value| -> Vec<String> {
            redis::from_redis_value_ref::<Vec<String>>(value).unwrap()
        };
        let flags = words(&info[0][2]);
        assert!(
            flags.contains(&"write".to_string()) && flags.contains(&"denyoom".to_string()),
            "{command}: {flags:?}"
        );
        assert_eq!(
            flags.contains(&"fast".to_string()),
            fast,
            "{command}: {flags:?}"
        );
        let tips = words(&info[0][7]);
        assert_eq!(tips, ["nondeterministic_output"], "{command}");
    }
    // Arity is enforced by the server for a wrong count.
    let short: redis::RedisResult<()> = cmd("SNOWFLAKE.DECODE").query(&mut conn);
    assert!(short
        .unwrap_err()
        .to_string()
        .contains("wrong number of arguments"));
}

#[test]
fn dump_restore_and_copy_keep_the_last_id_and_ids_continue_above_it() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let id: i64 = cmd("SNOWFLAKE.NEXT").arg("src").query(&mut conn).unwrap();
    let dumped: Vec<u8> = cmd("DUMP").arg("src").query(&mut conn).unwrap();
    let other = Server::start(&["step", "2", "offset", "1"]);
    let mut other_conn = other.conn();
    let _: () = cmd("RESTORE")
        .arg("src")
        .arg(0)
        .arg(dumped)
        .query(&mut other_conn)
        .unwrap();
    let bound: i64 = cmd("SNOWFLAKE.BOUND").arg("src").query(&mut conn).unwrap();
    let restored: i64 = cmd("SNOWFLAKE.BOUND")
        .arg("src")
        .query(&mut other_conn)
        .unwrap();
    assert_eq!(restored, bound);
    assert!(bound >= id);
    let next: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("src")
        .query(&mut other_conn)
        .unwrap();
    assert!(next > bound, "another instance continues above the bound");
    let _: i64 = cmd("COPY").arg("src").arg("dst").query(&mut conn).unwrap();
    let copied: i64 = cmd("SNOWFLAKE.BOUND").arg("dst").query(&mut conn).unwrap();
    assert_eq!(copied, bound);
    let from_copy: i64 = cmd("SNOWFLAKE.NEXT").arg("dst").query(&mut conn).unwrap();
    assert!(from_copy > id);
}

#[test]
fn keyspace_notifications_name_the_event_and_fire_when_the_key_changes() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KEA")
        .query(&mut conn)
        .unwrap();
    let mut listener = server.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    let _: i64 = cmd("SEGMENT.NEXT").arg("s").query(&mut conn).unwrap();
    let mut events = Vec::new();
    for _ in 0..2 {
        let message = pubsub.get_message().unwrap();
        let key: String = message.get_payload().unwrap();
        events.push((message.get_channel_name().to_string(), key));
    }
    assert_eq!(
        events,
        [
            ("__keyevent@0__:snowflake.next".to_string(), "k".to_string()),
            ("__keyevent@0__:segment.next".to_string(), "s".to_string())
        ]
    );
    // A snowflake call under the key's bound writes nothing, and fires nothing; a segment
    // call writes the key every time.
    let _: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    let _: i64 = cmd("SEGMENT.NEXT").arg("s").query(&mut conn).unwrap();
    let message = pubsub.get_message().unwrap();
    assert_eq!(message.get_channel_name(), "__keyevent@0__:segment.next");
}

/// Polls `INFO idgen` until the configuration check (run just after load) has reported.
fn warnings_of(server: &Server) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let warnings = info_field(&mut server.conn(), "warnings");
        if warnings != "none" || std::time::Instant::now() > deadline {
            return warnings;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn settings_that_void_a_guarantee_are_reported() {
    let risky = Server::start_with(
        idgen_tests::ServerOptions::module(&["snowflake-restart-fence", "no"])
            .server_args(&["--maxmemory-policy", "allkeys-lru"]),
    )
    .unwrap();
    let warnings = warnings_of(&risky);
    assert!(
        warnings.contains("maxmemory-policy is allkeys-lru"),
        "{warnings}"
    );
    assert!(warnings.contains("no persistence"), "{warnings}");
    assert!(
        warnings.contains("snowflake-restart-fence is no"),
        "{warnings}"
    );
    assert!(risky.log().contains("guarantee at risk: maxmemory-policy"));

    let safe = Server::start_with(idgen_tests::ServerOptions::module(&[]).server_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]))
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(info_field(&mut safe.conn(), "warnings"), "none");
}

/// `FORMAT`: IDs as bulk strings — decimal digits that JavaScript clients keep whole, and
/// fixed-width base32 and base62 that sort like the numbers — which `SNOWFLAKE.DECODE`
/// reads back.
#[test]
fn ids_as_strings_keep_every_digit_and_sort_like_the_numbers() {
    let server = Server::start(&["step", "4", "offset", "3", "snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let mut all: Vec<i64> = Vec::new();
    for (format, width) in [
        ("decimal", None),
        ("base32", Some(13)),
        ("base62", Some(11)),
    ] {
        let texts: Vec<String> = cmd("SNOWFLAKE.NEXT")
            .arg("orders")
            .arg("COUNT")
            .arg(500)
            .arg("FORMAT")
            .arg(format)
            .query(&mut conn)
            .unwrap();
        assert!(
            texts.windows(2).all(|w| w[0] < w[1] || width.is_none()),
            "{format} sorts"
        );
        for text in &texts {
            if let Some(width) = width {
                assert_eq!(text.len(), width, "{text}");
            }
            let id = idgen_core::IdFormat::ALL
                .into_iter()
                .find(|f| f.name() == format)
                .unwrap()
                .decode(text)
                .unwrap() as i64;
            all.push(id);
        }
        // SNOWFLAKE.DECODE reads the string form as it reads the number.
        let by_text: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE")
            .arg(&texts[0])
            .arg("FORMAT")
            .arg(format)
            .query(&mut conn)
            .unwrap();
        let by_number: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE")
            .arg(*all.iter().rev().nth(texts.len() - 1).unwrap())
            .query(&mut conn)
            .unwrap();
        assert_eq!(by_text, by_number, "{format}");
    }
    assert_strictly_increasing(&all);
    let single: String = cmd("SNOWFLAKE.NEXT")
        .arg("orders")
        .arg("FORMAT")
        .arg("BASE32")
        .query(&mut conn)
        .unwrap();
    let lower: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE")
        .arg(single.to_lowercase())
        .arg("FORMAT")
        .arg("base32")
        .query(&mut conn)
        .unwrap();
    assert_eq!(lower.len(), 12, "Crockford base32 reads any case");

    let _: () = cmd("SET")
        .arg("invoice")
        .arg("9007199254740993")
        .query(&mut conn)
        .unwrap();
    let value: String = cmd("SEGMENT.NEXT")
        .arg("invoice")
        .arg("FORMAT")
        .arg("decimal")
        .query(&mut conn)
        .unwrap();
    let value: i64 = value.parse().unwrap();
    assert!(value > 9_007_199_254_740_993 && value % 4 == 3, "{value}");
    let range: Vec<redis::Value> = cmd("SEGMENT.NEXT")
        .arg("invoice")
        .arg("COUNT")
        .arg(10)
        .arg("FORMAT")
        .arg("decimal")
        .query(&mut conn)
        .unwrap();
    let range: Vec<String> = range
        .iter()
        .map(|v| redis::from_redis_value_ref::<String>(v).expect("a bulk string"))
        .collect();
    assert_eq!(
        range,
        [
            (value + 4).to_string(),
            (value + 40).to_string(),
            "4".into()
        ]
    );
}

/// The `unix_ms` `SNOWFLAKE.DECODE` gives for `id`.
fn unix_ms_of(conn: &mut redis::Connection, id: i64) -> i64 {
    let parts: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE").arg(id).query(conn).unwrap();
    redis::from_redis_value_ref(&parts[1]).unwrap()
}

/// `SNOWFLAKE.RANGE` bounds every ID issued in a window and no ID issued outside it;
/// `SNOWFLAKE.COMPOSE` builds the ID of given fields, which `SNOWFLAKE.DECODE` reads back.
#[test]
fn range_bounds_a_window_and_compose_builds_ids_from_fields() {
    let server = Server::start(&["step", "4", "offset", "1", "snowflake-restart-fence", "no"]);
    let mut conn = server.conn();
    let before = snowflake_batch(&mut conn, "orders", 100).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let inside = snowflake_batch(&mut conn, "orders", 2000).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let after = snowflake_batch(&mut conn, "orders", 100).unwrap();
    let mut unix_ms = |id: i64| unix_ms_of(&mut conn, id);
    // The window: the milliseconds of the middle batch, minus the edge milliseconds it
    // shares with the batches around it.
    let from = unix_ms(inside[0]).max(unix_ms(*before.last().unwrap()) + 1);
    let to = unix_ms(*inside.last().unwrap()).min(unix_ms(after[0]) - 1);
    let [lowest, highest]: [i64; 2] = cmd("SNOWFLAKE.RANGE")
        .arg(from)
        .arg(to)
        .query(&mut conn)
        .unwrap();
    let mut conn = server.conn();
    for id in before.iter().chain(&inside).chain(&after) {
        let ms: i64 = {
            let parts: Vec<redis::Value> =
                cmd("SNOWFLAKE.DECODE").arg(id).query(&mut conn).unwrap();
            redis::from_redis_value_ref(&parts[1]).unwrap()
        };
        assert_eq!(
            (lowest..=highest).contains(id),
            (from..=to).contains(&ms),
            "{id} at {ms}"
        );
    }
    let strings: Vec<String> = cmd("SNOWFLAKE.RANGE")
        .arg(from)
        .arg(to)
        .arg("FORMAT")
        .arg("base32")
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        strings[0],
        idgen_core::IdFormat::Base32.encode(lowest as u64)
    );

    let composed: i64 = cmd("SNOWFLAKE.COMPOSE")
        .arg(from)
        .arg(7)
        .arg(9)
        .query(&mut conn)
        .unwrap();
    assert_eq!(composed, lowest + (7 << 12) + 9);
    let parts: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE")
        .arg(composed)
        .query(&mut conn)
        .unwrap();
    let fields: Vec<i64> = [1, 7, 9, 11]
        .iter()
        .map(|&i| redis::from_redis_value_ref(&parts[i]).unwrap())
        .collect();
    assert_eq!(fields, [from, 7, 9, 9 % 4]);
    let text: String = cmd("SNOWFLAKE.COMPOSE")
        .arg(from)
        .arg(7)
        .arg(9)
        .arg("FORMAT")
        .arg("decimal")
        .query(&mut conn)
        .unwrap();
    assert_eq!(text, composed.to_string());
}
