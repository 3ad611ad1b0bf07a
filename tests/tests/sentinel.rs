//! A Sentinel-managed deployment — one master, two replicas, three sentinels, AOF on and
//! default idgen settings — used through the client's `Topology::sentinel` by many tasks
//! while the master is killed (SIGKILL), Sentinel promotes a replica, the old master comes
//! back from its AOF, and an operator's `SENTINEL FAILOVER` moves the master again.
//!
//! Prints the figures (IDs, duplicates, errors seen by callers, longest time without an
//! answer): run with `--nocapture` to see them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idgen_client::{Client, SegmentOptions, Settings, SnowflakeCacheOptions, Topology};
use idgen_tests::{
    acl_log, count_duplicates, create_acl_user, Sentinels, Server, ServerOptions,
    DOCUMENTED_ONE_NODE_GRANTS, SENTINEL_MASTER_NAME,
};

/// A sentinel considers the master down after this long without an answer (Redis's
/// default is 30 s; short here so that the test runs in seconds).
const DOWN_AFTER_MS: u64 = 1000;

fn data_node(offset: &str) -> ServerOptions {
    ServerOptions::module(&["step", "4", "offset", offset]).server_args(&["--appendonly", "yes"])
}

fn start(options: ServerOptions) -> Server {
    Server::start_with(options).unwrap_or_else(|failure| panic!("{}", failure.log))
}

fn replica_of(master: &Server, offset: &str) -> Server {
    let replica = start(data_node(offset).server_args(&[
        "--replicaof",
        "127.0.0.1",
        &master.port().to_string(),
    ]));
    replica.wait_in_sync();
    replica
}

