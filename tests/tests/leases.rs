//! Leased worker ids against real servers: grant, renew, release, expiry, exhaustion, bad
//! input, the reserved shard band, replication, persistence, DUMP/RESTORE, and a promoted
//! replica that lost the last grant.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use idgen_tests::{digest, info_field, Server, ServerOptions, SHORT_LEASES as LEASES};
use redis::{cmd, Connection, RedisResult};

fn with_leases(extra: &[&str]) -> Vec<&'static str> {
    let mut args: Vec<&'static str> = LEASES.to_vec();
    for word in extra {
        args.push(Box::leak(word.to_string().into_boxed_str()));
    }
    args
}

type Lease = HashMap<String, redis::Value>;

fn int(lease: &Lease, field: &str) -> i64 {
    match lease.get(field) {
        Some(redis::Value::Int(value)) => *value,
        other => panic!("{field} is {other:?} in {lease:?}"),
    }
}

fn acquire(conn: &mut Connection, pool: &str, holder: &str, ms: Option<u64>) -> RedisResult<Lease> {
    let mut command = cmd("LEASE.ACQUIRE");
    command.arg(pool).arg(holder);
    if let Some(ms) = ms {
        command.arg("DURATION").arg(ms);
    }
    command.query(conn)
}

/// Acquires once the fence of a start or promotion allows it (refused with EXHAUSTED until
/// then); panics on any other error or after 10 s.
fn acquire_when_free(conn: &mut Connection, pool: &str, holder: &str, ms: u64) -> Lease {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match acquire(conn, pool, holder, Some(ms)) {
            Ok(lease) => return lease,
            Err(error) if error.code() == Some("EXHAUSTED") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => panic!("LEASE.ACQUIRE {pool} {holder}: {error}"),
        }
    }
}

fn list(conn: &mut Connection, pool: &str) -> Vec<Lease> {
    cmd("LEASE.LIST").arg(pool).query(conn).unwrap()
}

fn window(lease: &Lease) -> (i64, i64) {
    (int(lease, "start_unix_ms"), int(lease, "end_unix_ms"))
}

fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

fn error_of<T: std::fmt::Debug>(result: RedisResult<T>) -> String {
    let error = result.expect_err("the command should be refused");
    format!(
        "{} {}",
        error.code().unwrap_or("?"),
        error.detail().unwrap_or("")
    )
}

