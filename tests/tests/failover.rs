//! Failover: a replica promoted after missing the master's last writes, the old master
//! coming back and being promoted again (failback), and a master killed with SIGKILL under
//! concurrent load. Both generators must never repeat a value; a plain INCR counter run
//! alongside is the control that shows what these events do to an ordinary counter.
//!
//! Each scenario prints a line of its table: run with `--nocapture` to see it.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use idgen_tests::{count_duplicates, snowflake_batch, Server};
use redis::{cmd, Connection};

const KEYS: usize = 4;

/// Everything handed out in a phase.
#[derive(Default, Clone)]
struct Issued {
    /// Unique across all keys.
    snowflakes: Vec<i64>,
    /// Unique per key: (key, value).
    segments: Vec<(usize, i64)>,
    /// Unique per key, if INCR could keep that promise: (key, value).
    counters: Vec<(usize, i64)>,
}

impl Issued {
    fn extend(&mut self, other: Issued) {
        self.snowflakes.extend(other.snowflakes);
        self.segments.extend(other.segments);
        self.counters.extend(other.counters);
    }

    /// Issues `rounds` rounds of SNOWFLAKE.NEXT (5 IDs), SEGMENT.NEXT (5 values) and INCR
    /// over four keys each, stopping quietly at the first error (a killed server).
    fn issue(conn: &mut Connection, rounds: usize, tag: usize) -> Issued {
        let mut issued = Issued::default();
        for round in 0..rounds {
            let key = (round + tag) % KEYS;
            let ids: redis::RedisResult<Vec<i64>> =
                snowflake_batch(conn, &format!("order{key}"), 5);
            let Ok(ids) = ids else { break };
            issued.snowflakes.extend(ids);
            let range: redis::RedisResult<[i64; 3]> = cmd("SEGMENT.NEXT")
                .arg(format!("invoice{key}"))
                .arg("COUNT")
                .arg(5)
                .query(conn);
            let Ok([first, last, step]) = range else {
                break;
            };
            issued
                .segments
                .extend((first..=last).step_by(step as usize).map(|v| (key, v)));
            let counter: redis::RedisResult<i64> =
                cmd("INCR").arg(format!("plain{key}")).query(conn);
            let Ok(counter) = counter else { break };
            issued.counters.push((key, counter));
        }
        issued
    }
}

fn report(scenario: &str, all: &Issued) -> (usize, usize, usize) {
    let row = (
        count_duplicates(all.snowflakes.iter().copied()),
        count_duplicates(all.segments.iter().copied()),
        count_duplicates(all.counters.iter().copied()),
    );
    println!(
        "| {scenario} | {} snowflake IDs, {} dup | {} segment values, {} dup | {} INCR values, {} dup |",
        all.snowflakes.len(),
        row.0,
        all.segments.len(),
        row.1,
        all.counters.len(),
        row.2
    );
    row
}

/// Cuts a replica off from its master without promoting it: it keeps its data and stays a
/// replica, of an address where nothing listens.
fn detach(replica: &Server) {
    let _: () = cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query(&mut replica.conn())
        .unwrap();
}

fn promote(server: &Server) {
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut server.conn())
        .unwrap();
}

fn follow(replica: &Server, master: &Server) {
    let _: () = cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port())
        .query(&mut replica.conn())
        .unwrap();
    replica.wait_in_sync();
    master.wait_replicated(1);
}

/// What each instance handed out in a failback scenario.
struct Failback {
    /// A, as master, up to the moment B is promoted (its last writes B never received).
    a_before: Issued,
    /// B, promoted while cut off from A.
    b_promoted: Issued,
    /// A, promoted again after following B (a full sync that replaced its data).
    a_after: Issued,
    /// A's `INFO idgen` counters after the scenario: (marks taken, marks applied).
    a_marks: (String, String),
}

impl Failback {
    /// Everything, for the duplicate counts.
    fn all(&self) -> Issued {
        let mut all = self.a_before.clone();
        all.extend(self.b_promoted.clone());
        all.extend(self.a_after.clone());
        all
    }

    /// Per key: the largest segment value A handed out before, and the first after.
    fn a_segments_around_failback(&self) -> Vec<(i64, i64)> {
        (0..KEYS)
            .map(|key| {
                let of_key = |issued: &Issued| {
                    issued
                        .segments
                        .iter()
                        .filter(|(k, _)| *k == key)
                        .map(|&(_, v)| v)
                        .collect::<Vec<_>>()
                };
                let before = of_key(&self.a_before).into_iter().max().unwrap();
                let after = of_key(&self.a_after).into_iter().min().unwrap();
                (before, after)
            })
            .collect()
    }
}

