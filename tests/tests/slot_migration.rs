//! Redis 8.4+'s atomic slot migration (`CLUSTER MIGRATION IMPORT`, sent to the target) in a
//! 3+3 cluster of the project's `scripts/cluster.sh`, while the client crate issues
//! snowflake IDs and segment values: a hot slot and a 200-slot range moved away and back, a
//! migration cancelled half way, an import whose target is killed, a failover of the target
//! right after an import, and a counter lowered by a `SET` just before its slot moves. Each
//! ends with 0 duplicates, every key's values increasing in the order one caller got them,
//! and no error reaching a caller.
//!
//! On servers without `CLUSTER MIGRATION` (Redis before 8.4, Valkey — whose own atomic
//! migration `tests/tests/cluster.rs` covers) each test prints why and passes.
//!
//! Half-way states are made observable by slowing the source's snapshot down with Redis's
//! own test knob `rdb-key-save-delay` (microseconds per key written) over a few thousand
//! filler keys in the slot: the import then takes seconds instead of milliseconds.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idgen_client::{Client, Settings, Topology};
use idgen_tests::{assert_strictly_increasing, count_duplicates, Cluster, NodeInfo};
use redis::cmd;

/// Whether the server under test has `CLUSTER MIGRATION` (Redis 8.4 or later); prints the
/// reason when it has not.
fn has_cluster_migration() -> bool {
    let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let output = Command::new(&binary)
        .arg("--version")
        .output()
        .expect("run the server binary");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .unwrap_or("0.0");
    let mut parts = version
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let has = text.starts_with("Redis server") && (major, minor) >= (8, 4);
    if !has {
        println!(
            "skipped: {} has no CLUSTER MIGRATION (Redis 8.4 and later have it)",
            text.trim()
        );
    }
    has
}

/// What the callers got, per key in the order one caller got them, and the errors.
#[derive(Default)]
struct Seen {
    snowflakes: BTreeMap<String, Vec<i64>>,
    segments: BTreeMap<String, Vec<i64>>,
    errors: Vec<String>,
}

impl Seen {
    fn merge(&mut self, other: Seen) {
        for (key, values) in other.snowflakes {
            self.snowflakes.entry(key).or_default().extend(values);
        }
        for (key, values) in other.segments {
            self.segments.entry(key).or_default().extend(values);
        }
        self.errors.extend(other.errors);
    }

    /// Checks 0 duplicates (snowflakes across all keys, segment values per key) and prints
    /// the scenario's line; returns how many errors callers saw.
    fn check(&self, scenario: &str) -> usize {
        let snowflakes = self.snowflakes.values().flatten().copied();
        let snowflake_dups = count_duplicates(snowflakes);
        let segment_dups: usize = self
            .segments
            .values()
            .map(|values| count_duplicates(values.iter().copied()))
            .sum();
        let issued = self.snowflakes.values().map(Vec::len).sum::<usize>();
        let values = self.segments.values().map(Vec::len).sum::<usize>();
        println!(
            "| {scenario} | {issued} snowflake IDs, {snowflake_dups} dup | {values} segment \
             values, {segment_dups} dup | {} errors seen by callers |",
            self.errors.len()
        );
        if let Some(first) = self.errors.first() {
            println!("  first error: {first}");
        }
        assert_eq!((snowflake_dups, segment_dups), (0, 0), "{scenario}");
        assert!(issued > 0 && values > 0, "{scenario}: no load ran");
        self.errors.len()
    }
}

/// One task per key (each issuing a snowflake ID and a segment value for its key in turn)
/// through the client crate, until stopped. One task per key keeps each key's values in
/// the order they were handed out.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Seen>>,
}

