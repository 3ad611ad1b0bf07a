//! One Redis server with the module: snowflake IDs, a batch, decoding, segment values.
//!
//! ```sh
//! scripts/demo.sh --keep                      # prints the port of a local Redis with idgen
//! cargo run -p idgen-client --example single -- redis://127.0.0.1:PORT/
//! ```
//!
//! Any redis-rs URL works: `rediss://host:port/` for TLS (`#insecure` at the end skips the
//! certificate check, for self-signed test certificates, with the `tls-rustls-insecure`
//! feature), `redis://user:password@host:port/`
//! for an ACL user.

use idgen_client::{Client, Topology};

#[tokio::main]
async fn main() -> Result<(), idgen_client::Error> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let client = Client::connect(Topology::single(url)?).await?;
    println!(
        "deployment: step {}, {} node(s)",
        client.deployment().step,
        client.deployment().nodes.len()
    );

    let id = client.next_snowflake("orders").await?;
    let parts = client.decode(id)?;
    println!(
        "snowflake {id}: unix_ms {}, shard {}, sequence {}, offset {}",
        parts.unix_ms, parts.shard, parts.sequence, parts.offset
    );

    let batch = client.next_snowflakes("orders", 5).await?;
    println!("a batch of 5 in one round trip: {batch:?}");

    let range = client.take_segment_range("invoice", 100).await?;
    println!(
        "segment range: {}..={} step {}",
        range.first, range.last, range.step
    );
    println!("metrics: {:?}", client.metrics());
    Ok(())
}
