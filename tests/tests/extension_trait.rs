//! `IdgenAsyncCommands` on the redis-rs connections applications already have: a plain
//! multiplexed connection, a `ConnectionManager`, a pipeline of the `Cmd` builders, and an
//! async cluster connection.

use std::collections::HashMap;

use idgen_client::commands::build;
use idgen_client::{IdFormat, IdgenAsyncCommands};
use idgen_tests::{Cluster, Server};

#[tokio::test]
async fn the_commands_work_on_any_redis_rs_async_connection() {
    let server = Server::start(&["step", "4", "offset", "3", "snowflake-restart-fence", "no"]);
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let first: u64 = con.snowflake_next("orders").await.unwrap();
    let batch: Vec<u64> = con.snowflake_next_count("orders", 100).await.unwrap();
    assert!(batch[0] > first && batch.windows(2).all(|w| w[0] < w[1]));
    let sharded: Vec<i64> = con.snowflake_next_in_shard("orders", 2, 9).await.unwrap();
    let text: String = con
        .snowflake_next_as("orders", IdFormat::Base62)
        .await
        .unwrap();
    assert_eq!(text.len(), 11);
    let value: i64 = con.segment_next("invoice").await.unwrap();
    let (start, last, step): (i64, i64, i64) = con.segment_next_count("invoice", 10).await.unwrap();
    assert_eq!((start, last, step), (value + 4, value + 40, 4));
    let parts: HashMap<String, redis::Value> = con.snowflake_decode(sharded[0]).await.unwrap();
    assert_eq!(parts["shard"], redis::Value::Int(9));
    let identity: HashMap<String, String> = con.idgen_identity().await.unwrap();
    assert_eq!(identity["offset"], "3");
    let composed: i64 = con
        .snowflake_compose(1_795_392_000_000, 1, 3)
        .await
        .unwrap();
    let (lowest, highest): (i64, i64) = con
        .snowflake_range(1_795_392_000_000, 1_795_392_000_000)
        .await
        .unwrap();
    assert!(lowest <= composed && composed <= highest);

    let mut manager = client.get_connection_manager().await.unwrap();
    let managed: u64 = manager.snowflake_next("orders").await.unwrap();
    assert!(managed > batch[99]);

    let (a, b): (u64, u64) = redis::pipe()
        .add_command(build::snowflake_next("orders"))
        .add_command(build::snowflake_next("users"))
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(a > managed && a != b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn and_on_a_cluster_connection() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
    let mut con = client.get_async_connection().await.unwrap();
    let mut ids = Vec::new();
    for key in ["orders", "users", "events", "invoices"] {
        let id: u64 = con.snowflake_next(key).await.unwrap();
        ids.push(id);
        let _: i64 = con.segment_next(key.to_string() + ":n").await.unwrap();
    }
    idgen_tests::assert_unique(ids);
}