/// Master A (offset 0) and replica B (offset 1), AOF on with `fsync`, otherwise the idgen
/// settings given (none: the defaults). A's last writes never reach B; B is promoted and
/// issues; then A — killed and restarted from its AOF first, if `restart_a` — follows B (its
/// tail is discarded by the full sync) and is promoted again, and issues.
fn failback(idgen_settings: &[&str], fsync: &str, restart_a: bool) -> Failback {
    let with_offset = |offset: &'static str| {
        let mut args = vec!["step", "4", "offset", offset];
        args.extend_from_slice(idgen_settings);
        idgen_tests::ServerOptions::module(&args).server_args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            fsync,
        ])
    };
    let start = |options| Server::start_with(options).unwrap_or_else(|f| panic!("{}", f.log));
    let mut a = start(with_offset("0"));
    let b =
        start(with_offset("1").server_args(&["--replicaof", "127.0.0.1", &a.port().to_string()]));
    b.wait_in_sync();

    let mut a_before = Issued::issue(&mut a.conn(), 500, 0);
    a.wait_replicated(1);
    detach(&b);
    // A's tail: B never receives it. More than B will issue, so B's counters end lower.
    a_before.extend(Issued::issue(&mut a.conn(), 2000, 1));
    promote(&b);
    let b_promoted = Issued::issue(&mut b.conn(), 300, 2);

    if restart_a {
        // SIGKILL: the AOF holds every acknowledged write (they reached the kernel).
        a.kill();
        a.start_again(&[])
            .unwrap_or_else(|failure| panic!("restart failed:\n{}", failure.log));
    }
    follow(&a, &b);
    promote(&a);
    let a_after = Issued::issue(&mut a.conn(), 2000, 3);
    let mut conn = a.conn();
    let a_marks = (
        idgen_tests::info_field(&mut conn, "segment_marks_taken"),
        idgen_tests::info_field(&mut conn, "segment_marks_applied"),
    );
    Failback {
        a_before,
        b_promoted,
        a_after,
        a_marks,
    }
}

#[test]
fn promotion_after_a_lost_tail_and_failback_never_repeat_with_default_settings() {
    let scenario = failback(&[], "everysec", false);
    let mut promotion = scenario.a_before.clone();
    promotion.extend(scenario.b_promoted.clone());
    let (sf, seg, incr) = report("promotion after lost tail (defaults)", &promotion);
    assert_eq!((sf, seg), (0, 0));
    assert!(
        incr > 0,
        "the INCR control should repeat values after this promotion"
    );
    let (sf, seg, incr) = report("failback (defaults)", &scenario.all());
    assert_eq!((sf, seg), (0, 0));
    assert!(incr > 0);
}

#[test]
fn failback_in_dense_mode_repeats_nothing_and_skips_nothing() {
    // segment-fence 0: no value is skipped at a start. What A handed out before the full
    // sync erased it is remembered, so A continues right above its own last value: the
    // next value of its class, no gap, no repeat.
    let scenario = failback(&["segment-fence", "0"], "everysec", false);
    let (sf, seg, incr) = report("failback (segment-fence 0)", &scenario.all());
    assert_eq!((sf, seg), (0, 0));
    assert!(incr > 0, "the INCR control repeats the lost tail");
    for (before, after) in scenario.a_segments_around_failback() {
        assert_eq!(after, before + 4, "A's next value of its class, step 4");
    }
    let keys = KEYS.to_string();
    assert_eq!(scenario.a_marks, (keys.clone(), keys));
}

#[test]
fn failback_after_a_restart_of_the_old_master_never_repeats() {
    // A is killed after its tail and restarted from its AOF before it follows B: the values
    // it remembers come from the data it loaded, so again nothing repeats and, in the
    // dense mode, nothing is skipped. The dense mode runs under its documented condition,
    // appendfsync always: with everysec, Redis postpones the AOF write while a background
    // fsync is slow and answers anyway, so a SIGKILL can lose acknowledged writes (seen here
    // under the full suite's load: 2,870 values repeated) — the default fence covers that.
    for (settings, fsync, label) in [
        (
            &[][..],
            "everysec",
            "failback after restart (defaults, everysec)",
        ),
        (
            &["segment-fence", "0"][..],
            "always",
            "failback after restart (segment-fence 0, always)",
        ),
    ] {
        let scenario = failback(settings, fsync, true);
        let (sf, seg, _) = report(label, &scenario.all());
        assert_eq!((sf, seg), (0, 0), "{label}");
        if settings.is_empty() {
            continue;
        }
        for (before, after) in scenario.a_segments_around_failback() {
            assert_eq!(after, before + 4, "{label}");
        }
    }
}

