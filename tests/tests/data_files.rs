//! Data files written by releases of the module — an RDB and an AOF (with its RDB preamble
//! and commands after it) holding snowflake keys, segment counters, the module's aux data
//! and (0.3.0 on) lease pools — load in this release, which continues above every value they
//! record; a file in an encoding newer than this release knows is refused with a message
//! naming its writer.
//!
//! The files live in `tests/fixtures/<release>/`, each with `expected.txt`, what the writing
//! release had issued. Every later release's suite loads every one of them. A release adds
//! its own with the ignored test at the end:
//! `IDGEN_FIXTURE_MODULE=path/to/libidgen.so cargo test --release --test data_files -- --ignored`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use idgen_tests::{now_ms, Server, ServerOptions};
use redis::cmd;

/// The identity the fixtures were written with, and every test loads them with.
const STEP: &str = "4";
const OFFSET: &str = "1";
/// The lease settings of the fixtures with lease pools (0.3.0 on): a band of 8 worker ids,
/// two of them (1017 and 1021) this offset's; short windows, so the writer waits little.
const LEASE_ARGS: [&str; 4] = ["lease-workers", "8", "lease-max-ms", "1000"];
/// `max-drift-ms` as the servers here run: a start fences new lease windows for
/// `max-drift-ms + lease-max-ms`.
const LEASE_FENCE_MS: u64 = 2000 + 1000;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/fixtures")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("expected.txt").exists())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no fixtures in {}", root.display());
    dirs
}

/// `name=value` lines.
fn expected(dir: &Path) -> HashMap<String, i64> {
    std::fs::read_to_string(dir.join("expected.txt"))
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once('='))
        .filter_map(|(name, value)| Some((name.to_string(), value.parse().ok()?)))
        .collect()
}

/// Starts a server on a copy of `files`, with the writer's identity, the clock set back
/// before the newest ID they record (so that only the restored position keeps IDs from
/// repeating), and dense segments (so that only the restored values and remembered marks
/// decide where counters continue).
fn load(dir: &Path, files: &str, aof: bool) -> Server {
    let values = expected(dir);
    let behind_ms = now_ms() as i64 - values["max_unix_ms"] + 60_000;
    let mut options =
        ServerOptions::module(&["step", STEP, "offset", OFFSET]).load_files_from(&dir.join(files));
    options.module_args.extend(LEASE_ARGS.map(String::from));
    options.module_args.extend(
        [
            "segment-fence",
            "0",
            "snowflake-restart-fence",
            "no",
            "debug-clock-offset-ms",
            &(-behind_ms).to_string(),
        ]
        .map(String::from),
    );
    options = options.server_args(&["--appendonly", if aof { "yes" } else { "no" }]);
    Server::start_with(options)
        .unwrap_or_else(|failure| panic!("{} did not load:\n{}", dir.display(), failure.log))
}

fn check_continues_above(dir: &Path, server: &Server) {
    let values = expected(dir);
    let mut conn = server.conn();
    for key in ["orders", "users", "events"] {
        let last = values[&format!("snowflake.{key}")];
        let bound: i64 = cmd("SNOWFLAKE.BOUND").arg(key).query(&mut conn).unwrap();
        assert!(
            bound >= last,
            "{}: {key}'s bound {bound} < its last ID {last}",
            dir.display()
        );
        let next: i64 = cmd("SNOWFLAKE.NEXT").arg(key).query(&mut conn).unwrap();
        assert!(
            next > last,
            "{}: {key} went back to {next} from {last}",
            dir.display()
        );
    }
    // A key the files do not hold: only the restored position keeps it above every ID the
    // writer issued (the clock is set back before them).
    let fresh: i64 = cmd("SNOWFLAKE.NEXT").arg("fresh").query(&mut conn).unwrap();
    assert!(
        fresh > values["max_id"],
        "{}: {fresh} reuses the writer's time",
        dir.display()
    );
    let invoice: i64 = cmd("SEGMENT.NEXT").arg("invoice").query(&mut conn).unwrap();
    assert_eq!(invoice, values["segment.invoice"] + 4, "{}", dir.display());
    let seeded: i64 = cmd("GET").arg("seeded").query(&mut conn).unwrap();
    assert_eq!(seeded, values["segment.seeded"], "{}", dir.display());
    // `tickets` was handed out by the writer before a full sync erased it; the value it
    // remembered comes back from the aux data.
    let tickets: i64 = cmd("SEGMENT.NEXT").arg("tickets").query(&mut conn).unwrap();
    assert_eq!(tickets, values["mark.tickets"] + 4, "{}", dir.display());
    check_lease_pools(dir, &values, &mut conn);
}

type Lease = HashMap<String, redis::Value>;

