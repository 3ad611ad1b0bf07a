//! The seed comparison: time to produce 10^5, 10^6, 10^7 and 5·10^7 IDs with each approach,
//! to set beside published tables. Approaches that make one round trip per ID are measured
//! at 10^5 and extrapolated beyond (marked so in the report); the others are measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idgen_client::{Client, SegmentOptions, Topology};
use idgen_tests::Server;

use crate::server_side::{load_lua_generator, MODULE_ARGS};

/// Time for one count: measured, or extrapolated from a measured rate.
#[derive(Debug, Clone, Copy)]
pub enum Timing {
    Measured(Duration),
    Extrapolated(Duration),
}

#[derive(Debug, Clone)]
pub struct Row {
    pub approach: String,
    pub timings: Vec<Timing>,
}

pub const COUNTS: [u64; 4] = [100_000, 1_000_000, 10_000_000, 50_000_000];

/// Times `produce(n)` for the counts up to `limit`; extrapolates the rest from the last.
fn row(approach: &str, limit: u64, counts: &[u64], mut produce: impl FnMut(u64)) -> Row {
    let mut timings = Vec::new();
    let mut rate = 0.0;
    for &n in counts {
        if n <= limit {
            let started = Instant::now();
            produce(n);
            let elapsed = started.elapsed();
            rate = n as f64 / elapsed.as_secs_f64();
            timings.push(Timing::Measured(elapsed));
        } else {
            timings.push(Timing::Extrapolated(Duration::from_secs_f64(
                n as f64 / rate,
            )));
        }
    }
    eprintln!("seed: {approach} done");
    Row {
        approach: approach.to_string(),
        timings,
    }
}

fn one_per_call(server: &Server, command: &[&str]) -> impl FnMut(u64) {
    let mut conn = server.conn();
    let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    move |n| {
        for _ in 0..n {
            let _: redis::Value = redis::cmd(&command[0])
                .arg(&command[1..])
                .query(&mut conn)
                .unwrap();
        }
    }
}

pub async fn run(counts: &[u64]) -> Vec<Row> {
    let mut rows = Vec::new();
    let server = Server::start(&MODULE_ARGS);
    let sha = load_lua_generator(&server);

    rows.push(row(
        "Redis INCR, one round trip per ID",
        100_000,
        counts,
        one_per_call(&server, &["INCR", "k"]),
    ));
    rows.push(row(
        "Lua generator, one round trip per ID",
        100_000,
        counts,
        one_per_call(&server, &["EVALSHA", &sha, "1", "gen", "1", "0"]),
    ));
    rows.push(row(
        "SNOWFLAKE.NEXT, one round trip per ID",
        100_000,
        counts,
        one_per_call(&server, &["SNOWFLAKE.NEXT", "s"]),
    ));
    let mut conn = server.conn();
    rows.push(row(
        "SNOWFLAKE.NEXT COUNT 10000 batches",
        u64::MAX,
        counts,
        |n| {
            let mut left = n;
            while left > 0 {
                let count = left.min(10_000);
                let reply: redis::RedisResult<Vec<i64>> = redis::cmd("SNOWFLAKE.NEXT")
                    .arg("b")
                    .arg("COUNT")
                    .arg(count)
                    .query(&mut conn);
                match reply {
                    Ok(_) => left -= count,
                    // Above 4,096,000 IDs/s the clock runs ahead to the drift bound: wait a little.
                    Err(error) if error.code() == Some("DRIFT") => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(error) => panic!("{error}"),
                }
            }
        },
    ));
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    let buffer = client.segment_buffer(
        "seed",
        SegmentOptions::default()
            .initial_size(1_000_000)
            .max_size(10_000_000),
    );
    let runtime = tokio::runtime::Handle::current();
    rows.push(tokio::task::block_in_place(|| {
        row(
            "idgen-client SegmentBuffer, 1 task (local)",
            u64::MAX,
            counts,
            |n| {
                runtime.block_on(async {
                    for _ in 0..n {
                        std::hint::black_box(buffer.next().await.unwrap());
                    }
                })
            },
        )
    }));
    let counter = AtomicU64::new(0);
    rows.push(row(
        "AtomicU64::fetch_add, 1 thread (in process)",
        u64::MAX,
        counts,
        |n| {
            for _ in 0..n {
                std::hint::black_box(counter.fetch_add(1, Ordering::Relaxed));
            }
        },
    ));
    rows.push(row("uuid v7 (in process)", u64::MAX, counts, |n| {
        for _ in 0..n {
            std::hint::black_box(uuid::Uuid::now_v7());
        }
    }));
    rows
}
