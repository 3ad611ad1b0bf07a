//! A master and replicas managed by Redis Sentinel: IDs from whichever node is master now.
//!
//! ```sh
//! cargo run -p idgen-client --example sentinel -- ids 127.0.0.1:26379 127.0.0.1:26380 127.0.0.1:26381
//! ```
//!
//! The first argument is the master's name (`sentinel monitor <name> …`), the others are
//! sentinels, as `host:port` or as redis-rs URLs (`redis://user:password@host:port/` if the
//! sentinels require a password). `IDGEN_DATA_NODES` may give the data nodes' credentials
//! and TLS as a URL whose host is ignored: `redis://app:secret@any/`.

use idgen_client::{Client, Topology};

#[tokio::main]
async fn main() -> Result<(), idgen_client::Error> {
    let mut args = std::env::args().skip(1);
    let Some(master_name) = args.next() else {
        eprintln!("usage: sentinel MASTER_NAME HOST:PORT [HOST:PORT…]");
        std::process::exit(2);
    };
    let sentinels: Vec<String> = args
        .map(|address| {
            if address.contains("://") {
                address
            } else {
                format!("redis://{address}/")
            }
        })
        .collect();
    let mut topology = Topology::sentinel(master_name, sentinels)?;
    if let Ok(template) = std::env::var("IDGEN_DATA_NODES") {
        topology = topology.data_nodes(template)?;
    }
    let client = Client::connect(topology).await?;
    let deployment = client.deployment();
    let nodes: Vec<String> = deployment
        .nodes
        .iter()
        .map(|node| format!("{} (offset {})", node.address, node.offset))
        .collect();
    println!(
        "deployment: step {}, master and replicas checked: {}",
        deployment.step,
        nodes.join(", ")
    );
    for _ in 0..3 {
        let id = client.next_snowflake("orders").await?;
        let parts = client.decode(id)?;
        println!("snowflake {id} from the node with offset {}", parts.offset);
    }
    println!(
        "segment value {}",
        client.next_segment_value("invoice").await?
    );
    Ok(())
}