/// Waits until every sentinel knows the `replicas` and the other sentinels: before that a
/// failover has no candidate or no quorum.
fn wait_until_sentinels_see_everything(sentinels: &Sentinels, replicas: u32) {
    let count = sentinels.urls().len();
    let others = count as u32 - 1;
    let deadline = Instant::now() + Duration::from_secs(30);
    for index in 0..count {
        let mut conn = sentinels.conn(index);
        loop {
            let fields: std::collections::HashMap<String, String> = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(SENTINEL_MASTER_NAME)
                .query(&mut conn)
                .unwrap();
            let count = |name: &str| fields.get(name).and_then(|v| v.parse::<u32>().ok());
            if count("num-slaves") == Some(replicas) && count("num-other-sentinels") == Some(others)
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sentinels never saw everything: {fields:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Waits until `server` answers as a replica (the sentinels demote a master they failed
/// over from only after promoting the new one; until then it still issues, from its own
/// offset).
fn wait_demoted(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.info_value("replication", "role").as_deref() != Some("slave") {
        assert!(
            Instant::now() < deadline,
            "{} was never demoted",
            server.port()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the callers saw.
#[derive(Default)]
struct Seen {
    snowflakes: Vec<i64>,
    /// (key, value)
    segments: Vec<(String, i64)>,
    /// When each call was answered.
    answered_at: Vec<Instant>,
    errors: Vec<String>,
}

/// Issues until `stop`: plain calls, a segment buffer and a snowflake cache, spread over
/// four keys.
async fn issue(
    task: usize,
    client: Client,
    stop: Arc<AtomicBool>,
    in_phase: Arc<AtomicU64>,
) -> Seen {
    let mut seen = Seen::default();
    let buffer = client.segment_buffer("buffered", SegmentOptions::default().initial_size(200));
    let cache = client.snowflake_cache("cached", SnowflakeCacheOptions::default().batch(200));
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let key = (task + round) % 4;
        let result = match round % 4 {
            0 => client
                .next_snowflake(&format!("order{key}"))
                .await
                .map(|id| {
                    seen.snowflakes.push(id);
                }),
            1 => {
                let name = format!("invoice{key}");
                client
                    .next_segment_value(&name)
                    .await
                    .map(|value| seen.segments.push((name, value)))
            }
            2 => buffer
                .next()
                .await
                .map(|value| seen.segments.push(("buffered".into(), value))),
            _ => cache.next().await.map(|id| seen.snowflakes.push(id)),
        };
        match result {
            Ok(()) => {
                seen.answered_at.push(Instant::now());
                in_phase.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                seen.errors.push(error.to_string());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    seen
}

/// Waits until the callers have had `calls` answers since the last call.
async fn let_callers_issue(in_phase: &AtomicU64, calls: u64) {
    in_phase.store(0, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(60);
    while in_phase.load(Ordering::Relaxed) < calls {
        assert!(
            Instant::now() < deadline,
            "the callers got only {} answers in 60 s",
            in_phase.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_sentinel_failovers_without_duplicates() {
    let mut first_master = start(data_node("0"));
    let replicas = [
        replica_of(&first_master, "1"),
        replica_of(&first_master, "2"),
    ];
    let sentinels = Sentinels::start(3, first_master.port(), DOWN_AFTER_MS);
    wait_until_sentinels_see_everything(&sentinels, 2);

    let topology = Topology::sentinel(SENTINEL_MASTER_NAME, sentinels.urls()).unwrap();
    let settings = Settings::default().failover_retry_for(Duration::from_secs(30));
    let client = Client::connect_with(topology, settings).await.unwrap();
    assert_eq!(
        client.deployment().nodes.len(),
        3,
        "the master and both replicas are checked at connect"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let in_phase = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..16)
        .map(|task| tokio::spawn(issue(task, client.clone(), stop.clone(), in_phase.clone())))
        .collect();

    let_callers_issue(&in_phase, 20_000).await;
    let killed_at = Instant::now();
    first_master.kill();
    let second = tokio::task::block_in_place(|| {
        sentinels.wait_for_new_master(first_master.port(), Duration::from_secs(30))
    });
    let promoted_after = killed_at.elapsed();
    let_callers_issue(&in_phase, 20_000).await;

    // The old master returns from its AOF (a master again, until the sentinels make it a
    // replica of the new one).
    tokio::task::block_in_place(|| {
        first_master
            .start_again(&[])
            .unwrap_or_else(|failure| panic!("{}", failure.log));
        wait_demoted(&first_master);
        first_master.wait_in_sync();
    });
    let_callers_issue(&in_phase, 20_000).await;

    // An operator's failover, with every node up.
    tokio::task::block_in_place(|| {
        sentinels.failover();
        sentinels.wait_for_new_master(second, Duration::from_secs(30));
        let demoted = replicas.iter().find(|replica| replica.port() == second);
        wait_demoted(demoted.expect("the second master was one of the replicas"));
    });
    let_callers_issue(&in_phase, 20_000).await;
    stop.store(true, Ordering::Relaxed);

    let mut all = Seen::default();
    for task in tasks {
        let seen = task.await.unwrap();
        all.snowflakes.extend(seen.snowflakes);
        all.segments.extend(seen.segments);
        all.answered_at.extend(seen.answered_at);
        all.errors.extend(seen.errors);
    }
    all.answered_at.sort();
    let longest_gap = all
        .answered_at
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default();
    let metrics = client.metrics();
    println!(
        "Sentinel failover (SIGKILL, old master back, SENTINEL FAILOVER): {} snowflake IDs, \
         {} dup; {} segment values, {} dup; {} errors seen by callers; master promoted {:?} \
         after the kill; longest time without an answer {:?}; client: {} master changes \
         followed, {} transport errors retried",
        all.snowflakes.len(),
        count_duplicates(&all.snowflakes),
        all.segments.len(),
        count_duplicates(&all.segments),
        all.errors.len(),
        promoted_after,
        longest_gap,
        metrics.failovers,
        metrics.transport_errors
    );
    assert_eq!(count_duplicates(&all.snowflakes), 0);
    assert_eq!(count_duplicates(&all.segments), 0);
    assert!(
        all.errors.is_empty(),
        "callers saw errors while a master was reachable within the retry window: {:?}",
        &all.errors[..all.errors.len().min(5)]
    );
    assert!(metrics.failovers >= 2, "both master changes were followed");
    drop(replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_sharing_the_masters_offset_is_refused_at_connect() {
    let master = start(data_node("0"));
    let _replica = replica_of(&master, "0");
    let sentinels = Sentinels::start(1, master.port(), DOWN_AFTER_MS);
    tokio::task::block_in_place(|| wait_until_sentinels_see_everything(&sentinels, 1));
    let topology = Topology::sentinel(SENTINEL_MASTER_NAME, sentinels.urls()).unwrap();
    let error = Client::connect(topology).await.unwrap_err().to_string();
    assert!(error.contains("share offset 0"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_added_later_that_clashes_is_never_used_even_when_promoted() {
    let master = start(data_node("0"));
    // Never promoted (priority 0): the only candidate will be the bad replica added later.
    let _good = {
        let replica = start(data_node("1").server_args(&[
            "--replicaof",
            "127.0.0.1",
            &master.port().to_string(),
            "--replica-priority",
            "0",
        ]));
        replica.wait_in_sync();
        replica
    };
    let sentinels = Sentinels::start(3, master.port(), DOWN_AFTER_MS);
    let topology = Topology::sentinel(SENTINEL_MASTER_NAME, sentinels.urls()).unwrap();
    let settings = Settings::default().failover_retry_for(Duration::from_secs(2));
    let client = Client::connect_with(topology, settings).await.unwrap();
    client.next_snowflake("orders").await.unwrap();

    // Misconfigured: the same offset as the master.
    let bad = replica_of(&master, "0");
    tokio::task::block_in_place(|| {
        wait_until_sentinels_see_everything(&sentinels, 2);
        sentinels.failover();
        sentinels.wait_for_new_master(master.port(), Duration::from_secs(30));
        wait_demoted(&master);
    });
    let error = client
        .next_snowflake("orders")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("is not used") && error.contains("offset 0"),
        "{error}"
    );
    let mut conn = bad.conn();
    assert_eq!(
        idgen_tests::info_field(&mut conn, "snowflake_ids_issued"),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_user_behind_password_protected_sentinels_follows_a_failover() {
    let master = start(data_node("0"));
    let replica = replica_of(&master, "1");
    // docs/sentinel.md: the one-node grants of docs/client.md, plus ROLE. ACL users are per
    // node (ACL SETUSER is not replicated): every data node gets the user.
    let rules: Vec<&str> = DOCUMENTED_ONE_NODE_GRANTS
        .into_iter()
        .chain(["+role"])
        .collect();
    for node in [&master, &replica] {
        create_acl_user(node, "ids", "pw", &rules);
    }
    let sentinels =
        Sentinels::start_protected(3, master.port(), DOWN_AFTER_MS, Some("sentinel-secret"));
    tokio::task::block_in_place(|| wait_until_sentinels_see_everything(&sentinels, 1));
    let unauthenticated = redis::Client::open(sentinels.urls()[0].replace(":sentinel-secret@", ""))
        .unwrap()
        .get_connection()
        .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn));
    assert!(
        unauthenticated.is_err(),
        "the sentinels answered without the password"
    );

    let topology = Topology::sentinel(SENTINEL_MASTER_NAME, sentinels.urls())
        .unwrap()
        .data_nodes("redis://ids:pw@any-host/")
        .unwrap();
    let settings = Settings::default().failover_retry_for(Duration::from_secs(30));
    let client = Client::connect_with(topology, settings).await.unwrap();
    assert_eq!(
        client.deployment().nodes.len(),
        2,
        "master and replica checked"
    );
    let buffer = client.segment_buffer("invoice", SegmentOptions::default().initial_size(10));
    let mut snowflakes = vec![client.next_snowflake("orders:1").await.unwrap()];
    let mut segments = vec![buffer.next().await.unwrap()];

    tokio::task::block_in_place(|| {
        sentinels.failover();
        sentinels.wait_for_new_master(master.port(), Duration::from_secs(30));
        wait_demoted(&master);
    });
    for _ in 0..100 {
        snowflakes.push(client.next_snowflake("orders:1").await.unwrap());
        segments.push(buffer.next().await.unwrap());
    }
    assert_eq!(client.metrics().failovers, 1, "the new master was followed");
    assert_eq!(count_duplicates(&snowflakes), 0);
    assert_eq!(count_duplicates(&segments), 0);
    let on_new_master = client.decode(*snowflakes.last().unwrap()).unwrap();
    assert_eq!(on_new_master.offset, 1, "issued by the promoted replica");
    for node in [&master, &replica] {
        assert_eq!(acl_log(node), [], "node {} denied a command", node.port());
    }
}
