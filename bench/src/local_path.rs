//! The segment buffer's local path: `SegmentBuffer::next` (one buffer shared by the tasks)
//! and `LocalSegmentBuffer::next` (a handle per task) against a `fetch_add` loop in the
//! same kind of tokio tasks. One measurement, reported by the full run's targets and by the
//! buffers section.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use idgen_client::{Client, SegmentBuffer, SegmentOptions};

use crate::stats::{grouped, median};

/// The local path at one number of tasks: values per second, each the median of the rounds.
#[derive(Debug, Clone)]
pub struct LocalPath {
    pub tasks: u32,
    /// `SegmentBuffer::next`, shared by the tasks.
    pub shared: f64,
    /// `LocalSegmentBuffer::next`, a handle per task.
    pub handles: f64,
    /// `std::future::ready(counter.fetch_add(1)).await` on one counter shared by the tasks.
    pub baseline: f64,
}

impl LocalPath {
    pub fn shared_ratio(&self) -> f64 {
        self.shared / self.baseline
    }

    pub fn handles_ratio(&self) -> f64 {
        self.handles / self.baseline
    }

    /// One line of progress.
    pub fn print(&self) {
        eprintln!(
            "local path, {} tasks: next {:.0} ({:.2}), handles {:.0} ({:.2}), fetch_add {:.0}",
            self.tasks,
            self.shared,
            self.shared_ratio(),
            self.handles,
            self.handles_ratio(),
            self.baseline
        );
    }
}

/// The three loops in `tasks` tokio tasks, `per_task` values each, every result through
/// `black_box`, interleaved in each of `rounds` rounds; each buffer holds one range for the
/// whole loop (the local path is timed, not range switches).
pub async fn measure(client: &Client, tasks: u32, per_task: u64, rounds: usize) -> LocalPath {
    let (mut shared, mut handles, mut baseline) = (Vec::new(), Vec::new(), Vec::new());
    let values = per_task * u64::from(tasks);
    for round in 0..rounds {
        let buffer = one_range_buffer(client, &format!("local-{tasks}-{round}"), values).await;
        let rate = tasks_rate(tasks, per_task, || {
            let buffer = buffer.clone();
            async move {
                for _ in 0..per_task {
                    std::hint::black_box(buffer.next().await.unwrap());
                }
            }
        });
        shared.push(rate.await);

        let buffer = one_range_buffer(client, &format!("handles-{tasks}-{round}"), values).await;
        let rate = tasks_rate(tasks, per_task, || {
            let mut handle = buffer.local();
            async move {
                for _ in 0..per_task {
                    std::hint::black_box(handle.next().await.unwrap());
                }
            }
        });
        handles.push(rate.await);

        let counter = Arc::new(AtomicU64::new(0));
        let rate = tasks_rate(tasks, per_task, || {
            let counter = counter.clone();
            async move {
                for _ in 0..per_task {
                    let value = std::future::ready(counter.fetch_add(1, Ordering::Relaxed));
                    std::hint::black_box(value.await);
                }
            }
        });
        baseline.push(rate.await);
    }
    LocalPath {
        tasks,
        shared: median(&shared),
        handles: median(&handles),
        baseline: median(&baseline),
    }
}

/// Values per second of `tasks` tokio tasks, each `one_task()`: a loop that takes
/// `per_task` values. Spawning is inside the timed span, as it is for every loop timed
/// with it.
async fn tasks_rate<Task>(tasks: u32, per_task: u64, mut one_task: impl FnMut() -> Task) -> f64
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

/// A buffer whose one range holds `values` more after its first (and the blocks its handles
/// hold back).
pub async fn one_range_buffer(client: &Client, key: &str, values: u64) -> SegmentBuffer {
    let size = values + 1 + 64 * 64;
    let options = SegmentOptions::default()
        .initial_size(size)
        .max_size(size)
        .min_size(size);
    let buffer = client.segment_buffer(key, options);
    buffer.next().await.unwrap();
    buffer
}

/// The rows as a markdown table.
pub fn table(rows: &[LocalPath]) -> String {
    let mut out = String::from(
        "| tasks | SegmentBuffer::next (values/s) | ratio | LocalSegmentBuffer::next (values/s) | ratio | fetch_add (values/s) |\n\
         |--:|--:|--:|--:|--:|--:|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | {:.2} | {} | {:.2} | {} |\n",
            row.tasks,
            grouped(row.shared),
            row.shared_ratio(),
            grouped(row.handles),
            row.handles_ratio(),
            grouped(row.baseline),
        ));
    }
    out
}