/// Four clients issue against `master` until it is killed with SIGKILL; then it is
/// restarted and issues more. Returns everything acknowledged, and whether acknowledged
/// segment values were missing from disk.
///
/// Without a `snapshot`, the kill comes after 700 ms of load. With one (`SAVE`), it runs
/// after 300 ms, and the kill waits until a client has been acknowledged a segment value
/// above what its key held right after the snapshot: the tail the kill loses then exists
/// whatever the machine's load. (A fixed 400 ms did not ensure that: in one CI run no
/// acknowledged value went above what the snapshot held, so the kill lost nothing.)
fn crash_under_load(mut master: Server, snapshot: Option<&str>) -> (Issued, bool) {
    let stop = Arc::new(AtomicBool::new(false));
    let highest: Arc<[AtomicI64; KEYS]> = Arc::new(std::array::from_fn(|_| AtomicI64::new(0)));
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (url, stop, highest) = (master.url(), stop.clone(), highest.clone());
            thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut issued = Issued::default();
                while !stop.load(Ordering::Relaxed) {
                    let more = Issued::issue(&mut conn, 50, worker);
                    let finished = more.counters.len() < 50;
                    for &(key, value) in &more.segments {
                        highest[key].fetch_max(value, Ordering::Relaxed);
                    }
                    issued.extend(more);
                    if finished {
                        break; // the server is gone
                    }
                }
                issued
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    match snapshot {
        None => thread::sleep(Duration::from_millis(400)),
        Some(command) => {
            let mut conn = master.conn();
            let _: () = cmd(command).query(&mut conn).unwrap();
            // Read after the snapshot, so at least what it holds.
            let after_snapshot: Vec<i64> = (0..KEYS)
                .map(|key| segment_counter(&mut conn, key))
                .collect();
            let beyond =
                || (0..KEYS).any(|key| highest[key].load(Ordering::Relaxed) > after_snapshot[key]);
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !beyond() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "in 60 s no client was handed a segment value above the snapshot's {after_snapshot:?}"
                );
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
    master.kill();
    stop.store(true, Ordering::Relaxed);
    let mut all = Issued::default();
    for worker in workers {
        all.extend(worker.join().unwrap());
    }
    master
        .start_again(&[])
        .unwrap_or_else(|failure| panic!("restart failed:\n{}", failure.log));
    let mut conn = master.conn();
    let lost_tail = (0..KEYS).any(|key| {
        let on_disk = segment_counter(&mut conn, key);
        all.segments.iter().any(|&(k, v)| k == key && v > on_disk)
    });
    all.extend(Issued::issue(&mut conn, 2000, 0));
    (all, lost_tail)
}

/// What the segment counter of `key` holds (0 if it does not exist yet).
fn segment_counter(conn: &mut Connection, key: usize) -> i64 {
    cmd("GET")
        .arg(format!("invoice{key}"))
        .query::<Option<i64>>(conn)
        .unwrap()
        .unwrap_or(0)
}

fn crash_options(persistence: &[&str], idgen_settings: &[&str]) -> Server {
    // Default idgen settings apart from the identity and those given.
    let mut args = vec!["step", "2", "offset", "0"];
    args.extend_from_slice(idgen_settings);
    let options = idgen_tests::ServerOptions::module(&args).server_args(persistence);
    Server::start_with(options).unwrap_or_else(|failure| panic!("{}", failure.log))
}

#[test]
fn a_master_killed_under_load_with_aof_everysec_never_repeats() {
    let master = crash_options(&["--appendonly", "yes", "--appendfsync", "everysec"], &[]);
    let (all, lost_tail) = crash_under_load(master, None);
    // SIGKILL loses nothing Redis already wrote to the kernel; everysec loses data only
    // when the machine itself goes down. Either way nothing may repeat.
    println!(
        "SIGKILL with appendfsync everysec: acknowledged values missing from disk: {lost_tail}"
    );
    let (sf, seg, _) = report("SIGKILL under load, appendfsync everysec, restart", &all);
    assert_eq!((sf, seg), (0, 0));
}

#[test]
fn a_master_killed_under_load_with_rdb_snapshots_loses_a_tail_but_never_repeats() {
    // The snapshot is taken mid-load; everything acknowledged after it is lost by the kill.
    // Default settings: the segment fence covers the lost tail.
    let master = crash_options(&["--appendonly", "no"], &[]);
    let (all, lost_tail) = crash_under_load(master, Some("SAVE"));
    assert!(
        lost_tail,
        "the kill should lose values acknowledged after the snapshot"
    );
    let (sf, seg, incr) = report("SIGKILL under load, RDB snapshot, restart", &all);
    assert_eq!((sf, seg), (0, 0), "the fences must cover the lost tail");
    assert!(
        incr > 0,
        "the INCR control repeats values after losing its tail"
    );
}

#[test]
fn a_lost_tail_with_segment_fence_0_repeats_segment_values() {
    // The control for the default fence: the same crash in the dense mode (fence 0), which
    // is safe only when no acknowledged write can be lost (appendfsync always). With RDB
    // snapshots the lost tail is handed out again.
    let master = crash_options(&["--appendonly", "no"], &["segment-fence", "0"]);
    let (all, lost_tail) = crash_under_load(master, Some("SAVE"));
    assert!(lost_tail);
    let (sf, seg, _) = report("SIGKILL under load, RDB snapshot, segment-fence 0", &all);
    assert_eq!(sf, 0, "the snowflake restart fence is still on");
    assert!(
        seg > 0,
        "without a segment fence the lost tail must come back"
    );
}
