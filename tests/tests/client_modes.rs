//! The client against real redis-server processes with the module: each mode, failover
//! when a node dies mid-stream, the identity check, segment buffers and snowflake caches.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idgen_client::{
    Client, Error, IdFormat, SegmentOptions, Settings, SnowflakeCacheOptions, Topology,
};
use idgen_tests::Server;

fn nodes(servers: &[Server]) -> Topology {
    Topology::nodes(servers.iter().map(Server::url)).unwrap()
}

#[tokio::test]
async fn single_node_issues_decodes_and_counts() {
    let server = Server::start(&["step", "2", "offset", "1"]);
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    assert_eq!(client.deployment().step, 2);
    let id = client.next_snowflake("orders").await.unwrap();
    let batch = client
        .next_snowflakes_in_shard("orders", 100, 9)
        .await
        .unwrap();
    assert!(batch[0] > id && batch.windows(2).all(|w| w[0] < w[1]));
    // Local decode equals the server's SNOWFLAKE.DECODE.
    let local = client.decode(id).unwrap();
    let remote: Vec<redis::Value> = redis::cmd("SNOWFLAKE.DECODE")
        .arg(id)
        .query(&mut server.conn())
        .unwrap();
    let remote_ms: i64 = redis::from_redis_value_ref(&remote[1]).unwrap();
    let remote_offset: i64 = redis::from_redis_value_ref(&remote[11]).unwrap();
    assert_eq!(
        (local.unix_ms as i64, local.offset as i64),
        (remote_ms, remote_offset)
    );
    assert_eq!(client.decode(batch[0]).unwrap().shard, 9);
    // The client's local window is the server's SNOWFLAKE.RANGE.
    let from = local.unix_ms - 5;
    let (lowest, highest) = client.window(from, from + 10).unwrap();
    let remote: [i64; 2] = redis::cmd("SNOWFLAKE.RANGE")
        .arg(from)
        .arg(from + 10)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!([lowest.0, highest.0], remote);
    assert!(lowest.0 <= id && id <= highest.0);
    // The first range of a key after the server's start skips the segment fence.
    let fence = 1_000_000_000;
    let range = client.take_segment_range("invoice", 10).await.unwrap();
    assert_eq!(
        (range.first, range.last, range.step),
        (fence + 1, fence + 19, 2)
    );
    assert_eq!(
        client.next_segment_value("invoice").await.unwrap(),
        fence + 21
    );
    let metrics = client.metrics();
    assert_eq!(metrics.ids_served, 1 + 100 + 1);
    assert_eq!(metrics.ranges_fetched, 1);
    // Server refusals keep their meaning.
    let refused = client.next_snowflake("invoice").await.unwrap_err();
    assert!(
        matches!(refused, Error::Server { ref code, .. } if code == "WRONGTYPE"),
        "{refused}"
    );
    // A COUNT the server would refuse is refused by the client, naming the limit, and
    // never sent: the server issued nothing more and saw no refused call.
    let issued = issued_by(&server);
    let refusals = client.metrics().refusals;
    let calls_before = id_command_calls(&server);
    for (too_many, limit) in [
        (
            client.next_snowflakes("orders", 200_000).await,
            "1 to 100000 snowflake IDs",
        ),
        (
            client.next_snowflakes("orders", 0).await,
            "1 to 100000 snowflake IDs",
        ),
    ] {
        let error = too_many.unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument(text) if text.contains(limit)),
            "{error}"
        );
    }
    let error = client
        .take_segment_range("invoice:2", 1_000_000_001)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains(
            "count 1000000001 is out of range: one call takes 1 to 1000000000 segment values"
        ),
        "{error}"
    );
    assert_eq!(issued_by(&server), issued);
    assert_eq!(
        client.metrics().refusals,
        refusals,
        "nothing reached the server"
    );
    assert_eq!(
        id_command_calls(&server),
        calls_before,
        "no ID command reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_killed_mid_stream_costs_no_error_and_no_duplicate() {
    let mut servers: Vec<Server> = (0..3)
        .map(|offset| Server::start(&["step", "3", "offset", &offset.to_string()]))
        .collect();
    let client = Client::connect(nodes(&servers)).await.unwrap();
    let segments = client.segment_buffer("invoice", SegmentOptions::default());
    const TOTAL: usize = 100_000;
    let issued = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..32)
        .map(|task| {
            let (client, segments, issued) = (client.clone(), segments.clone(), issued.clone());
            tokio::spawn(async move {
                let mut snowflakes = Vec::new();
                let mut values = Vec::new();
                while issued.fetch_add(2, Ordering::Relaxed) < TOTAL {
                    snowflakes.push(
                        client
                            .next_snowflake(&format!("orders{}", task % 4))
                            .await
                            .unwrap(),
                    );
                    values.push(segments.next().await.unwrap());
                }
                (snowflakes, values)
            })
        })
        .collect();
    // Kill a node once a third of the stream has gone by.
    while issued.load(Ordering::Relaxed) < TOTAL / 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    servers[1].kill();
    let mut snowflakes = HashSet::new();
    let mut values = HashSet::new();
    for task in tasks {
        let (s, v) = task.await.expect("no task saw an error");
        for id in s {
            assert!(snowflakes.insert(id), "duplicate snowflake {id}");
        }
        for value in v {
            assert!(values.insert(value), "duplicate segment value {value}");
        }
    }
    let metrics = client.metrics();
    println!(
        "node killed mid-stream: {} snowflake IDs and {} segment values, 0 duplicates, \
         0 errors surfaced; {} failovers, {} transport errors seen inside the client",
        snowflakes.len(),
        values.len(),
        metrics.failovers,
        metrics.transport_errors
    );
    assert!(snowflakes.len() + values.len() >= TOTAL);
    assert!(
        metrics.transport_errors > 0,
        "the kill should have been seen"
    );
}