#[test]
fn grant_renew_release_and_list() {
    let server = Server::start(&LEASES);
    let mut conn = server.conn();
    let a = acquire_when_free(&mut conn, "pool", "host-a:1", 1000);
    let b = acquire_when_free(&mut conn, "pool", "host-b:1", 600);
    let (worker_a, worker_b) = (int(&a, "worker"), int(&b, "worker"));
    assert_ne!(worker_a, worker_b);
    for worker in [worker_a, worker_b] {
        assert!((1020..=1023).contains(&worker), "worker {worker}");
    }
    // What a client needs to build IDs.
    assert_eq!(int(&a, "shard_bits"), 10);
    assert_eq!(int(&a, "sequence_bits"), 12);
    assert_eq!(int(&a, "time_unit_ms"), 1);
    assert_eq!(int(&a, "max_lease_ms"), 1000);
    let (start, end) = window(&a);
    assert!(start <= end && end - start < 1000, "{start}..{end}");
    assert!(int(&a, "now_unix_ms") <= end);

    let renewed: Lease = cmd("LEASE.RENEW")
        .arg("pool")
        .arg(worker_b)
        .arg("host-b:1")
        .arg("DURATION")
        .arg(1000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(int(&renewed, "worker"), worker_b);
    assert_eq!(window(&renewed).0, window(&b).0);
    assert!(window(&renewed).1 >= window(&b).1);

    let listed = list(&mut conn, "pool");
    assert_eq!(listed.len(), 2);
    assert!(listed
        .iter()
        .all(|lease| lease.get("state") == Some(&redis::Value::BulkString(b"held".to_vec()))));

    let _: () = cmd("LEASE.RELEASE")
        .arg("pool")
        .arg(worker_a)
        .arg("host-a:1")
        .query(&mut conn)
        .unwrap();
    // Released once: the second release and a renewal of it are refused.
    let again = error_of(
        cmd("LEASE.RELEASE")
            .arg("pool")
            .arg(worker_a)
            .arg("host-a:1")
            .query::<()>(&mut conn),
    );
    assert!(again.starts_with("NOTHELD"), "{again}");
    // The next holder of the released worker id starts after its window.
    let mut holders = Vec::new();
    // Two worker ids were never leased (they go first), then the released one.
    for i in 0..3 {
        let lease = acquire_when_free(&mut conn, "pool", &format!("host-c:{i}"), 1000);
        holders.push(lease);
    }
    let reused = holders
        .iter()
        .find(|lease| int(lease, "worker") == worker_a)
        .expect("the released worker id is leased again");
    assert!(window(reused).0 > end);
    assert_eq!(info_field(&mut conn, "lease_grants"), "5");
    assert_eq!(info_field(&mut conn, "lease_renewals"), "1");
    assert_eq!(info_field(&mut conn, "lease_releases"), "1");
    assert_eq!(info_field(&mut conn, "lease_pools_in_use"), "1");
}

#[test]
fn expiry_and_exhaustion() {
    let server = Server::start(&with_leases(&["lease-workers", "1"]));
    let mut conn = server.conn();
    let first = acquire_when_free(&mut conn, "pool", "first", 100);
    let worker = int(&first, "worker");
    assert_eq!(worker, 1023);
    let refused = error_of(acquire(&mut conn, "pool", "second", Some(100)));
    assert!(
        refused.starts_with("EXHAUSTED no worker id free: 1 of"),
        "{refused}"
    );
    // After the window's end the worker id is free again; the holder cannot renew it.
    let second = acquire_when_free(&mut conn, "pool", "second", 100);
    assert_eq!(int(&second, "worker"), worker);
    assert!(window(&second).0 > window(&first).1);
    let lost = error_of(
        cmd("LEASE.RENEW")
            .arg("pool")
            .arg(worker)
            .arg("first")
            .query::<Lease>(&mut conn),
    );
    assert!(lost.starts_with("NOTHELD"), "{lost}");
    assert_eq!(info_field(&mut conn, "lease_expiries"), "1");
    assert_ne!(info_field(&mut conn, "lease_refusals"), "0");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let server = Server::start(&LEASES);
    let mut conn = server.conn();
    acquire_when_free(&mut conn, "pool", "h", 500);
    let _: () = cmd("SET").arg("text").arg("x").query(&mut conn).unwrap();
    let before = digest(&mut conn);
    let cases: Vec<(RedisResult<redis::Value>, &str)> = vec![
        (
            cmd("LEASE.ACQUIRE").arg("pool").arg("").query(&mut conn),
            "the holder must be 1 to 256 bytes",
        ),
        (
            cmd("LEASE.ACQUIRE")
                .arg("pool")
                .arg("h")
                .arg("DURATION")
                .arg(0)
                .query(&mut conn),
            "DURATION must be a positive",
        ),
        (
            cmd("LEASE.ACQUIRE")
                .arg("pool")
                .arg("h")
                .arg("DURATION")
                .arg(1001)
                .query(&mut conn),
            "above idgen.lease-max-ms (1000 ms)",
        ),
        (
            cmd("LEASE.ACQUIRE")
                .arg("pool")
                .arg("h")
                .arg("TTL")
                .arg(5)
                .query(&mut conn),
            "unknown option 'TTL'",
        ),
        (
            cmd("LEASE.ACQUIRE").arg("text").arg("h").query(&mut conn),
            "WRONGTYPE",
        ),
        (
            cmd("LEASE.RENEW")
                .arg("pool")
                .arg("x")
                .arg("h")
                .query(&mut conn),
            "the worker id must be an integer",
        ),
        (
            cmd("LEASE.RENEW")
                .arg("pool")
                .arg(1020)
                .arg("other")
                .query(&mut conn),
            "NOTHELD",
        ),
        (
            cmd("LEASE.RENEW")
                .arg("missing")
                .arg(1020)
                .arg("h")
                .query(&mut conn),
            "NOTHELD",
        ),
        (
            cmd("LEASE.RELEASE").arg("pool").arg(1020).query(&mut conn),
            "wrong number of arguments",
        ),
        (cmd("LEASE.LIST").arg("text").query(&mut conn), "WRONGTYPE"),
        (
            cmd("LEASE.SETWORKER")
                .arg("pool")
                .arg(1020)
                .arg(0)
                .arg(0)
                .arg(0)
                .arg(0)
                .arg("evil")
                .query(&mut conn),
            "replication and the AOF only",
        ),
        (
            cmd("SNOWFLAKE.NEXT")
                .arg("k")
                .arg("SHARD")
                .arg(1020)
                .query(&mut conn),
            "shard 1020 is a leased worker id",
        ),
        (
            cmd("SNOWFLAKE.COMPOSE")
                .arg(1_790_000_000_000u64)
                .arg(1023)
                .arg(0)
                .query(&mut conn),
            "shard 1023 is a leased worker id",
        ),
    ];
    for (result, expected) in cases {
        let text = error_of(result);
        assert!(text.contains(expected), "{text} should say {expected}");
    }
    assert_eq!(digest(&mut conn), before);
    // A missing pool lists nothing.
    assert!(list(&mut conn, "missing").is_empty());
}

#[test]
fn leases_are_off_by_default_and_say_how_to_turn_them_on() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    let text = error_of(acquire(&mut conn, "pool", "h", None));
    assert!(
        text.starts_with("LEASESOFF") && text.contains("lease-workers N"),
        "{text}"
    );
    // Every shard stays usable for SNOWFLAKE.NEXT.
    let _: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("k")
        .arg("SHARD")
        .arg(1023)
        .query(&mut conn)
        .unwrap();
}

