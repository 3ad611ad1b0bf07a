//! Leaf-style local segments: values handed out in-process from ranges the server hands
//! out, many tasks at once, with the next range prefetched in the background; then a bulk
//! job whose tasks each take through a handle of their own (`buffer.local()`).
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

    // A bulk job: each task takes through a handle of its own, in blocks.
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let mut ids = buffer.local();
            tokio::spawn(async move {
                let mut last = 0;
                for _ in 0..1_000_000 {
                    last = ids.next().await?;
                }
                Ok::<i64, idgen_client::Error>(last)
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task")?;
    }
    println!(
        "8,000,000 values through 8 handles (buffer.local()) in {:?}; {} ranges fetched in all",
        started.elapsed(),
        client.metrics().ranges_fetched
    );
    Ok(())
}