#[tokio::test]
async fn a_bad_deployment_is_refused_naming_the_nodes() {
    let a = Server::start(&["step", "3", "offset", "0"]);
    let b = Server::start(&["step", "3", "offset", "0"]);
    let error = Client::connect(nodes(&[a, b]))
        .await
        .expect_err("shared offset refused");
    let text = error.to_string();
    assert!(
        matches!(error, Error::Deployment(_)) && text.contains("share offset 0"),
        "{text}"
    );

    let c = Server::start(&["step", "3", "offset", "0"]);
    let d = Server::start(&["step", "4", "offset", "1"]);
    let (c_port, d_port) = (c.port(), d.port());
    let error = Client::connect(nodes(&[c, d]))
        .await
        .expect_err("different steps refused");
    let text = error.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{c_port} has step 3")),
        "{text}"
    );
    assert!(
        text.contains(&format!("127.0.0.1:{d_port} has step 4")),
        "{text}"
    );
}

/// A node restarted with another node's offset would issue IDs in that node's residue
/// class. The client checks every node again when it reconnects and stops using one whose
/// identity changed; a node unreachable at connect is checked when it first answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_comes_back_with_another_identity_is_not_used() {
    let a = Server::start(&["step", "3", "offset", "0"]);
    let mut b = Server::start(&["step", "3", "offset", "1"]);
    // The third node is down at connect.
    let mut c = Server::start(&["step", "3", "offset", "0"]);
    c.terminate();
    // Failed nodes are tried again after 50 ms, so both come back many times below.
    let settings = Settings::default()
        .node_retry_after(Duration::from_millis(50))
        .connect_timeout(Duration::from_millis(200));
    let topology = Topology::nodes([a.url(), b.url(), c.url()]).unwrap();
    let client = Client::connect_with(topology, settings).await.unwrap();
    // Round-robin reaches every node; c is skipped while it is down.
    for _ in 0..30 {
        client.next_snowflake("k").await.unwrap();
    }
    assert_eq!(issued_by(&b), 10, "b served its share before the restart");

    // b comes back with a's offset, and c comes up with a's offset too.
    b.terminate();
    b.start_again(&["offset", "0"]).unwrap();
    c.start_again(&[]).unwrap();
    let mut offsets = HashSet::new();
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        let id = client.next_snowflake("k").await.unwrap();
        offsets.insert(client.decode(id).unwrap().offset);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(offsets, HashSet::from([0]), "only a serves");
    assert_eq!(
        issued_by(&b),
        0,
        "b, restarted with offset 0, issued nothing"
    );
    assert_eq!(
        issued_by(&c),
        0,
        "c, which shares a's offset, issued nothing"
    );
}

