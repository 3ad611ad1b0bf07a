//! Client side: unbatched `next_snowflake` against the raw server at the same concurrency,
//! local segment values against a `fetch_add` loop (`local_path.rs`), the latency of single
//! calls around range switches, and in-process generators for context.

use std::time::{Duration, Instant};

use idgen_client::{Client, SegmentOptions, Topology};
use idgen_tests::Server;

use crate::driver::{requests_per_second, Load};
use crate::local_path::{self, LocalPath};
use crate::server_side::MODULE_ARGS;
use crate::stats::{median, quantile};

/// Our path and its baseline at one number of tasks, each the median over the rounds.
#[derive(Debug, Clone)]
pub struct SideBySide {
    pub tasks: u32,
    /// IDs per second through redis-idgen.
    pub ours: f64,
    /// IDs per second of the baseline (the raw server, or an atomic counter).
    pub baseline: f64,
}

impl SideBySide {
    /// The medians of the rounds' rates, printed as progress.
    fn from_rounds(what: &str, tasks: u32, ours: &[f64], baseline: &[f64]) -> Self {
        let row = SideBySide {
            tasks,
            ours: median(ours),
            baseline: median(baseline),
        };
        eprintln!(
            "{what}, {tasks:>2} tasks: {:.0} vs {:.0} IDs/s",
            row.ours, row.baseline
        );
        row
    }

    pub fn ratio(&self) -> f64 {
        self.ours / self.baseline
    }
}

#[derive(Debug, Clone)]
pub struct SwitchLatency {
    pub calls: usize,
    pub switches: u64,
    pub p50: Duration,
    pub p9999: Duration,
    pub worst: Duration,
}

#[derive(Debug, Clone)]
pub struct Results {
    /// Client `next_snowflake` against redis-benchmark at the same concurrency.
    pub unbatched: Vec<SideBySide>,
    /// `SegmentBuffer::next` and `LocalSegmentBuffer::next` against `fetch_add`.
    pub local: Vec<LocalPath>,
    pub switch_latency: SwitchLatency,
    pub baselines: Vec<(String, f64)>,
}

const TASKS: [u32; 3] = [1, 8, 64];

async fn client_rate(client: &Client, tasks: u32, duration: Duration) -> f64 {
    let deadline = Instant::now() + duration;
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut count = 0u64;
                while Instant::now() < deadline {
                    client.next_snowflake("k").await.expect("next_snowflake");
                    count += 1;
                }
                count
            })
        })
        .collect();
    let started = Instant::now();
    let mut total = 0;
    for handle in handles {
        total += handle.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

async fn switch_latency(client: &Client, calls: usize) -> SwitchLatency {
    // Fixed 10,000-value ranges: a switch every 10,000 calls.
    let options = SegmentOptions::default()
        .initial_size(10_000)
        .min_size(10_000)
        .max_size(10_000);
    let buffer = client.segment_buffer("switches", options);
    let before = client.metrics().ranges_fetched;
    let mut durations = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        std::hint::black_box(buffer.next().await.unwrap());
        durations.push(started.elapsed());
    }
    durations.sort();
    SwitchLatency {
        calls,
        switches: client.metrics().ranges_fetched - before,
        p50: quantile(&durations, 0.5),
        p9999: quantile(&durations, 0.9999),
        worst: *durations.last().unwrap(),
    }
}

fn baselines(n: u64) -> Vec<(String, f64)> {
    let rate = |started: Instant| n as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for _ in 0..n {
        std::hint::black_box(uuid::Uuid::now_v7());
    }
    let uuid = rate(started);
    let mut generator = snowflake::SnowflakeIdGenerator::new(1, 1);
    let started = Instant::now();
    for _ in 0..n {
        std::hint::black_box(generator.generate());
    }
    let snowflake = rate(started);
    vec![
        ("uuid v7 (uuid crate, in process)".to_string(), uuid),
        (
            "rs-snowflake generate() (in process)".to_string(),
            snowflake,
        ),
    ]
}

pub async fn run(rounds: usize, scale: f64) -> Results {
    let server = Server::start(&MODULE_ARGS);
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .expect("connect");
    let duration = Duration::from_secs_f64((1.0 * scale).max(0.2));
    let mut unbatched = Vec::new();
    for tasks in TASKS {
        let mut client_rates = Vec::new();
        let mut raw_rates = Vec::new();
        for _ in 0..rounds {
            client_rates.push(client_rate(&client, tasks, duration).await);
            let load = Load {
                clients: tasks,
                pipeline: 1,
                requests: (40_000.0 * scale) as u64,
                // Beside the Rust client, which is not pinned either (`cpus`).
                pinned: false,
            };
            let command: Vec<String> = ["SNOWFLAKE.NEXT", "k"].map(String::from).to_vec();
            let port = server.port();
            raw_rates.push(
                tokio::task::spawn_blocking(move || requests_per_second(port, load, &command))
                    .await
                    .unwrap(),
            );
        }
        unbatched.push(SideBySide::from_rounds(
            "client unbatched vs raw",
            tasks,
            &client_rates,
            &raw_rates,
        ));
    }
    let per_task = (20_000_000.0 * scale) as u64;
    let mut local = Vec::new();
    for tasks in [1u32, 8] {
        let row = local_path::measure(&client, tasks, per_task / u64::from(tasks), rounds).await;
        row.print();
        local.push(row);
    }
    let switch_latency = switch_latency(&client, (2_000_000.0 * scale) as usize).await;
    let baselines = baselines((2_000_000.0 * scale) as u64);
    Results {
        unbatched,
        local,
        switch_latency,
        baselines,
    }
}