#[test]
fn the_band_is_checked_at_load() {
    for (args, expected) in [
        (
            vec!["lease-workers", "4", "default-shard", "1021"],
            "default-shard 1021 lies inside",
        ),
        (
            vec!["lease-workers", "1024"],
            "lease-workers 1024 does not leave a shard value",
        ),
        (vec!["lease-workers", "-1"], "cannot be negative"),
        (vec!["lease-max-ms", "0"], "lease-max-ms is 0"),
    ] {
        let failure = Server::start_with(ServerOptions::module(&args))
            .err()
            .unwrap_or_else(|| panic!("{args:?} should be refused"));
        assert!(failure.log.contains(expected), "{args:?}: {}", failure.log);
    }
}

#[test]
fn decode_names_the_leased_worker() {
    let server = Server::start(&LEASES);
    let mut conn = server.conn();
    let lease = acquire_when_free(&mut conn, "pool", "h", 500);
    let worker = int(&lease, "worker") as u64;
    let (start, _) = window(&lease);
    // An ID the holder builds: time | worker | sequence.
    let id = (((start as u64) - 1_704_067_200_000) << 22) | (worker << 12) | 4095;
    let parts: HashMap<String, redis::Value> =
        cmd("SNOWFLAKE.DECODE").arg(id).query(&mut conn).unwrap();
    assert_eq!(int(&parts, "leased_worker"), worker as i64);
    assert_eq!(int(&parts, "unix_ms"), start);
    let own: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    let parts: HashMap<String, redis::Value> =
        cmd("SNOWFLAKE.DECODE").arg(own).query(&mut conn).unwrap();
    assert!(!parts.contains_key("leased_worker"));
}

#[test]
fn replicas_hold_the_masters_pools() {
    let master = Server::start(&LEASES);
    let replica = Server::start_replica(&master, &LEASES);
    let mut conn = master.conn();
    let a = acquire_when_free(&mut conn, "pool", "a", 1000);
    acquire_when_free(&mut conn, "pool", "b", 1000);
    acquire_when_free(&mut conn, "other", "c", 300);
    let _: Lease = cmd("LEASE.RENEW")
        .arg("pool")
        .arg(int(&a, "worker"))
        .arg("a")
        .query(&mut conn)
        .unwrap();
    let _: () = cmd("LEASE.RELEASE")
        .arg("pool")
        .arg(int(&a, "worker"))
        .arg("a")
        .query(&mut conn)
        .unwrap();
    master.wait_replicated(1);
    let mut replica_conn = replica.conn();
    assert_eq!(digest(&mut replica_conn), digest(&mut conn));
    assert_eq!(list(&mut replica_conn, "pool"), list(&mut conn, "pool"));
    let text = error_of(acquire(&mut replica_conn, "pool", "d", None));
    assert!(text.starts_with("READONLY"), "{text}");
}