impl Load {
    fn start(client: &Client, keys: &[String]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = keys
            .iter()
            .map(|key| {
                let (client, stop, key) = (client.clone(), stop.clone(), key.clone());
                tokio::spawn(async move {
                    let mut seen = Seen::default();
                    let counter = format!("{{{key}}}:counter");
                    let (mut ids, mut values) = (Vec::new(), Vec::new());
                    while !stop.load(Ordering::Relaxed) {
                        match client.next_snowflake(&key).await {
                            Ok(id) => ids.push(id),
                            Err(error) => seen.errors.push(error.to_string()),
                        }
                        match client.next_segment_value(&counter).await {
                            Ok(value) => values.push(value),
                            Err(error) => seen.errors.push(error.to_string()),
                        }
                    }
                    seen.snowflakes.insert(key, ids);
                    seen.segments.insert(counter, values);
                    seen
                })
            })
            .collect();
        Load { stop, tasks }
    }

    async fn finish(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Seen::default();
        for task in self.tasks {
            all.merge(task.await.unwrap());
        }
        for (key, ids) in &all.snowflakes {
            println!("  {key}: {} IDs", ids.len());
            assert_strictly_increasing(ids);
        }
        for values in all.segments.values() {
            assert_strictly_increasing(values);
        }
        all
    }
}

/// A cluster on a server with `CLUSTER MIGRATION`, the slot of `key`, the master serving it
/// and another master; `None` (the caller's test passes, having said why) elsewhere.
async fn scene(key: &str) -> Option<(Cluster, u16, NodeInfo, NodeInfo)> {
    if !has_cluster_migration() {
        return None;
    }
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let slot = cluster.slot_of(key);
    let home = cluster.owner(slot);
    let away = other_master(&cluster, &home);
    Some((cluster, slot, home, away))
}

