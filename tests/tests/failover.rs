//! Failover: a replica promoted after missing the master's last writes, the old master
//! coming back and being promoted again (failback), and a master killed with SIGKILL under
//! concurrent load. Both generators must never repeat a value; a plain INCR counter run
//! alongside is the control that shows what these events do to an ordinary counter.
//!
//! Each scenario prints a line of its table: run with `--nocapture` to see it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use idgen_tests::{snowflake_batch, Server};
use redis::{cmd, Connection};

const KEYS: usize = 4;

/// Everything handed out in a phase.
#[derive(Default)]
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

/// Values that occur more than once.
fn duplicates<T: std::hash::Hash + Eq + Copy>(values: impl IntoIterator<Item = T>) -> usize {
    let mut seen = HashSet::new();
    values.into_iter().filter(|v| !seen.insert(*v)).count()
}

fn report(scenario: &str, all: &Issued) -> (usize, usize, usize) {
    let row = (
        duplicates(all.snowflakes.iter().copied()),
        duplicates(all.segments.iter().copied()),
        duplicates(all.counters.iter().copied()),
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

/// Master A (offset 0) and replica B (offset 1). A's last writes never reach B; B is
/// promoted and issues; then A follows B (its tail is discarded by the full sync) and is
/// promoted again, and issues. Returns everything issued.
fn promotion_then_failback(segment_fence: &str) -> (Issued, Issued) {
    let args = |offset: &str| {
        [
            "step",
            "4",
            "offset",
            offset,
            "segment-fence",
            segment_fence,
        ]
        .map(String::from)
    };
    let a_args = args("0");
    let b_args = args("1");
    let a_args: Vec<&str> = a_args.iter().map(String::as_str).collect();
    let b_args: Vec<&str> = b_args.iter().map(String::as_str).collect();
    let a = Server::start(&a_args);
    let b = Server::start_replica(&a, &b_args);

    let mut promotion = Issued::issue(&mut a.conn(), 500, 0);
    a.wait_replicated(1);
    detach(&b);
    // A's tail: B never receives it. More than B will issue, so B's counters end lower.
    promotion.extend(Issued::issue(&mut a.conn(), 2000, 1));
    promote(&b);
    promotion.extend(Issued::issue(&mut b.conn(), 300, 2));

    let mut failback = Issued::default();
    failback.snowflakes.clone_from(&promotion.snowflakes);
    failback.segments.clone_from(&promotion.segments);
    failback.counters.clone_from(&promotion.counters);
    follow(&a, &b);
    promote(&a);
    failback.extend(Issued::issue(&mut a.conn(), 2000, 3));
    (promotion, failback)
}

#[test]
fn promotion_after_a_lost_tail_and_failback_never_repeat() {
    let (promotion, failback) = promotion_then_failback("1000000");
    let (sf, seg, incr) = report("promotion after lost tail (fence 1000000)", &promotion);
    assert_eq!((sf, seg), (0, 0));
    assert!(
        incr > 0,
        "the INCR control should repeat values after this promotion"
    );
    let (sf, seg, incr) = report("failback (fence 1000000)", &failback);
    assert_eq!((sf, seg), (0, 0));
    assert!(incr > 0);
}

#[test]
fn failback_without_a_segment_fence_repeats_the_lost_tail() {
    // The same events with segment-fence 0: the old master's own lost tail is issued again
    // after failback. This is what the fence is for, and shows the scenario bites.
    let (promotion, failback) = promotion_then_failback("0");
    let (sf, seg, _) = report("promotion after lost tail (fence 0)", &promotion);
    assert_eq!((sf, seg), (0, 0), "offsets alone make promotion safe");
    let (sf, seg, _) = report("failback (fence 0)", &failback);
    assert_eq!(
        sf, 0,
        "snowflakes continue from the instance's own sequence"
    );
    assert!(
        seg > 0,
        "without a fence the lost segment tail must come back"
    );
}

/// Four clients issue against `master` until it is killed with SIGKILL (after `snapshot`
/// runs, if any, and 400 ms more); then it is restarted and issues more. Returns everything
/// acknowledged, and whether acknowledged segment values were missing from disk.
fn crash_under_load(mut master: Server, snapshot: Option<&str>) -> (Issued, bool) {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (url, stop) = (master.url(), stop.clone());
            thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut issued = Issued::default();
                while !stop.load(Ordering::Relaxed) {
                    let more = Issued::issue(&mut conn, 50, worker);
                    let finished = more.counters.len() < 50;
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
    if let Some(command) = snapshot {
        let _: () = cmd(command).query(&mut master.conn()).unwrap();
    }
    thread::sleep(Duration::from_millis(400));
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
        let on_disk: i64 = cmd("GET")
            .arg(format!("invoice{key}"))
            .query::<Option<i64>>(&mut conn)
            .unwrap()
            .unwrap_or(0);
        all.segments.iter().any(|&(k, v)| k == key && v > on_disk)
    });
    all.extend(Issued::issue(&mut conn, 2000, 0));
    (all, lost_tail)
}

fn crash_options(persistence: &[&str]) -> Server {
    let options = idgen_tests::ServerOptions::module(&[
        "step",
        "2",
        "offset",
        "0",
        "segment-fence",
        "1000000",
    ])
    .server_args(persistence);
    Server::start_with(options).unwrap_or_else(|failure| panic!("{}", failure.log))
}

#[test]
fn a_master_killed_under_load_with_aof_everysec_never_repeats() {
    let master = crash_options(&["--appendonly", "yes", "--appendfsync", "everysec"]);
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
    let master = crash_options(&["--appendonly", "no"]);
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