#[test]
fn pools_survive_a_restart_from_the_aof_and_are_fenced() {
    for preamble in ["yes", "no"] {
        let options = ServerOptions::module(&LEASES).server_args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            preamble,
        ]);
        let mut server = Server::start_with(options).unwrap();
        let mut conn = server.conn();
        let a = acquire_when_free(&mut conn, "pool", "a", 1000);
        let b = acquire_when_free(&mut conn, "pool", "b", 1000);
        let _: () = cmd("LEASE.RELEASE")
            .arg("pool")
            .arg(int(&b, "worker"))
            .arg("b")
            .query(&mut conn)
            .unwrap();
        if preamble == "no" {
            // The rewrite writes one LEASE.SETWORKER per worker id.
            let _: String = cmd("BGREWRITEAOF").query(&mut conn).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while server
                .info_value("persistence", "aof_rewrite_in_progress")
                .as_deref()
                != Some("0")
                || server
                    .info_value("persistence", "aof_rewrite_scheduled")
                    .as_deref()
                    != Some("0")
            {
                assert!(Instant::now() < deadline, "the AOF rewrite did not end");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let before_list = list(&mut conn, "pool");
        let before_digest = digest(&mut conn);
        drop(conn);
        server.kill();
        server.start_again(&[]).unwrap();
        let mut conn = server.conn();
        assert_eq!(
            list(&mut conn, "pool").len(),
            before_list.len(),
            "preamble {preamble}"
        );
        assert_eq!(digest(&mut conn), before_digest, "preamble {preamble}");
        // A restart may have lost writes: the window is not renewed, and every new window
        // starts after every window granted before.
        let text = error_of(
            cmd("LEASE.RENEW")
                .arg("pool")
                .arg(int(&a, "worker"))
                .arg("a")
                .query::<Lease>(&mut conn),
        );
        assert!(text.starts_with("LEASELOST"), "{text}");
        for i in 0..4 {
            let lease = acquire_when_free(&mut conn, "pool", &format!("after{i}"), 1000);
            for earlier in [&a, &b] {
                if int(earlier, "worker") == int(&lease, "worker") {
                    assert!(!overlaps(window(earlier), window(&lease)));
                }
            }
        }
    }
}

#[test]
fn a_restored_pool_fences_its_worker_ids_on_the_target() {
    let source = Server::start(&LEASES);
    let target = Server::start(&LEASES);
    let mut conn = source.conn();
    let mut granted = Vec::new();
    for i in 0..4 {
        granted.push(acquire_when_free(&mut conn, "pool", &format!("h{i}"), 1000));
    }
    let dump: Vec<u8> = cmd("DUMP").arg("pool").query(&mut conn).unwrap();
    let mut target_conn = target.conn();
    let _: () = cmd("RESTORE")
        .arg("moved")
        .arg(0)
        .arg(dump)
        .query(&mut target_conn)
        .unwrap();
    assert_eq!(list(&mut target_conn, "moved"), list(&mut conn, "pool"));
    // Another pool on the target cannot hand out those worker ids inside their windows.
    let lease = acquire_when_free(&mut target_conn, "fresh", "x", 1000);
    let same = granted
        .iter()
        .find(|g| int(g, "worker") == int(&lease, "worker"))
        .unwrap();
    assert!(!overlaps(window(same), window(&lease)));
}

