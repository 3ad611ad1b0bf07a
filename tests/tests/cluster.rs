//! Redis Cluster, 3 masters + 3 replicas, each node with its own offset (the project's
//! `scripts/cluster.sh`): routing, cross-slot refusals, a busy key's slot resharded while IDs
//! are issued, a coordinated CLUSTER FAILOVER under load, and a master killed with SIGKILL
//! under load. The load runs through the client crate in cluster mode.
//!
//! Each scenario prints its line of the table: run with `--nocapture` to see it.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idgen_client::{Client, SegmentOptions, Settings, Topology};
use idgen_tests::{assert_strictly_increasing, count_duplicates, Cluster, NodeInfo};
use redis::cmd;

/// What the load saw.
#[derive(Default)]
struct Seen {
    /// IDs for the busy key, in the order one task got them.
    busy: Vec<i64>,
    /// IDs for other keys.
    others: Vec<i64>,
    segments: Vec<i64>,
    errors: Vec<String>,
}

/// Four tasks issuing through the client until stopped: one on the busy key (so its order
/// can be checked), three on other keys, all taking segment values from one buffer.
struct Load {
    stop: Arc<AtomicBool>,
    /// The busy key's latest ID (0 before the first).
    busy_latest: Arc<AtomicI64>,
    tasks: Vec<tokio::task::JoinHandle<Seen>>,
}

impl Load {
    fn start(client: &Client) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let busy_latest = Arc::new(AtomicI64::new(0));
        let segments =
            client.segment_buffer("invoice", SegmentOptions::default().initial_size(200));
        let tasks = (0..4)
            .map(|task| {
                let (client, segments, stop) = (client.clone(), segments.clone(), stop.clone());
                let busy_latest = busy_latest.clone();
                tokio::spawn(async move {
                    let mut seen = Seen::default();
                    let key = if task == 0 {
                        "busy".to_string()
                    } else {
                        format!("other{task}")
                    };
                    while !stop.load(Ordering::Relaxed) {
                        match client.next_snowflake(&key).await {
                            Ok(id) if task == 0 => {
                                busy_latest.store(id, Ordering::Relaxed);
                                seen.busy.push(id);
                            }
                            Ok(id) => seen.others.push(id),
                            Err(error) => seen.errors.push(error.to_string()),
                        }
                        match segments.next().await {
                            Ok(value) => seen.segments.push(value),
                            Err(error) => seen.errors.push(error.to_string()),
                        }
                    }
                    seen
                })
            })
            .collect();
        Load {
            stop,
            busy_latest,
            tasks,
        }
    }

    /// Waits until the busy key's IDs come from the node with `offset` (at most 30 s), then
    /// lets the load run 300 ms more. A fixed wait alone would let a slow machine end the
    /// load before the first ID after a move or failover.
    async fn until_busy_issued_by(&self, client: &Client, offset: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let latest = self.busy_latest.load(Ordering::Relaxed);
            if latest != 0 && client.decode(latest).unwrap().offset == offset {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "30 s on, the busy key's IDs still do not come from offset {offset}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    async fn finish(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Seen::default();
        for task in self.tasks {
            let seen = task.await.unwrap();
            all.busy.extend(seen.busy);
            all.others.extend(seen.others);
            all.segments.extend(seen.segments);
            all.errors.extend(seen.errors);
        }
        all
    }
}

/// Prints the scenario's row and checks zero duplicates; returns the errors seen.
fn report(scenario: &str, seen: &Seen) -> usize {
    let snowflakes = seen.busy.iter().chain(&seen.others).copied();
    let snowflake_dups = count_duplicates(snowflakes);
    let segment_dups = count_duplicates(seen.segments.iter().copied());
    println!(
        "| {scenario} | {} snowflake IDs, {snowflake_dups} dup | {} segment values, {segment_dups} dup | {} errors seen by the client's callers |",
        seen.busy.len() + seen.others.len(),
        seen.segments.len(),
        seen.errors.len()
    );
    if let Some(first) = seen.errors.first() {
        println!("  first error: {first}");
    }
    assert_eq!((snowflake_dups, segment_dups), (0, 0), "{scenario}");
    seen.errors.len()
}

