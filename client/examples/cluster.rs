//! A Redis Cluster whose nodes each have their own offset: commands are routed by key.
//!
//! ```sh
//! cargo run -p idgen-client --example cluster -- redis://127.0.0.1:7000/
//! ```

use idgen_client::{Client, Topology};

#[tokio::main]
async fn main() -> Result<(), idgen_client::Error> {
    let seeds: Vec<String> = std::env::args().skip(1).collect();
    if seeds.is_empty() {
        eprintln!("usage: cluster SEED_URL [SEED_URL ...]");
        std::process::exit(2);
    }
    let client = Client::connect(Topology::cluster(seeds)?).await?;
    println!(
        "checked {} cluster nodes (masters and replicas)",
        client.deployment().nodes.len()
    );
    for key in ["orders", "invoices", "users", "events"] {
        let id = client.next_snowflake(key).await?;
        println!(
            "{key}: {id} (issued by offset {})",
            client.decode(id)?.offset
        );
    }
    Ok(())
}