/// A replica promoted without the old master's last grant (made after the replica lost its
/// link) never grants an overlapping window for that worker id. Both nodes have one identity
/// (offset 0), so the fence alone keeps them apart (with distinct offsets, as deployments
/// have, they could not lease the same worker id at all).
#[test]
fn a_promoted_replica_that_lost_the_last_grant_does_not_overlap_it() {
    let args = with_leases(&["lease-workers", "1"]);
    let master = Server::start(&args);
    let replica = Server::start_replica(&master, &args);
    let mut conn = master.conn();
    let early = acquire_when_free(&mut conn, "pool", "early", 100);
    let _: () = cmd("LEASE.RELEASE")
        .arg("pool")
        .arg(1023)
        .arg("early")
        .query(&mut conn)
        .unwrap();
    master.wait_replicated(1);
    let mut replica_conn = replica.conn();
    // The replica loses its master (it keeps its data, and stays a replica)...
    let _: () = cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query(&mut replica_conn)
        .unwrap();
    // ... the old master grants once more, which the replica never hears of ...
    let lost = acquire_when_free(&mut conn, "pool", "lost", 1000);
    assert!(window(&lost).0 > window(&early).1);
    // ... and then the replica is promoted.
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut replica_conn)
        .unwrap();
    let promoted = acquire_when_free(&mut replica_conn, "pool", "new", 1000);
    assert_eq!(int(&promoted, "worker"), 1023);
    assert!(
        !overlaps(window(&lost), window(&promoted)),
        "lost {:?} promoted {:?}",
        window(&lost),
        window(&promoted)
    );
}

#[test]
fn the_cli_lists_a_pool_and_decodes_a_leased_id() {
    let server = Server::start(&LEASES);
    let mut conn = server.conn();
    let lease = acquire_when_free(&mut conn, "pool", "app:1", 1000);
    let worker = int(&lease, "worker");
    let url = server.url();
    let run = idgen_tests::run_idgen(&["-u", &url, "leases", "pool", "--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let listed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(listed["leases"][0]["worker"], worker);
    assert_eq!(listed["leases"][0]["holder"], "app:1");
    assert_eq!(listed["leases"][0]["state"], "held");
    let text = idgen_tests::run_idgen(&["-u", &url, "leases", "pool"]);
    assert!(
        text.stdout.contains("app:1") && text.stdout.contains("held"),
        "{text:?}"
    );
    // An ID the holder made, and one of SNOWFLAKE.NEXT.
    let id = (((window(&lease).0 as u64) - 1_704_067_200_000) << 22) | ((worker as u64) << 12);
    let decoded = idgen_tests::run_idgen(&["-u", &url, "decode", &id.to_string(), "--json"]);
    let parts: serde_json::Value = serde_json::from_str(&decoded.stdout).unwrap();
    assert_eq!(parts["leased_worker"], worker);
    let own: i64 = cmd("SNOWFLAKE.NEXT").arg("k").query(&mut conn).unwrap();
    let decoded = idgen_tests::run_idgen(&["-u", &url, "decode", &own.to_string(), "--json"]);
    let parts: serde_json::Value = serde_json::from_str(&decoded.stdout).unwrap();
    assert!(parts["leased_worker"].is_null(), "{parts}");
    let empty = idgen_tests::run_idgen(&["-u", &url, "leases", "nothing"]);
    assert!(empty.stdout.contains("no worker id leased"), "{empty:?}");
}

#[test]
fn idgen_check_fails_nodes_that_disagree_on_the_band() {
    let leasing = Server::start(&["step", "2", "offset", "0", "lease-workers", "4"]);
    let plain = Server::start(&["step", "2", "offset", "1"]);
    let run = idgen_tests::run_idgen(&["check", &leasing.url(), &plain.url(), "--json"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["check"] == "leases")
        .unwrap_or_else(|| panic!("no leases finding: {report:#}"));
    assert_eq!(finding["level"], "fail", "{finding}");
    let message = finding["message"].as_str().unwrap();
    assert!(message.contains("disagree on lease-workers"), "{message}");
    let same = Server::start(&["step", "2", "offset", "1", "lease-workers", "4"]);
    let run = idgen_tests::run_idgen(&["check", &leasing.url(), &same.url(), "--json"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["check"] == "leases")
        .unwrap();
    assert_eq!(finding["level"], "pass", "{finding}");
}