/// The ID commands' call counts on a server, answered or refused (`INFO commandstats`).
fn id_command_calls(server: &Server) -> Vec<String> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.conn())
        .unwrap();
    stats
        .lines()
        .filter(|line| {
            line.starts_with("cmdstat_snowflake.") || line.starts_with("cmdstat_segment.")
        })
        .map(str::to_string)
        .collect()
}

/// Snowflake IDs a server has issued since it started.
fn issued_by(server: &Server) -> u64 {
    idgen_tests::info_field(&mut server.conn(), "snowflake_ids_issued")
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_segment_buffer_under_64_tasks_hands_out_each_value_once() {
    let server = Server::start(&["step", "4", "offset", "3"]);
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    let options = SegmentOptions::default()
        .initial_size(100)
        .min_size(50)
        .max_size(5000);
    let buffer = client.segment_buffer("seq", options);
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let buffer = buffer.clone();
            tokio::spawn(async move {
                let mut values = Vec::with_capacity(2000);
                for _ in 0..2000 {
                    values.push(buffer.next().await.unwrap());
                }
                values
            })
        })
        .collect();
    let mut all = HashSet::new();
    for task in tasks {
        for value in task.await.unwrap() {
            assert!(all.insert(value), "value {value} handed out twice");
        }
    }
    assert_eq!(all.len(), 64 * 2000);
    // Every value lies in ranges the server handed out: this instance's class, between
    // the first value and the counter's final high-water mark.
    let mark: i64 = redis::cmd("GET")
        .arg("seq")
        .query(&mut server.conn())
        .unwrap();
    assert!(all.iter().all(|&v| v % 4 == 3 && v >= 3 && v <= mark));
    let metrics = client.metrics();
    println!(
        "64 tasks: {} values from {} ranges (next range size {})",
        all.len(),
        metrics.ranges_fetched,
        buffer.next_range_size()
    );
}

#[tokio::test]
async fn the_next_range_is_fetched_before_the_current_one_runs_out() {
    let server = Server::start(&["segment-fence", "0"]);
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    let buffer = client.segment_buffer("k", SegmentOptions::default()); // 1000 values, prefetch at 10%
    for expected in 1..=150 {
        assert_eq!(buffer.next().await.unwrap(), expected);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.metrics().ranges_fetched < 2 {
        assert!(Instant::now() < deadline, "no prefetch happened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // 850 values of the first range are still unused, and the second is already here.
    for expected in 151..=1000 {
        assert_eq!(buffer.next().await.unwrap(), expected);
    }
    let fetched_before_switch = client.metrics().ranges_fetched;
    let first_of_second = buffer.next().await.unwrap();
    assert_eq!(first_of_second, 1001);
    assert_eq!(
        fetched_before_switch, 2,
        "the switch used the prefetched range"
    );
}

#[tokio::test]
async fn a_snowflake_cache_prefetches_and_never_hands_out_stale_ids() {
    let server = Server::start(&[]);
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    let options = SnowflakeCacheOptions::default()
        .batch(100)
        .max_age(Duration::from_millis(200));
    let cache = client.snowflake_cache("k", options);
    let first = cache.next().await.unwrap();
    let mut ids = vec![first];
    for _ in 0..60 {
        ids.push(cache.next().await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // The first batch (16 IDs) ran low: refills were started in the background.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.metrics().snowflake_batches_fetched < 2 {
        assert!(Instant::now() < deadline, "no background refill");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        cache.cached(),
        0,
        "everything cached is now older than max_age"
    );
    let before = client.metrics().snowflake_batches_fetched;
    let fresh = cache.next().await.unwrap();
    assert_eq!(
        client.metrics().snowflake_batches_fetched,
        before + 1,
        "the stale batches were dropped and a new one fetched"
    );
    assert!(fresh > *ids.last().unwrap());
    // The same IDs as strings that sort like the numbers.
    let as_id = cache.next_id().await.unwrap();
    let from_client = client.next_snowflake_id("k").await.unwrap();
    assert!(i64::from(as_id) > fresh && from_client > as_id);
    let (a, b) = (
        as_id.format(IdFormat::Base62),
        from_client.format(IdFormat::Base62),
    );
    assert!(a < b && a.len() == 11, "{a} {b}");
}