/// The client crate issuing on `key` of `cluster` without pause, warmed up for 300 ms.
async fn load_on(cluster: &Cluster, key: &str) -> Load {
    let load = Load::start(&cluster_client(cluster).await, &[key.to_string()]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    load
}

async fn cluster_client(cluster: &Cluster) -> Client {
    let settings = Settings::default().failover_retry_for(Duration::from_secs(30));
    Client::connect_with(Topology::cluster(cluster.urls()).unwrap(), settings)
        .await
        .expect("cluster client")
}

/// Another master than `than`.
fn other_master(cluster: &Cluster, than: &NodeInfo) -> NodeInfo {
    cluster
        .nodes()
        .into_iter()
        .find(|node| node.master && node.id != than.id)
        .unwrap()
}

fn info_number(cluster: &Cluster, port: u16, field: &str) -> u64 {
    idgen_tests::info_field(&mut cluster.node_conn(port), field)
        .parse()
        .unwrap()
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `CLUSTER MIGRATION IMPORT first last` on the target: the task's id.
fn start_import(cluster: &Cluster, to: &NodeInfo, (first, last): (u16, u16)) -> String {
    cmd("CLUSTER")
        .arg("MIGRATION")
        .arg("IMPORT")
        .arg(first)
        .arg(last)
        .query(&mut cluster.node_conn(to.port))
        .unwrap_or_else(|error| panic!("CLUSTER MIGRATION IMPORT refused: {error}"))
}

/// The task's `state` as `CLUSTER MIGRATION STATUS ID` on `port` gives it.
fn task_state(cluster: &Cluster, port: u16, id: &str) -> Option<String> {
    let reply: redis::Value = cmd("CLUSTER")
        .arg("MIGRATION")
        .arg("STATUS")
        .arg("ID")
        .arg(id)
        .query(&mut cluster.node_conn(port))
        .ok()?;
    // One task: a flat list of field, value (RESP2), possibly inside a one-element list.
    fn find_state(value: &redis::Value) -> Option<String> {
        let redis::Value::Array(items) = value else {
            return None;
        };
        for pair in items.windows(2) {
            if let [redis::Value::BulkString(name), value] = pair {
                if name == b"state" {
                    return redis::from_redis_value::<String>(value.clone()).ok();
                }
            }
        }
        items.iter().find_map(find_state)
    }
    find_state(&reply)
}

/// Waits until the task on `port` ends; its final state.
fn wait_task(cluster: &Cluster, port: u16, id: &str) -> String {
    let mut state = String::new();
    wait_until("the migration task ends", Duration::from_secs(60), || {
        state = task_state(cluster, port, id).unwrap_or_default();
        matches!(state.as_str(), "completed" | "failed" | "canceled")
    });
    state
}

/// Moves `range` to `to` and waits until every node sees `to` own it.
fn migrate(cluster: &Cluster, range: (u16, u16), to: &NodeInfo) {
    let id = start_import(cluster, to, range);
    assert_eq!(wait_task(cluster, to.port, &id), "completed", "{range:?}");
    wait_until(
        "every node sees the new owner",
        Duration::from_secs(30),
        || cluster.owner(range.0).id == to.id && cluster.owner(range.1).id == to.id,
    );
}

/// Fills `slot` with `count` filler keys (hash tag `tag`) and slows the owner's snapshot
/// down, so that an import of the slot lasts about `count` milliseconds.
fn make_slow(cluster: &Cluster, owner: &NodeInfo, tag: &str, count: usize) {
    let mut conn = cluster.node_conn(owner.port);
    let mut pipe = redis::pipe();
    for i in 0..count {
        pipe.cmd("SET")
            .arg(format!("{{{tag}}}filler{i}"))
            .arg("x")
            .ignore();
    }
    let () = pipe.query(&mut conn).unwrap();
    let () = cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg(1000)
        .query(&mut conn)
        .unwrap();
}

fn not_slow(cluster: &Cluster, port: u16) {
    let () = cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg(0)
        .query(&mut cluster.node_conn(port))
        .unwrap();
}

fn keys_in_slot(cluster: &Cluster, port: u16, slot: u16) -> u64 {
    cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut cluster.node_conn(port))
        .unwrap()
}

/// A hot slot (one snowflake key and one counter, called without pause) moves away and
/// back twice, then a 200-slot range holding it and eight other keys moves to a third
/// master and back, while the client crate issues on all of them. The source forgets the
/// counters that left, and every node counts what it imported and exported.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hot_slot_and_a_range_move_back_and_forth_under_load() {
    if !has_cluster_migration() {
        return;
    }
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let hot = cluster.slot_of("hot");
    // A 200-slot range around the hot slot, inside one master's slots.
    let home = cluster.owner(hot);
    let first = (hot.saturating_sub(100)..=hot)
        .find(|&slot| home.owns_slot(slot))
        .unwrap();
    let range = (first, first + 199);
    assert!(home.owns_slot(range.1), "the range fits in one master");
    let mut keys = vec!["hot".to_string()];
    keys.extend(
        (0..)
            .map(|i| format!("r{i}"))
            .filter(|key| (range.0..=range.1).contains(&cluster.slot_of(key)))
            .take(8),
    );
    let client = cluster_client(&cluster).await;
    let load = Load::start(&client, &keys);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let away = other_master(&cluster, &home);
    let held_before = info_number(&cluster, home.port, "segment_keys_held");
    let c = &cluster;
    for _ in 0..2 {
        tokio::task::block_in_place(|| migrate(c, (hot, hot), &away));
        tokio::time::sleep(Duration::from_millis(200)).await;
        tokio::task::block_in_place(|| migrate(c, (hot, hot), &home));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let third = cluster
        .nodes()
        .into_iter()
        .find(|node| node.master && node.id != home.id && node.id != away.id)
        .unwrap();
    tokio::task::block_in_place(|| migrate(c, range, &third));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held_after = info_number(&cluster, home.port, "segment_keys_held");
    assert!(
        held_after < held_before,
        "the source still holds the counters that moved away ({held_before} → {held_after})"
    );
    tokio::task::block_in_place(|| migrate(c, range, &home));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = load.finish().await;

    let total = |field: &str| -> u64 {
        cluster
            .nodes()
            .iter()
            .filter(|node| node.master)
            .map(|node| info_number(&cluster, node.port, field))
            .sum()
    };
    assert_eq!(total("slot_imports"), 6, "six imports completed");
    assert_eq!(total("slot_exports"), 6, "six exports completed");
    assert_eq!(total("slot_imports_started"), 6);
    assert_eq!(
        total("slot_imports_failed") + total("slot_exports_failed"),
        0
    );
    assert!(
        total("slot_trims") >= 6,
        "every completed export trims its slots"
    );
    // The bound extensions forwarded in the slot stream (SNOWFLAKE.SETBOUND with its owner)
    // were taken as replicated writes on the targets, not refused as a client's.
    assert_eq!(total("errors"), 0, "a node answered a call with an error");
    let errors = seen.check("CLUSTER MIGRATION of a hot slot (2× away and back) and of a 200-slot range (away and back), under load");
    assert_eq!(errors, 0, "callers saw errors");
}

/// A migration cancelled half way (`CLUSTER MIGRATION CANCEL` on the target): the keys stay
/// on the source, which keeps issuing above what it handed out, the target drops what it
/// imported, and both count the failure; a migration after it moves the slot as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_migration_cancelled_half_way_leaves_the_keys_on_the_source() {
    let Some((cluster, hot, home, away)) = scene("hot").await else {
        return;
    };
    make_slow(&cluster, &home, "hot", 3000);
    let load = load_on(&cluster, "hot").await;

    let c = &cluster;
    let id = tokio::task::block_in_place(|| start_import(c, &away, (hot, hot)));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let state = task_state(&cluster, away.port, &id).unwrap_or_default();
    assert!(
        !matches!(state.as_str(), "completed" | "failed" | "canceled"),
        "the import was not half way after 1 s: {state}"
    );
    let cancelled: i64 = cmd("CLUSTER")
        .arg("MIGRATION")
        .arg("CANCEL")
        .arg("ID")
        .arg(&id)
        .query(&mut cluster.node_conn(away.port))
        .unwrap();
    assert_eq!(cancelled, 1);
    assert_eq!(
        tokio::task::block_in_place(|| wait_task(c, away.port, &id)),
        "canceled"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cluster.owner(hot).id, home.id, "the slot stayed");
    wait_until(
        "the target drops what it imported",
        Duration::from_secs(20),
        || keys_in_slot(c, away.port, hot) == 0,
    );
    assert!(keys_in_slot(&cluster, home.port, hot) >= 3000);
    assert_eq!(info_number(&cluster, away.port, "slot_imports_failed"), 1);
    wait_until(
        "the source counts the failed export",
        Duration::from_secs(20),
        || info_number(c, home.port, "slot_exports_failed") == 1,
    );

    // The same slot moves afterwards (as slowly), and the keys continue on the target. The
    // bound extensions the source writes meanwhile reach the target in the slot stream as
    // `SNOWFLAKE.SETBOUND key bound owner`, which it takes as replicated writes: no error.
    let writes_before = info_number(&cluster, home.port, "snowflake_bound_writes");
    tokio::task::block_in_place(|| migrate(c, (hot, hot), &away));
    let writes_during = info_number(&cluster, home.port, "snowflake_bound_writes") - writes_before;
    not_slow(&cluster, home.port);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = load.finish().await;
    println!("  bound writes on the source during the import: {writes_during}");
    assert!(writes_during > 0, "no bound was written during the import");
    assert_eq!(info_number(&cluster, away.port, "slot_imports"), 1);
    assert_eq!(info_number(&cluster, away.port, "errors"), 0);
    let errors = seen.check("CLUSTER MIGRATION cancelled half way, then completed, under load");
    assert_eq!(errors, 0, "callers saw errors");
}

