//! Client side: unbatched `next_snowflake` against the raw server at the same concurrency,
//! local segment values against a plain `AtomicU64::fetch_add` loop, the latency of single
//! calls around range switches, and in-process generators for context.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idgen_client::{Client, SegmentOptions, Topology};
use idgen_tests::Server;

use crate::driver::{requests_per_second, Load};
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
    /// `SegmentBuffer::next` against `AtomicU64::fetch_add`.
    pub local: Vec<SideBySide>,
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

async fn segment_rate(client: &Client, tasks: u32, per_task: u64) -> f64 {
    let options = SegmentOptions::default()
        .initial_size(1_000_000)
        .max_size(10_000_000);
    let buffer = client.segment_buffer("local", options);
    buffer.next().await.unwrap(); // the first range, fetched before timing
    buffer_rate(&buffer, tasks, per_task).await
}

/// Values per second that `tasks` tokio tasks take from `buffer`, `per_task` each, every
/// value through `black_box`.
pub async fn buffer_rate(buffer: &idgen_client::SegmentBuffer, tasks: u32, per_task: u64) -> f64 {
    tasks_rate(tasks, per_task, || {
        let buffer = buffer.clone();
        async move {
            for _ in 0..per_task {
                std::hint::black_box(buffer.next().await.unwrap());
            }
        }
    })
    .await
}

/// Values per second of `tasks` tokio tasks, each `one_task()`: a loop that takes
/// `per_task` values. Spawning is inside the timed span, as it is for every loop timed
/// with it.
pub async fn tasks_rate<Task>(tasks: u32, per_task: u64, mut one_task: impl FnMut() -> Task) -> f64
where
    Task: std::future::Future<Output = ()> + Send + 'static,
{
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks).map(|_| tokio::spawn(one_task())).collect();
    for handle in handles {
        handle.await.unwrap();
    }
    (u64::from(tasks) * per_task) as f64 / started.elapsed().as_secs_f64()
}

fn atomic_rate(threads: u32, per_thread: u64) -> f64 {
    let counter = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let counter = counter.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    std::hint::black_box(counter.fetch_add(1, Ordering::Relaxed));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    (threads as u64 * per_thread) as f64 / started.elapsed().as_secs_f64()
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
        let mut segment_rates = Vec::new();
        let mut atomic_rates = Vec::new();
        for _ in 0..rounds {
            segment_rates.push(segment_rate(&client, tasks, per_task / u64::from(tasks)).await);
            atomic_rates.push(atomic_rate(tasks, per_task / u64::from(tasks)));
        }
        local.push(SideBySide::from_rounds(
            "local segment vs atomic",
            tasks,
            &segment_rates,
            &atomic_rates,
        ));
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