fn int(lease: &Lease, field: &str) -> i64 {
    match lease.get(field) {
        Some(redis::Value::Int(value)) => *value,
        other => panic!("{field} is {other:?} in {lease:?}"),
    }
}

/// Lease pools (`lease.POOL.WORKER=end_unix_ms`, and `held.POOL.WORKER=1` for a worker still
/// held when the files were written): `LEASE.LIST` gives back each worker's window end, and
/// no new window overlaps one they record. The clock is set back before those windows, so
/// only the loaded pools keep their worker ids from being granted again; the loop runs past
/// the fence a start sets, when a lost pool would grant at once.
fn check_lease_pools(dir: &Path, values: &HashMap<String, i64>, conn: &mut redis::Connection) {
    let mut ends: HashMap<(String, i64), i64> = HashMap::new();
    for (name, end) in values {
        let Some(rest) = name.strip_prefix("lease.") else {
            continue;
        };
        let (pool, worker) = rest.rsplit_once('.').expect("lease.POOL.WORKER");
        ends.insert((pool.to_string(), worker.parse().unwrap()), *end);
    }
    if ends.is_empty() {
        return; // written before lease pools existed
    }
    let mut pools: Vec<&String> = ends.keys().map(|(pool, _)| pool).collect();
    pools.sort();
    pools.dedup();
    for pool in &pools {
        let listed: Vec<Lease> = cmd("LEASE.LIST").arg(pool.as_str()).query(conn).unwrap();
        let recorded = ends.keys().filter(|(p, _)| p == *pool).count();
        assert_eq!(
            listed.len(),
            recorded,
            "{}: {pool}: {listed:?}",
            dir.display()
        );
        for lease in &listed {
            let worker = int(lease, "worker");
            let end = ends[&(pool.to_string(), worker)];
            assert_eq!(
                int(lease, "end_unix_ms"),
                end,
                "{}: {pool} worker {worker}: {lease:?}",
                dir.display()
            );
            let held = values.contains_key(&format!("held.{pool}.{worker}"));
            let holder = lease.get("holder");
            assert_eq!(
                held,
                matches!(holder, Some(redis::Value::BulkString(_))),
                "{}: {pool} worker {worker}'s holder: {lease:?}",
                dir.display()
            );
        }
    }
    let latest_end = |worker: i64| {
        ends.iter()
            .filter(|((_, w), _)| *w == worker)
            .map(|(_, end)| *end)
            .max()
    };
    let started = std::time::Instant::now();
    let mut attempts = 0;
    while started.elapsed() < std::time::Duration::from_millis(LEASE_FENCE_MS + 1000) {
        for pool in &pools {
            attempts += 1;
            let grant: redis::RedisResult<Lease> = cmd("LEASE.ACQUIRE")
                .arg(pool.as_str())
                .arg("after-load")
                .query(conn);
            match grant {
                Ok(lease) => {
                    let worker = int(&lease, "worker");
                    if let Some(end) = latest_end(worker) {
                        assert!(
                            int(&lease, "start_unix_ms") > end,
                            "{}: worker {worker} granted again in {pool} inside a window the \
                             files record (ending {end}): {lease:?}",
                            dir.display()
                        );
                    }
                    let _: redis::Value = cmd("LEASE.RELEASE")
                        .arg(pool.as_str())
                        .arg(worker)
                        .arg("after-load")
                        .query(conn)
                        .unwrap();
                }
                Err(error) => assert_eq!(
                    error.code(),
                    Some("EXHAUSTED"),
                    "{}: {pool}: {error}",
                    dir.display()
                ),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(attempts > 10);
}

#[test]
fn rdb_files_of_every_release_load_and_continue_above_their_values() {
    for dir in fixtures() {
        let server = load(&dir, "rdb", false);
        check_continues_above(&dir, &server);
    }
}

#[test]
fn aof_files_of_every_release_load_and_continue_above_their_values() {
    for dir in fixtures() {
        let server = load(&dir, "aof", true);
        check_continues_above(&dir, &server);
    }
}

/// The `snowflake` type's module id in an RDB file: the 9-character name in Redis's
/// 64-symbol charset, then the 10-bit encoding version.
fn module_id(encver: u64) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let name = b"snowflake".iter().fold(0u64, |id, c| {
        id << 6 | CHARSET.iter().position(|x| x == c).unwrap() as u64
    });
    name << 10 | encver
}

/// Turns an RDB written by this release into one "written by idgen 9.9.9 in encoding 3":
/// the aux record's module id gets encoding 3, and the record begins with the writer's
/// version (what every encoding after 2 does). The checksum is zeroed: Redis then skips it.
fn as_if_written_by_a_newer_release(rdb: &[u8]) -> Vec<u8> {
    const MODULE_AUX: u8 = 247;
    const LEN_64BIT: u8 = 0x81;
    let mut current = vec![MODULE_AUX, LEN_64BIT];
    current.extend(module_id(2).to_be_bytes());
    let at = rdb
        .windows(current.len())
        .position(|window| window == current)
        .expect("the module's aux record in the RDB");
    let mut patched = rdb[..at].to_vec();
    patched.extend([MODULE_AUX, LEN_64BIT]);
    patched.extend(module_id(3).to_be_bytes());
    // `when` (before or after the keyspace), as an unsigned-integer opcode and its value.
    let when_at = at + current.len();
    patched.extend(&rdb[when_at..when_at + 2]);
    const MODULE_OPCODE_STRING: u8 = 5;
    patched.extend([MODULE_OPCODE_STRING, 5]);
    patched.extend(b"9.9.9");
    patched.extend(&rdb[when_at + 2..]);
    let len = patched.len();
    patched[len - 8..].fill(0);
    patched
}

#[test]
fn a_file_in_a_newer_encoding_is_refused_naming_its_writer() {
    let writer = Server::start(&["step", STEP, "offset", OFFSET]);
    let mut conn = writer.conn();
    let _: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("orders")
        .query(&mut conn)
        .unwrap();
    let _: () = cmd("SAVE").query(&mut conn).unwrap();
    let rdb = std::fs::read(writer.dir().join("dump.rdb")).unwrap();
    let files = tempdir("newer-encoding");
    std::fs::write(
        files.join("dump.rdb"),
        as_if_written_by_a_newer_release(&rdb),
    )
    .unwrap();
    let options = ServerOptions::module(&["step", STEP, "offset", OFFSET]).load_files_from(&files);
    let failure = match Server::start_with(options) {
        Ok(_) => panic!("a file in encoding 3 loaded"),
        Err(failure) => failure,
    };
    assert!(
        failure
            .log
            .contains("this data was written by idgen 9.9.9 (snowflake encoding 3)")
            && failure.log.contains("reads encodings up to 2"),
        "{}",
        failure.log
    );
    // The unpatched file loads: the refusal is the encoding's, not the patching's.
    std::fs::write(files.join("dump.rdb"), &rdb).unwrap();
    let options = ServerOptions::module(&["step", STEP, "offset", OFFSET]).load_files_from(&files);
    let server = Server::start_with(options).unwrap_or_else(|failure| panic!("{}", failure.log));
    let bound: Option<i64> = cmd("SNOWFLAKE.BOUND")
        .arg("orders")
        .query(&mut server.conn())
        .unwrap();
    assert!(bound.is_some());
    std::fs::remove_dir_all(files).unwrap();
}

fn wait_for_no_rewrite(server: &Server) {
    while server
        .info_value("persistence", "aof_rewrite_in_progress")
        .as_deref()
        != Some("0")
        || server
            .info_value("persistence", "aof_rewrite_scheduled")
            .as_deref()
            != Some("0")
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `LEASE.ACQUIRE pool holder` once a window is free (a start fences new windows for
/// `max-drift-ms + lease-max-ms`; a worker id is free again after its last window).
fn acquire_when_free(conn: &mut redis::Connection, pool: &str, holder: &str) -> Lease {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match cmd("LEASE.ACQUIRE").arg(pool).arg(holder).query(conn) {
            Ok(lease) => return lease,
            Err(error)
                if error.code() == Some("EXHAUSTED") && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(error) => panic!("LEASE.ACQUIRE {pool} {holder}: {error}"),
        }
    }
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idgen-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes this module's fixtures into `tests/fixtures/<version>/`: run by hand for each
/// release whose storage differs (`IDGEN_FIXTURE_MODULE` picks the module library).
#[test]
#[ignore = "writes fixtures; run by hand for a release"]
fn write_the_fixtures_of_this_release() {
    let library = std::env::var_os("IDGEN_FIXTURE_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(idgen_tests::module_path);
    let options = |offset: &str| {
        let mut args = vec!["step", STEP, "offset", offset];
        args.extend(LEASE_ARGS);
        ServerOptions::module(&args)
            .module_library(library.clone())
            .server_args(&["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"])
    };
    let start = |options| Server::start_with(options).unwrap_or_else(|f| panic!("{}", f.log));
    // The writer hands out `tickets` values, then becomes a replica of another master
    // whose full sync erases them: it remembers its own (aux data).
    let writer = start(options(OFFSET));
    let other = start(options("2"));
    let mut w = writer.conn();
    let mut values: Vec<(String, i64)> = Vec::new();
    let _: () = cmd("SEGMENT.NEXT")
        .arg("tickets")
        .arg("COUNT")
        .arg(10)
        .query::<Vec<i64>>(&mut w)
        .map(|_| ())
        .unwrap();
    let _: i64 = cmd("SEGMENT.NEXT").arg("tickets").query(&mut w).unwrap();
    // What the key holds — the last value, or (0.2.0 on) the top of its reservation, at or
    // above it — is what the writer remembers and what a reader continues above.
    let tickets: i64 = cmd("GET").arg("tickets").query(&mut w).unwrap();
    values.push(("mark.tickets".into(), tickets));
    let _: () = cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(other.port())
        .query(&mut w)
        .unwrap();
    writer.wait_in_sync();
    let _: () = cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut w).unwrap();
    // Now the writer's own data: snowflake keys and counters, some in the RDB preamble
    // of its AOF, some after it.
    let mut max_id = 0;
    for key in ["orders", "users"] {
        let ids: Vec<i64> = cmd("SNOWFLAKE.NEXT")
            .arg(key)
            .arg("COUNT")
            .arg(1000)
            .query(&mut w)
            .unwrap();
        max_id = max_id.max(*ids.last().unwrap());
    }
    let _: () = cmd("SET")
        .arg("seeded")
        .arg(5_000_000)
        .query(&mut w)
        .unwrap();
    let _: i64 = cmd("SEGMENT.NEXT").arg("invoice").query(&mut w).unwrap();
    // Lease pools (0.3.0 on): in `workers`, one worker id held and one released, in the
    // RDB preamble; `jobs`, after it, takes the released one once its window is over.
    let held = acquire_when_free(&mut w, "workers", "app-1");
    let released = acquire_when_free(&mut w, "workers", "app-2");
    let _: redis::Value = cmd("LEASE.RELEASE")
        .arg("workers")
        .arg(int(&released, "worker"))
        .arg("app-2")
        .query(&mut w)
        .unwrap();
    values.push((format!("held.workers.{}", int(&held, "worker")), 1));
    wait_for_no_rewrite(&writer);
    let _: () = cmd("BGREWRITEAOF").query(&mut w).unwrap();
    wait_for_no_rewrite(&writer);
    let job = acquire_when_free(&mut w, "jobs", "batch-1");
    values.push((format!("held.jobs.{}", int(&job, "worker")), 1));
    // `events` is new: its first bound is written after the rewrite, into the AOF's commands.
    for key in ["orders", "users", "events"] {
        let ids: Vec<i64> = cmd("SNOWFLAKE.NEXT")
            .arg(key)
            .arg("COUNT")
            .arg(5000)
            .query(&mut w)
            .unwrap();
        max_id = max_id.max(*ids.last().unwrap());
        values.push((format!("snowflake.{key}"), *ids.last().unwrap()));
    }
    let _: i64 = cmd("SEGMENT.NEXT").arg("invoice").query(&mut w).unwrap();
    let invoice: i64 = cmd("GET").arg("invoice").query(&mut w).unwrap();
    values.push(("segment.invoice".into(), invoice));
    values.push(("segment.seeded".into(), 5_000_000));
    values.push(("max_id".into(), max_id));
    let decoded: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE").arg(max_id).query(&mut w).unwrap();
    let max_unix_ms: i64 = redis::from_redis_value_ref(&decoded[1]).unwrap();
    values.push(("max_unix_ms".into(), max_unix_ms));
    for pool in ["workers", "jobs"] {
        let listed: Vec<Lease> = cmd("LEASE.LIST").arg(pool).query(&mut w).unwrap();
        for lease in listed {
            let worker = int(&lease, "worker");
            values.push((format!("lease.{pool}.{worker}"), int(&lease, "end_unix_ms")));
        }
    }
    let _: () = cmd("SAVE").query(&mut w).unwrap();
    let identity: HashMap<String, String> = cmd("IDGEN.IDENTITY").query(&mut w).unwrap();
    let server: String = cmd("INFO").arg("server").query(&mut w).unwrap();
    let server_version = idgen_tests::info_line(&server, "redis_version").unwrap();
    drop(w);
    let mut writer = writer;
    writer.terminate();
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(&identity["version"]);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("rdb")).unwrap();
    std::fs::create_dir_all(out.join("aof")).unwrap();
    std::fs::copy(writer.dir().join("dump.rdb"), out.join("rdb/dump.rdb")).unwrap();
    let aof_dir = writer.dir().join("appendonlydir");
    std::fs::create_dir_all(out.join("aof/appendonlydir")).unwrap();
    for entry in std::fs::read_dir(&aof_dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            out.join("aof/appendonlydir").join(entry.file_name()),
        )
        .unwrap();
    }
    let mut text = format!(
        "# Written by idgen {} on redis-server {server_version}, step {STEP} offset {OFFSET}, \
         {}\n",
        identity["version"],
        LEASE_ARGS.join(" ")
    );
    for (name, value) in values {
        text.push_str(&format!("{name}={value}\n"));
    }
    std::fs::write(out.join("expected.txt"), text).unwrap();
    println!("wrote {}", out.display());
}
