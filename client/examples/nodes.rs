//! Several independent masters, each with its own offset. Any node serves any key; stop one
//! while this runs and the IDs keep coming from the others.
//!
//! ```sh
//! cargo run -p idgen-client --example nodes -- redis://127.0.0.1:7001/ redis://127.0.0.1:7002/
//! ```

use std::time::Duration;

use idgen_client::{Client, Topology};

#[tokio::main]
async fn main() -> Result<(), idgen_client::Error> {
    let urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        eprintln!("usage: nodes URL [URL ...]   (each a Redis with idgen and its own offset)");
        std::process::exit(2);
    }
    let client = Client::connect(Topology::nodes(urls)?).await?;
    for node in &client.deployment().nodes {
        println!(
            "{} has offset {} of step {}",
            node.address, node.offset, node.step
        );
    }
    for _ in 0..10 {
        let id = client.next_snowflake("orders").await?;
        println!("{id} from offset {}", client.decode(id)?.offset);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("metrics: {:?}", client.metrics());
    Ok(())
}