/// The target is killed (SIGKILL) half way through an import: the source's export fails,
/// its keys stay and keep issuing without a repeat; the killed master's replica takes its
/// slots; an import to the promoted replica afterwards completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_import_whose_target_is_killed_fails_and_the_source_keeps_issuing() {
    let Some((cluster, hot, home, away)) = scene("hot").await else {
        return;
    };
    let away_replica = cluster.replica_of(&away.id);
    make_slow(&cluster, &home, "hot", 3000);
    let load = load_on(&cluster, "hot").await;

    let c = &cluster;
    let id = tokio::task::block_in_place(|| start_import(c, &away, (hot, hot)));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let state = task_state(&cluster, away.port, &id).unwrap_or_default();
    assert!(
        !matches!(state.as_str(), "completed" | "failed" | "canceled"),
        "the import was not half way after 1 s: {state}"
    );
    cluster.kill(away.port);
    tokio::task::block_in_place(|| {
        wait_until("the source's export fails", Duration::from_secs(30), || {
            info_number(c, home.port, "slot_exports_failed") == 1
        });
        wait_until(
            "the killed target's replica takes over",
            Duration::from_secs(30),
            || {
                cluster
                    .nodes()
                    .iter()
                    .any(|node| node.id == away_replica.id && node.master)
            },
        );
    });
    assert_eq!(cluster.owner(hot).id, home.id, "the slot stayed");
    assert!(keys_in_slot(&cluster, home.port, hot) >= 3000);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The promoted replica can import the slot afterwards.
    not_slow(&cluster, home.port);
    let promoted = cluster
        .nodes()
        .into_iter()
        .find(|node| node.id == away_replica.id)
        .unwrap();
    tokio::task::block_in_place(|| migrate(c, (hot, hot), &promoted));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = load.finish().await;
    let errors = seen.check("CLUSTER MIGRATION whose target is killed half way, under load");
    assert_eq!(errors, 0, "callers saw errors");
}