async fn cluster_client(cluster: &Cluster) -> Client {
    let settings = Settings::default().failover_retry_for(Duration::from_secs(30));
    Client::connect_with(Topology::cluster(cluster.urls()).unwrap(), settings)
        .await
        .expect("cluster client")
}

fn offset_of(cluster: &Cluster, port: u16) -> u64 {
    let reply: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("idgen.offset")
        .query(&mut cluster.node_conn(port))
        .unwrap();
    reply[1].parse().unwrap()
}

/// Moves `slot` from one master to another with its keys, as `redis-cli --cluster reshard`
/// does for each slot: IMPORTING/MIGRATING, MIGRATE the keys, then assign the slot.
fn move_slot(cluster: &Cluster, slot: u16, from: &NodeInfo, to: &NodeInfo) {
    let mut source = cluster.node_conn(from.port);
    let mut target = cluster.node_conn(to.port);
    let _: () = cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("IMPORTING")
        .arg(&from.id)
        .query(&mut target)
        .unwrap();
    let _: () = cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("MIGRATING")
        .arg(&to.id)
        .query(&mut source)
        .unwrap();
    loop {
        let keys: Vec<String> = cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut source)
            .unwrap();
        if keys.is_empty() {
            break;
        }
        let _: () = cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to.port)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("AUTH")
            .arg(idgen_tests::CLUSTER_PASSWORD)
            .arg("KEYS")
            .arg(&keys)
            .query(&mut source)
            .unwrap();
    }
    // Target first, then source (both must accept); the other masters learn it by gossip
    // and are told directly to speed that up.
    for (port, required) in [(to.port, true), (from.port, true)].into_iter().chain(
        cluster
            .nodes()
            .iter()
            .filter(|n| n.master)
            .map(|n| (n.port, false)),
    ) {
        let told: redis::RedisResult<()> = cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(&to.id)
            .query(&mut cluster.node_conn(port));
        assert!(
            told.is_ok() || !required,
            "SETSLOT NODE on {port}: {told:?}"
        );
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routing_resharding_and_a_coordinated_failover_under_load() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let client = cluster_client(&cluster).await;
    assert_eq!(
        client.deployment().nodes.len(),
        6,
        "masters and replicas were all checked"
    );
    assert_eq!(client.deployment().step, 8);

    // Routing: redis-cli -c follows MOVED to the owner of each key.
    let port = cluster.ports()[0].to_string();
    for key in ["orders", "users", "events", "invoices"] {
        let output = Command::new("redis-cli")
            .args(["-c", "-p", &port, "SNOWFLAKE.NEXT", key])
            .env("REDISCLI_AUTH", idgen_tests::CLUSTER_PASSWORD)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.trim().parse::<i64>().is_ok(), "{key}: {text}");
    }
    // Key specs: a script or transaction over keys of two slots is refused by the server.
    let mut conn = cluster.node_conn(cluster.ports()[0]);
    let cross: redis::RedisResult<redis::Value> = cmd("EVAL")
        .arg("return redis.call('SNOWFLAKE.NEXT', KEYS[1])")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut conn);
    let error = cross.unwrap_err();
    assert_eq!(
        error.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot),
        "{error}"
    );
    // For a transaction, take two keys this node serves, in different slots.
    let here = cluster.owner(cluster.slot_of("a"));
    let mut conn = cluster.node_conn(here.port);
    let second = (0..)
        .map(|i| format!("k{i}"))
        .find(|key| {
            let slot = cluster.slot_of(key);
            slot != cluster.slot_of("a") && cluster.owner(slot).id == here.id
        })
        .unwrap();
    let _: () = cmd("MULTI").query(&mut conn).unwrap();
    let queued: redis::RedisResult<String> = cmd("SNOWFLAKE.NEXT").arg("a").query(&mut conn);
    let also_queued: redis::RedisResult<String> = cmd("SEGMENT.NEXT").arg(&second).query(&mut conn);
    let exec: redis::RedisResult<redis::Value> = cmd("EXEC").query(&mut conn);
    assert_eq!(
        (queued.unwrap(), also_queued.unwrap()),
        ("QUEUED".into(), "QUEUED".into())
    );
    // EXEC checks the transaction's keys together.
    let refused = exec.unwrap_err();
    assert_eq!(
        refused.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot),
        "{refused:?}"
    );

    // Resharding the busy key's slot while IDs are issued.
    let slot = cluster.slot_of("busy");
    let load = Load::start(&client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let from = cluster.owner(slot);
    let to = cluster
        .nodes()
        .into_iter()
        .find(|n| n.master && n.id != from.id)
        .unwrap();
    let (c, f, t) = (&cluster, from.clone(), to.clone());
    tokio::task::block_in_place(|| move_slot(c, slot, &f, &t));
    load.until_busy_issued_by(&client, offset_of(&cluster, to.port))
        .await;
    let seen = load.finish().await;
    assert_eq!(cluster.owner(slot).id, to.id);
    assert_strictly_increasing(&seen.busy);
    let last = *seen.busy.last().unwrap();
    assert_eq!(
        client.decode(last).unwrap().offset,
        offset_of(&cluster, to.port),
        "the new owner issues"
    );
    let errors = report("resharding the busy key's slot under load", &seen);
    assert_eq!(errors, 0);

    // A coordinated failover of the master that now serves the busy key.
    let load = Load::start(&client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let master = cluster.owner(slot);
    let replica = cluster.replica_of(&master.id);
    let _: () = cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut cluster.node_conn(replica.port))
        .unwrap();
    tokio::task::block_in_place(|| {
        wait_until("the replica is master", Duration::from_secs(20), || {
            cluster.owner(slot).id == replica.id
        })
    });
    load.until_busy_issued_by(&client, offset_of(&cluster, replica.port))
        .await;
    let seen = load.finish().await;
    // Nothing is lost in a coordinated failover, so per-key order holds across it.
    assert_strictly_increasing(&seen.busy);
    let last = *seen.busy.last().unwrap();
    assert_eq!(
        client.decode(last).unwrap().offset,
        offset_of(&cluster, replica.port)
    );
    let errors = report("coordinated CLUSTER FAILOVER under load", &seen);
    assert_eq!(errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_master_killed_under_load_is_replaced_without_duplicates() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let client = cluster_client(&cluster).await;
    let slot = cluster.slot_of("busy");
    let load = Load::start(&client);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let master = cluster.owner(slot);
    let replica = cluster.replica_of(&master.id);
    cluster.kill(master.port);
    tokio::task::block_in_place(|| {
        wait_until("the replica took over", Duration::from_secs(30), || {
            cluster
                .nodes()
                .iter()
                .any(|n| n.id == replica.id && n.master)
        })
    });
    load.until_busy_issued_by(&client, offset_of(&cluster, replica.port))
        .await;
    let seen = load.finish().await;
    let last = *seen.busy.last().unwrap();
    assert_eq!(
        client.decode(last).unwrap().offset,
        offset_of(&cluster, replica.port)
    );
    let errors = report(
        "master killed with SIGKILL under load, replica promoted",
        &seen,
    );
    println!("  client metrics: {:?}", client.metrics());
    assert_eq!(errors, 0, "the client rides through the failover");
}

/// Whether the server migrates slots atomically (Valkey 9's `CLUSTER MIGRATESLOTS`): asked
/// of INFO, so that a server that should have it and refuses fails the test instead of
/// skipping it.
fn has_atomic_slot_migration(conn: &mut redis::Connection) -> bool {
    let info: String = cmd("INFO").arg("server").query(conn).unwrap();
    let major = |field: &str| {
        idgen_tests::info_line(&info, field)
            .and_then(|version| version.split('.').next()?.parse::<u32>().ok())
    };
    idgen_tests::info_line(&info, "server_name").as_deref() == Some("valkey")
        && major("valkey_version").is_some_and(|major| major >= 9)
}

/// Moves `slot` to `to` with `CLUSTER MIGRATESLOTS` (sent to its owner) and waits until
/// the cluster sees `to` own it.
fn migrate_slot_atomically(cluster: &Cluster, slot: u16, to: &NodeInfo) {
    let from = cluster.owner(slot);
    let _: () = cmd("CLUSTER")
        .arg("MIGRATESLOTS")
        .arg("SLOTSRANGE")
        .arg(slot)
        .arg(slot)
        .arg("NODE")
        .arg(&to.id)
        .query(&mut cluster.node_conn(from.port))
        .unwrap_or_else(|error| panic!("CLUSTER MIGRATESLOTS refused: {error}"));
    wait_until(
        "the slot migration completes",
        Duration::from_secs(30),
        || {
            cluster.ports().iter().all(|&port| {
                cmd("CLUSTER")
                    .arg("NODES")
                    .query::<String>(&mut cluster.node_conn(port))
                    .is_ok_and(|_| cluster.owner(slot).id == to.id)
            })
        },
    );
}

/// `SNOWFLAKE.BOUND key` on the node at `port`.
fn bound_of(cluster: &Cluster, port: u16, key: &str) -> Option<i64> {
    cmd("SNOWFLAKE.BOUND")
        .arg(key)
        .query(&mut cluster.node_conn(port))
        .unwrap()
}

fn info_number(cluster: &Cluster, port: u16, field: &str) -> u64 {
    idgen_tests::info_field(&mut cluster.node_conn(port), field)
        .parse()
        .unwrap()
}

/// Valkey 9's atomic slot migration moves the slots of a busy snowflake key and of a
/// segment counter to another master and back while the client crate and plain redis-rs
/// cluster connections issue: per key the IDs keep increasing, nothing repeats, no caller
/// sees an error, and the source forgets what it kept for the keys that left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn atomic_slot_migration_moves_slots_and_back_under_load() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    if !has_atomic_slot_migration(&mut cluster.node_conn(cluster.ports()[0])) {
        println!(
            "skipped: this server has no CLUSTER MIGRATESLOTS (Valkey 9 has it; Redis 8.4+'s \
             CLUSTER MIGRATION is tested in tests/tests/slot_migration.rs)"
        );
        return;
    }
    let client = cluster_client(&cluster).await;
    let load = Load::start(&client);
    // A plain redis-rs cluster connection on the same keys, as another service would.
    let stop = Arc::new(AtomicBool::new(false));
    let plain = {
        let (stop, urls) = (stop.clone(), cluster.urls());
        tokio::task::spawn_blocking(move || {
            let mut conn = redis::cluster::ClusterClient::builder(urls)
                .retries(64)
                .build()
                .unwrap()
                .get_connection()
                .unwrap();
            let (mut busy, mut values, mut errors) = (Vec::new(), Vec::new(), Vec::new());
            while !stop.load(Ordering::Relaxed) {
                match cmd("SNOWFLAKE.NEXT").arg("busy").query::<i64>(&mut conn) {
                    Ok(id) => busy.push(id),
                    Err(error) => errors.push(error.to_string()),
                }
                match cmd("SEGMENT.NEXT").arg("invoice").query::<i64>(&mut conn) {
                    Ok(value) => values.push(value),
                    Err(error) => errors.push(error.to_string()),
                }
            }
            (busy, values, errors)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let slots = [cluster.slot_of("busy"), cluster.slot_of("invoice")];
    let homes = slots.map(|slot| cluster.owner(slot));
    for (slot, home) in slots.iter().zip(&homes) {
        let away = cluster
            .nodes()
            .into_iter()
            .find(|node| node.master && node.id != home.id)
            .unwrap();
        let fenced_before = info_number(&cluster, home.port, "segment_keys_held");
        let bound_before = bound_of(&cluster, home.port, "busy");
        let c = &cluster;
        tokio::task::block_in_place(|| migrate_slot_atomically(c, *slot, &away));
        if *slot == slots[0] {
            // The key's record came along: the target continues above it.
            let moved = bound_of(&cluster, away.port, "busy");
            assert!(
                moved.is_some() && moved >= bound_before,
                "the bound {bound_before:?} arrived as {moved:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        if *slot == slots[1] {
            let fenced_after = info_number(&cluster, home.port, "segment_keys_held");
            assert!(
                fenced_after < fenced_before,
                "the source still remembers the counter that moved away ({fenced_before} → {fenced_after})"
            );
        }
        tokio::task::block_in_place(|| migrate_slot_atomically(c, *slot, home));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let seen = load.finish().await;
    stop.store(true, Ordering::Relaxed);
    let (plain_busy, plain_values, plain_errors) = plain.await.unwrap();
    assert_strictly_increasing(&seen.busy);
    assert_strictly_increasing(&plain_busy);
    assert_strictly_increasing(&plain_values);
    let imports: u64 = cluster
        .nodes()
        .iter()
        .filter(|node| node.master)
        .map(|node| info_number(&cluster, node.port, "slot_imports"))
        .sum();
    assert_eq!(imports, 4, "two slots moved away and back");
    let mut all = Seen {
        busy: seen.busy,
        others: seen.others,
        segments: seen.segments,
        errors: seen.errors,
    };
    all.busy.extend(&plain_busy);
    all.segments.extend(&plain_values);
    all.errors.extend(plain_errors);
    let errors = report(
        "CLUSTER MIGRATESLOTS of a busy key's and a counter's slots, and back, under load",
        &all,
    );
    assert_eq!(errors, 0, "callers saw errors");
}

/// In cluster mode the members' identities are checked again while the client runs: a
/// replica restarted with another node's offset makes calls fail with a deployment error
/// naming the change — as connecting would have — and once it is back on its own offset,
/// calls succeed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_restarted_with_another_offset_stops_the_client_until_fixed() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let settings = Settings::default().cluster_check_every(Duration::from_millis(200));
    let client = Client::connect_with(Topology::cluster(cluster.urls()).unwrap(), settings)
        .await
        .unwrap();
    client.next_snowflake("orders").await.unwrap();
    let replica = cluster
        .nodes()
        .into_iter()
        .find(|node| !node.master)
        .unwrap();
    let own_offset = offset_of(&cluster, replica.port).to_string();
    let module = idgen_tests::module_path();
    let c = &cluster;
    tokio::task::block_in_place(|| c.restart_node_with(replica.port, &module, &["offset", "0"]));
    let refused = wait_for_call(&client, |result| match result {
        Err(idgen_client::Error::Deployment(problem)) => Some(problem.clone()),
        _ => None,
    })
    .await;
    assert!(
        refused.contains("changed its identity")
            && refused.contains(&format!("offset {own_offset} → 0")),
        "{refused}"
    );
    tokio::task::block_in_place(|| {
        c.restart_node_with(replica.port, &module, &["offset", &own_offset])
    });
    wait_for_call(&client, |result| result.as_ref().ok().map(|_| ())).await;
}

/// Calls `SNOWFLAKE.NEXT orders` every 50 ms until `wanted` picks a result (at most 20 s).
async fn wait_for_call<T>(
    client: &Client,
    wanted: impl Fn(&idgen_client::Result<i64>) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let result = client.next_snowflake("orders").await;
        if let Some(found) = wanted(&result) {
            return found;
        }
        assert!(Instant::now() < deadline, "still {result:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
