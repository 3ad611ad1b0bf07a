//! Leaf-style local segments: values handed out in-process from ranges the server hands
//! out, many tasks at once, with the next range prefetched in the background.
//!
//! ```sh
//! cargo run --release -p idgen-client --example segments -- redis://127.0.0.1:PORT/
//! ```

use std::time::Instant;

use idgen_client::{Client, SegmentOptions, Topology};

#[tokio::main]
async fn main() -> Result<(), idgen_client::Error> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let client = Client::connect(Topology::single(url)?).await?;
    let buffer = client.segment_buffer("invoice", SegmentOptions::default());
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let buffer = buffer.clone();
            tokio::spawn(async move {
                let mut last = 0;
                for _ in 0..100_000 {
                    last = buffer.next().await?;
                }
                Ok::<i64, idgen_client::Error>(last)
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task")?;
    }
    let metrics = client.metrics();
    println!(
        "800,000 values in {:?} from {} ranges; the next range will hold {} values",
        started.elapsed(),
        metrics.ranges_fetched,
        buffer.next_range_size()
    );
    Ok(())
}
