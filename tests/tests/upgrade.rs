//! Rolling upgrades of the module while applications keep running: a node is stopped and
//! started again on the other release (the previous one, built by
//! `scripts/previous-release.sh`, and this one), both ways, in each of the client's modes,
//! while a client issues IDs. The client must use the node again as soon as it answers —
//! the module version is not part of a node's identity — and no ID may repeat.
//!
//! Prints how long after the node answered the client had its first ID from it again: run
//! with `--nocapture` to see the figures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idgen_client::{Client, Topology};
use idgen_tests::{
    assert_unique, module_path, previous_module_path, Cluster, Sentinels, Server, ServerOptions,
    SENTINEL_MASTER_NAME,
};

/// The client must have used a restarted node again within this long after it answered
/// (the figure printed is what was measured; this bound only keeps a client that never
/// recovers from passing, and a slow CI machine from failing).
const RECOVERY_BOUND: Duration = Duration::from_secs(5);

/// What one issuing task saw: each call's end time and its ID or error.
type Calls = Arc<Mutex<Vec<(Instant, Result<i64, String>)>>>;

/// A task issuing one snowflake every few milliseconds, as an application would.
struct Issuing {
    calls: Calls,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Issuing {
    fn start(client: Client, key: &'static str) -> Issuing {
        let calls: Calls = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (calls, stop) = (calls.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    let result = client
                        .next_snowflake(key)
                        .await
                        .map_err(|error| error.to_string());
                    calls.lock().unwrap().push((Instant::now(), result));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
        Issuing { calls, stop, task }
    }

    /// Waits for the first ID after `since` that `from_node` accepts (issued by the node
    /// restarted), and returns how long after `since` it came.
    async fn recovery(&self, since: Instant, from_node: impl Fn(i64) -> bool) -> Duration {
        loop {
            let found = self
                .calls
                .lock()
                .unwrap()
                .iter()
                .find_map(|(at, result)| match result {
                    Ok(id) if *at >= since && from_node(*id) => Some(*at - since),
                    _ => None,
                });
            if let Some(after) = found {
                return after;
            }
            let waited = since.elapsed();
            if waited >= RECOVERY_BOUND {
                let calls = self.calls.lock().unwrap();
                let last: Vec<_> = calls
                    .iter()
                    .rev()
                    .take(3)
                    .map(|(at, result)| (at.checked_duration_since(since), result.clone()))
                    .collect();
                drop(calls);
                panic!(
                    "no ID from the restarted node {waited:?} after it answered; the last \
                     calls (time after it answered, result): {last:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops issuing; returns every ID and every error callers saw.
    async fn finish(self) -> (Vec<i64>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let calls = std::mem::take(&mut *self.calls.lock().unwrap());
        let mut ids = Vec::new();
        let mut errors = Vec::new();
        for (_, result) in calls {
            match result {
                Ok(id) => ids.push(id),
                Err(error) => errors.push(error),
            }
        }
        (ids, errors)
    }
}

/// The module version a server reports (`IDGEN.IDENTITY`'s `version`).
fn version_of(conn: &mut redis::Connection) -> String {
    let fields: std::collections::HashMap<String, String> =
        redis::cmd("IDGEN.IDENTITY").query(conn).unwrap();
    fields["version"].clone()
}

/// Stops `server` (SIGTERM: it writes its AOF), starts it again on `library`, and returns
/// when it answers, with the version it now reports.
fn restart_onto(server: &mut Server, library: Option<std::path::PathBuf>) -> (Instant, String) {
    server.terminate();
    server.switch_module(library);
    server
        .start_again(&[])
        .unwrap_or_else(|failure| panic!("the server did not start again:\n{}", failure.log));
    let answered = Instant::now();
    (answered, version_of(&mut server.conn()))
}

fn persistent(offset: &str, step: &str) -> ServerOptions {
    ServerOptions::module(&["step", step, "offset", offset])
        .server_args(&["--appendonly", "yes"])
        .module_library(previous_module_path())
}

fn start(options: ServerOptions) -> Server {
    Server::start_with(options).unwrap_or_else(|failure| panic!("{}", failure.log))
}

/// Upgrades `servers[restarted]` from the previous release to this one and back while
/// `issuing` runs; returns the two recovery times.
async fn upgrade_and_back(
    servers: &mut [Server],
    restarted: usize,
    issuing: &Issuing,
    from_node: impl Fn(i64) -> bool,
) -> [Duration; 2] {
    let before = version_of(&mut servers[restarted].conn());
    let (answered, upgraded) = restart_onto(&mut servers[restarted], None);
    assert_ne!(
        upgraded, before,
        "the restart should load the other release"
    );
    let up = issuing.recovery(answered, &from_node).await;
    let (answered, downgraded) =
        restart_onto(&mut servers[restarted], Some(previous_module_path()));
    assert_eq!(downgraded, before);
    let down = issuing.recovery(answered, &from_node).await;
    println!("idgen {before} → {upgraded}: IDs again after {up:?}; back to {before}: {down:?}");
    [up, down]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_mode_uses_a_node_again_as_soon_as_it_answers_on_another_release() {
    let mut servers = [start(persistent("1", "2"))];
    let client = Client::connect(Topology::single(servers[0].url()).unwrap())
        .await
        .unwrap();
    let issuing = Issuing::start(client, "orders");
    upgrade_and_back(&mut servers, 0, &issuing, |_| true).await;
    let (ids, errors) = issuing.finish().await;
    // While the only node is down calls fail; they must never repeat or go backwards.
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "IDs went backwards");
    println!(
        "single: {} IDs, {} calls failed while the node was down",
        ids.len(),
        errors.len()
    );
    assert!(
        errors.iter().all(|e| !e.contains("pooled connection")),
        "a caller saw a pool timeout: {errors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_mode_keeps_serving_and_takes_the_restarted_node_back() {
    let mut servers: Vec<Server> = (0..3)
        .map(|offset| start(persistent(&offset.to_string(), "3")))
        .collect();
    let client = Client::connect(Topology::nodes(servers.iter().map(Server::url)).unwrap())
        .await
        .unwrap();
    let decoder = client.clone();
    let issuing = Issuing::start(client, "orders");
    let from_node_1 = move |id| decoder.decode(id).unwrap().offset == 1;
    upgrade_and_back(&mut servers, 1, &issuing, from_node_1).await;
    let (ids, errors) = issuing.finish().await;
    assert_unique(&ids);
    assert!(errors.is_empty(), "callers saw errors: {errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_mode_follows_the_master_through_its_upgrade() {
    let master = start(persistent("0", "4"));
    let replicas: Vec<Server> = ["1", "2"]
        .iter()
        .map(|offset| {
            let replica = start(persistent(offset, "4").server_args(&[
                "--replicaof",
                "127.0.0.1",
                &master.port().to_string(),
            ]));
            replica.wait_in_sync();
            replica
        })
        .collect();
    let sentinels = Sentinels::start(3, master.port(), 1000);
    let topology = Topology::sentinel(SENTINEL_MASTER_NAME, sentinels.urls()).unwrap();
    let client = Client::connect(topology).await.unwrap();
    let issuing = Issuing::start(client, "orders");
    let mut servers = [master];
    upgrade_and_back(&mut servers, 0, &issuing, |_| true).await;
    let (ids, errors) = issuing.finish().await;
    assert_unique(&ids);
    assert!(errors.is_empty(), "callers saw errors: {errors:?}");
    drop(replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_routes_to_a_master_again_after_its_upgrade() {
    let cluster = Cluster::start_with_module(&previous_module_path());
    let client = Client::connect(Topology::cluster(cluster.urls()).unwrap())
        .await
        .unwrap();
    // The master that serves the key.
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg("orders")
        .query(&mut cluster.node_conn(cluster.ports()[0]))
        .unwrap();
    let master = cluster
        .nodes()
        .into_iter()
        .find(|node| node.master && node.owns_slot(slot))
        .expect("a master serving the key");
    let issuing = Issuing::start(client, "orders");
    let before = version_of(&mut cluster.node_conn(master.port));
    for (library, upgraded) in [(module_path(), true), (previous_module_path(), false)] {
        cluster.restart_node_onto(master.port, &library);
        // A restarted master refuses writes (CLUSTERDOWN) for its first 2 s, Redis's and
        // Valkey's CLUSTER_WRITABLE_DELAY, so that the cluster can reconfigure it first: it
        // serves from when its cluster state is ok.
        let mut conn = cluster.node_conn(master.port);
        while !redis::cmd("CLUSTER")
            .arg("INFO")
            .query::<String>(&mut conn)
            .unwrap()
            .contains("cluster_state:ok")
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let answered = Instant::now();
        let now = version_of(&mut conn);
        assert_eq!(
            now != before,
            upgraded,
            "the restart should load {}",
            library.display()
        );
        let after = issuing.recovery(answered, |_| true).await;
        println!(
            "cluster master {} now on idgen {now} (was {before}): IDs again {after:?} after \
             it accepted writes",
            master.port
        );
    }
    let (ids, errors) = issuing.finish().await;
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "IDs went backwards");
    assert!(errors.is_empty(), "callers saw errors: {errors:?}");
}

/// What is still refused: a node back with another identity. The caller learns at once
/// what changed — never a pool timeout — and the node is used again once it is back on
/// its old configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_back_with_another_offset_is_refused_with_what_changed() {
    let mut server = start(persistent("1", "2"));
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    client.next_snowflake("orders").await.unwrap();
    server.terminate();
    server.switch_module(None);
    server.start_again(&["offset", "0"]).unwrap();
    let started = Instant::now();
    let refused = loop {
        match client.next_snowflake("orders").await {
            Err(idgen_client::Error::Deployment(problem)) => break problem,
            Err(other) => {
                let text = other.to_string();
                assert!(
                    !text.contains("pooled connection"),
                    "a pool timeout: {text}"
                );
                assert!(started.elapsed() < RECOVERY_BOUND, "never refused: {text}");
            }
            Ok(id) => panic!("a node with another offset issued {id}"),
        }
    };
    assert!(
        refused.contains("changed its identity") && refused.contains("offset 1 → 0"),
        "{refused}"
    );
    println!("refused after {:?}: {refused}", started.elapsed());
    server.terminate();
    server.start_again(&["offset", "1"]).unwrap();
    let answered = Instant::now();
    loop {
        if client.next_snowflake("orders").await.is_ok() {
            break;
        }
        assert!(answered.elapsed() < RECOVERY_BOUND, "not used again");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One master and one replica on different releases: IDs issued on the master, a
/// failover to the replica, the old master following it (a full sync across releases the
/// other way), and a failback. Per key, snowflakes and segment values only go up.
fn fail_over_between(
    master_library: Option<std::path::PathBuf>,
    replica_library: Option<std::path::PathBuf>,
) {
    let on = |library: &Option<std::path::PathBuf>, offset: &str| {
        // The batches below are more than a millisecond's sequence: the restart fence, which
        // allows one per elapsed millisecond after a start, is off so that they never
        // depend on how soon after the start they come.
        let options = ServerOptions::module(&[
            "step",
            "2",
            "offset",
            offset,
            "snowflake-restart-fence",
            "no",
        ])
        .server_args(&["--appendonly", "yes"]);
        match library {
            Some(library) => options.module_library(library.clone()),
            None => options,
        }
    };
    let master = start(on(&master_library, "0"));
    let replica = start(on(&replica_library, "1").server_args(&[
        "--replicaof",
        "127.0.0.1",
        &master.port().to_string(),
    ]));
    replica.wait_in_sync();
    let mut snowflakes = Vec::new();
    let mut segments = Vec::new();
    let mut issue = |server: &Server| {
        let mut conn = server.conn();
        for _ in 0..200 {
            snowflakes.push(
                redis::cmd("SNOWFLAKE.NEXT")
                    .arg("orders")
                    .query::<i64>(&mut conn)
                    .unwrap(),
            );
            segments.push(
                redis::cmd("SEGMENT.NEXT")
                    .arg("invoice")
                    .query::<i64>(&mut conn)
                    .unwrap(),
            );
        }
        let batch: Vec<i64> = redis::cmd("SNOWFLAKE.NEXT")
            .arg("orders")
            .arg("COUNT")
            .arg(5000)
            .query(&mut conn)
            .unwrap();
        snowflakes.extend(batch);
    };
    let promote = |server: &Server| {
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query(&mut server.conn())
            .unwrap();
    };
    let follow = |server: &Server, master: &Server| {
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(master.port())
            .query(&mut server.conn())
            .unwrap();
        server.wait_in_sync();
    };
    issue(&master);
    master.wait_replicated(1);
    promote(&replica);
    follow(&master, &replica);
    issue(&replica);
    replica.wait_replicated(1);
    promote(&master);
    follow(&replica, &master);
    issue(&master);
    let versions = [&master, &replica].map(|server| version_of(&mut server.conn()));
    assert_ne!(
        versions[0], versions[1],
        "the two should run different releases"
    );
    idgen_tests::assert_strictly_increasing(&snowflakes);
    idgen_tests::assert_strictly_increasing(&segments);
    println!(
        "master on {}, replica on {}: {} snowflakes and {} segment values through a failover and a failback, none repeated",
        versions[0],
        versions[1],
        snowflakes.len(),
        segments.len()
    );
}

#[test]
fn a_replica_on_this_release_of_a_master_on_the_previous_one_takes_over_and_back() {
    fail_over_between(Some(previous_module_path()), None);
}

#[test]
fn a_replica_on_the_previous_release_of_a_master_on_this_one_takes_over_and_back() {
    fail_over_between(None, Some(previous_module_path()));
}

/// During a rolling upgrade on a server with atomic slot migration (Redis 8.4+: `CLUSTER
/// MIGRATION`; Valkey 9: `CLUSTER MIGRATESLOTS`), `idgen check --cluster` warns about a
/// node whose module release does not follow it, naming the node; on other servers it has
/// nothing to warn about.
#[test]
fn idgen_check_warns_about_a_node_whose_release_does_not_follow_atomic_slot_migration() {
    let cluster = Cluster::start();
    let handled = idgen_tests::info_field(
        &mut cluster.node_conn(cluster.ports()[0]),
        "atomic_slot_migration",
    ) == "handled";
    let replica = cluster
        .nodes()
        .into_iter()
        .find(|node| !node.master)
        .unwrap();
    cluster.restart_node_onto(replica.port, &previous_module_path());
    cluster.wait_healthy();
    let seed = cluster.urls()[0].clone();
    let run = idgen_tests::run_idgen(&["check", "--json", "--cluster", &seed]);
    let json: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{run:?}"));
    let resharding = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["check"] == "resharding")
        .unwrap_or_else(|| panic!("no resharding finding in {json:#}"));
    let message = resharding["message"].as_str().unwrap();
    if handled {
        assert_eq!(resharding["level"], "warn", "{resharding}");
        assert!(
            message.contains(&format!("127.0.0.1:{}", replica.port)),
            "{message}"
        );
    } else {
        println!("this server has no atomic slot migration: {message}");
        assert_eq!(resharding["level"], "pass", "{resharding}");
    }
}