/// Right after an import completes, the target's replica takes over (a coordinated
/// `CLUSTER FAILOVER`, so it has every write): it continues above the keys' records; and
/// the source, killed right after, takes none of the moved keys with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_of_the_target_and_a_killed_source_right_after_an_import() {
    let Some((cluster, hot, home, away)) = scene("hot").await else {
        return;
    };
    let away_replica = cluster.replica_of(&away.id);
    let load = load_on(&cluster, "hot").await;

    let c = &cluster;
    tokio::task::block_in_place(|| {
        migrate(c, (hot, hot), &away);
        // The source, killed right after: its replica takes its other slots.
        c.kill(home.port);
        let () = cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut c.node_conn(away_replica.port))
            .unwrap();
        wait_until(
            "the target's replica takes over",
            Duration::from_secs(30),
            || c.owner(hot).id == away_replica.id,
        );
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = load.finish().await;
    let errors = seen
        .check("CLUSTER MIGRATION, then the source killed and the target failed over, under load");
    assert_eq!(errors, 0, "callers saw errors");
}

/// A counter lowered by a `SET` just before its slot moves away and back: the source
/// remembered, as the export started, what it had handed out, and continues above it when
/// the counter comes back (without that, it continued from the lowered value plus the
/// fence and repeated its own values); on the target, in its own residue class, no value
/// repeats either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_counter_moved_away_and_back_repeats_no_value() {
    let Some((cluster, slot, home, away)) = scene("inv").await else {
        return;
    };
    let client = cluster_client(&cluster).await;
    let lower = |cluster: &Cluster, port: u16| {
        let () = cmd("SET")
            .arg("inv")
            .arg(5)
            .query(&mut cluster.node_conn(port))
            .unwrap();
    };
    let mut handed_out: Vec<i64> = Vec::new();
    for _ in 0..5 {
        handed_out.push(client.next_segment_value("inv").await.unwrap());
    }
    lower(&cluster, home.port);
    let c = &cluster;
    tokio::task::block_in_place(|| {
        migrate(c, (slot, slot), &away);
        migrate(c, (slot, slot), &home);
    });
    for _ in 0..5 {
        handed_out.push(client.next_segment_value("inv").await.unwrap());
    }
    println!("  home, away and back unused: {handed_out:?}");
    assert_strictly_increasing(&handed_out);
    // Lowered again, moved, and used on the target.
    lower(&cluster, home.port);
    tokio::task::block_in_place(|| migrate(c, (slot, slot), &away));
    for _ in 0..5 {
        handed_out.push(client.next_segment_value("inv").await.unwrap());
    }
    println!("  then on the target: {:?}", &handed_out[10..]);
    assert_eq!(
        count_duplicates(handed_out.iter().copied()),
        0,
        "{handed_out:?}"
    );
}
