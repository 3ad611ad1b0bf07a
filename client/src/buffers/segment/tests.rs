//! The segment buffer's rules on tokio's paused clock, with a counting source that takes a
//! set round trip: time moves only when a test advances it or every task waits on a timer.
//! "No wait" is checked as "tokio's clock did not move during `next`".

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::buffers::source::counting::CountingSource;

fn buffer_with(source: &Arc<CountingSource>, options: SegmentOptions) -> SegmentBuffer {
    SegmentBuffer::new(source.clone(), "k", options)
}

fn sizes(source: &CountingSource) -> Vec<u64> {
    source.range_sizes.lock().unwrap().clone()
}

/// Takes one value; returns it and whether the caller waited (tokio's clock moved).
async fn take_one(buffer: &SegmentBuffer) -> (i64, bool) {
    let before = Instant::now();
    let value = buffer.next().await.unwrap();
    (value, Instant::now() > before)
}

/// Takes `n` values, one every `every`; returns them and how many calls waited.
async fn take_paced(buffer: &SegmentBuffer, n: usize, every: Duration) -> (Vec<i64>, usize) {
    let mut values = Vec::with_capacity(n);
    let mut waits = 0;
    for _ in 0..n {
        let (value, waited) = take_one(buffer).await;
        values.push(value);
        waits += usize::from(waited);
        tokio::time::advance(every).await;
    }
    (values, waits)
}

#[tokio::test(start_paused = true)]
async fn the_first_range_has_the_initial_size_and_later_ones_last_the_target_duration() {
    let source = Arc::new(CountingSource::default());
    let options = SegmentOptions::default()
        .initial_size(100)
        .min_size(10)
        .max_size(1_000_000)
        .prefetch_after(0.5)
        .target_duration(Duration::from_secs(1));
    let buffer = buffer_with(&source, options);
    // 1,000 values/s: ranges of 1,000 values (1 s at the measured rate).
    let (values, _) = take_paced(&buffer, 100, Duration::from_millis(1)).await;
    assert_eq!(values, (1..=100).collect::<Vec<_>>());
    let (_, waits) = take_paced(&buffer, 1_500, Duration::from_millis(1)).await;
    assert_eq!(waits, 0, "the next range was always at hand");
    let sizes = sizes(&source);
    // The second range is fetched at 50 values, too few to measure a rate: 100 again.
    assert_eq!(sizes[..2], [100, 100]);
    assert!(
        sizes[2..].iter().all(|&size| (990..=1_020).contains(&size)),
        "{sizes:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_range_is_bounded_by_min_and_max_size() {
    let source = Arc::new(CountingSource::default());
    let options = SegmentOptions::default()
        .initial_size(100)
        .min_size(100)
        .max_size(300)
        .target_duration(Duration::from_secs(10));
    let buffer = buffer_with(&source, options);
    take_paced(&buffer, 1_000, Duration::from_millis(1)).await; // wants 10,000
    let sizes_now = sizes(&source);
    assert!(
        sizes_now[2..].iter().all(|&size| size == 300),
        "{sizes_now:?}"
    );

    let source = Arc::new(CountingSource::default());
    let options = SegmentOptions::default()
        .initial_size(1_000)
        .min_size(200)
        .target_duration(Duration::from_secs(1));
    let buffer = buffer_with(&source, options);
    take_paced(&buffer, 400, Duration::from_millis(100)).await; // wants 10
    let sizes_now = sizes(&source);
    assert!(
        sizes_now[2..].iter().all(|&size| size == 200),
        "{sizes_now:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_next_fetch_starts_four_round_trips_before_the_range_runs_out() {
    // Round trip 50 ms: lead 4 · 50 + 5 = 205 ms. At 10,000 values/s a range lasts two
    // leads (the target is shorter): about 4,100 values, the next fetched about 2,050
    // values before the end.
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(50)));
    let options = SegmentOptions::default()
        .initial_size(1_000)
        .min_size(10)
        .prefetch_after(1.0)
        .target_duration(Duration::from_millis(10));
    let buffer = buffer_with(&source, options);
    let every = Duration::from_micros(100);
    take_paced(&buffer, 1_001, every).await; // the first range (rate unknown), then a wait
    let sizes_now = sizes(&source);
    assert_eq!(sizes_now.len(), 2);
    let second = sizes_now[1];
    assert!((4_000..=4_200).contains(&second), "{second}");
    // Take the second range up to its prefetch point, short of it by more than the 255
    // values by which it moves down to a checkpoint (one value in VALUES_PER_UNIT).
    let lead_values = 2_050;
    let (_, waits) = take_paced(&buffer, second as usize - lead_values - 300, every).await;
    assert_eq!((waits, sizes(&source).len()), (0, 2), "not yet");
    let (_, waits) = take_paced(&buffer, 340, every).await;
    assert_eq!(
        (waits, sizes(&source).len()),
        (0, 3),
        "fetching at the lead"
    );
    // The rest of the range, and the switch: nobody waits.
    let (_, waits) = take_paced(&buffer, lead_values + 500, every).await;
    assert_eq!(waits, 0);
    assert_eq!(source.most_under_way.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn callers_that_find_both_ranges_used_up_share_one_fetch_and_its_error() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(20)));
    let options = SegmentOptions::default().initial_size(100).min_size(100);
    let buffer = buffer_with(&source, options);
    source.failures.store(1, Ordering::SeqCst);
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let buffer = buffer.clone();
            tokio::spawn(async move { buffer.next().await })
        })
        .collect();
    for caller in callers {
        let error = caller.await.unwrap().expect_err("the one fetch failed");
        assert!(error.is_retryable(), "{error}");
    }
    assert_eq!(sizes(&source).len(), 1, "one fetch for eight callers");
    let stats = buffer.wait_stats();
    assert_eq!(
        (stats.waits, stats.longest),
        (8, Duration::from_millis(20)),
        "each waited one round trip"
    );
    assert_eq!(
        buffer.wait_stats().longest,
        Duration::ZERO,
        "read: starts over"
    );
    // The failed fetch's values (1 to 100) are skipped, never handed out.
    assert_eq!(
        buffer.next().await.unwrap(),
        101,
        "the next call fetches again"
    );
    assert_eq!(source.most_under_way.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn the_prefetched_range_is_at_hand_when_the_current_one_runs_out() {
    let source = Arc::new(CountingSource::default());
    let options = SegmentOptions::default()
        .initial_size(100)
        .min_size(100)
        .max_size(100);
    let buffer = buffer_with(&source, options);
    let (first, _) = take_paced(&buffer, 100, Duration::from_millis(1)).await;
    assert_eq!(
        sizes(&source).len(),
        2,
        "fetched in the background at 10% use"
    );
    assert_eq!(buffer.try_next(), None, "the current range is used up");
    let (next, waited) = take_one(&buffer).await;
    assert_eq!((first[99], next, waited), (100, 101, false));
    assert_eq!(source.metrics().ids_served.load(Ordering::Relaxed), 100);
}

/// A caller that never yields on its own: only the budget lets the spawned fetch run.
async fn take_without_yielding(buffer: &SegmentBuffer, n: usize) {
    for _ in 0..n {
        std::hint::black_box(buffer.next().await.unwrap());
    }
}

fn fixed(size: u64) -> SegmentOptions {
    SegmentOptions::default()
        .initial_size(size)
        .min_size(size)
        .max_size(size)
}

#[tokio::test(flavor = "current_thread")]
async fn a_caller_that_never_yields_still_lets_the_prefetch_run_on_a_current_thread_runtime() {
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_with(&source, fixed(100_000));
    take_without_yielding(&buffer, 100_000).await;
    assert_eq!(buffer.try_next(), None, "the first range is used up");
    assert_eq!(sizes(&source).len(), 2, "the second was fetched meanwhile");
    assert_eq!(buffer.next().await.unwrap(), 100_001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_never_yield_still_let_the_prefetch_run_on_a_multi_thread_runtime() {
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_with(&source, fixed(200_000));
    buffer.next().await.unwrap();
    // Two callers on two workers, each spawning from a task that does not yield; each
    // looks, before it yields, whether the second range was fetched.
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let buffer = buffer.clone();
            let source = source.clone();
            tokio::spawn(async move {
                take_without_yielding(&buffer, 90_000).await;
                sizes(&source).len()
            })
        })
        .collect();
    for caller in callers {
        assert_eq!(
            caller.await.unwrap(),
            2,
            "the second range was fetched meanwhile"
        );
    }
}

/// The round trip of the source in [`busy_callers`].
const BUSY_ROUND_TRIP: Duration = Duration::from_millis(10);

/// One run of [`busy_callers`] (or of the snowflake cache's busy callers) at a time: two
/// at once would put four busy worker threads on what may be two cores.
pub(crate) static BUSY_RUNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What one busy task lived through in the window ([`busy_callers`], and the snowflake
/// cache's busy callers).
#[derive(Debug)]
pub(crate) struct BusyTask {
    /// Values it took in the window.
    pub(crate) taken: u64,
    /// Its longest gap between two values, counted in positions: the values the other
    /// tasks took (or skipped) meanwhile — the segment source hands out 1, 2, 3… in order,
    /// and the snowflake test counts each ID on one shared counter. A gap that began during
    /// the warm-up, or that ends only after the window, counts whole.
    pub(crate) gap_in_values: u64,
    /// The same gap in time, for the message only: a loaded machine that stops the whole
    /// process stops every task at once, and the positions count that as no gap.
    pub(crate) gap: Duration,
    last: u64,
    last_at: std::time::Instant,
    was_measuring: bool,
}

impl BusyTask {
    pub(crate) fn new() -> Self {
        BusyTask {
            taken: 0,
            gap_in_values: 0,
            gap: Duration::ZERO,
            last: 0,
            last_at: std::time::Instant::now(),
            was_measuring: false,
        }
    }

    /// The task took the value at `position`, `measuring` if the window is open.
    pub(crate) fn took(&mut self, position: u64, measuring: bool) {
        let now = std::time::Instant::now();
        if measuring || self.was_measuring {
            self.gap_in_values = self.gap_in_values.max(position - self.last);
            self.gap = self.gap.max(now - self.last_at);
        }
        self.taken += u64::from(measuring);
        (self.last, self.last_at, self.was_measuring) = (position, now, measuring);
    }
}

/// Opens the window of a busy-callers run once `fetches` (how many the source was asked
/// for) reaches the window's start, closes it at its end, then stops the `tasks` and
/// returns what each lived through.
pub(crate) async fn measure_window(
    tasks: Vec<tokio::task::JoinHandle<BusyTask>>,
    measuring: &std::sync::atomic::AtomicBool,
    stop: &std::sync::atomic::AtomicBool,
    fetches: impl Fn() -> usize,
    window: std::ops::Range<usize>,
) -> Vec<BusyTask> {
    for (edge, open) in [(window.start, true), (window.end, false)] {
        while fetches() < edge {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        measuring.store(open, Ordering::Relaxed);
    }
    stop.store(true, Ordering::Relaxed);
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

/// Four tasks on the test's runtime take values from one buffer in loops that never yield
/// on their own (`local`: each through its own `buffer.local()` handle), with a source
/// that takes [`BUSY_ROUND_TRIP`] and ranges sized to last 1 s, through three range
/// switches after a warm-up (the first two ranges). Returns what each task lived through
/// and the smallest range fetched after the warm-up.
pub(crate) async fn busy_callers(local: bool) -> (Vec<BusyTask>, u64) {
    use std::sync::atomic::AtomicBool;
    const TASKS: usize = 4;
    let _one_at_a_time = BUSY_RUNS.lock().await;
    let source = Arc::new(CountingSource::with_round_trip(BUSY_ROUND_TRIP));
    let options = SegmentOptions::default().target_duration(Duration::from_secs(1));
    let buffer = buffer_with(&source, options);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (buffer, measuring, stop) = (buffer.clone(), measuring.clone(), stop.clone());
            tokio::spawn(async move {
                let mut handle = buffer.local();
                let mut task = BusyTask::new();
                loop {
                    let value = if local {
                        handle.next().await
                    } else {
                        buffer.next().await
                    };
                    task.took(value.unwrap() as u64, measuring.load(Ordering::Relaxed));
                    if stop.load(Ordering::Relaxed) {
                        return task;
                    }
                }
            })
        })
        .collect();
    // The window: from the third range asked for (the second, sized from a measured rate,
    // is in use) to the sixth (ranges 3, 4 and 5 were installed meanwhile).
    let out = measure_window(tasks, &measuring, &stop, || sizes(&source).len(), 3..6).await;
    let sizes = sizes(&source);
    eprintln!("range sizes {sizes:?}; per task: {out:?}");
    (out, sizes[2..].iter().copied().min().unwrap())
}

/// Every task of a [`busy_callers`] run got values throughout: none went a quarter of a
/// range without one. At the rate ranges are sized for, that is 250 ms, 25 round trips:
/// generous for a turn of the other tasks on its worker (about a millisecond) and for a
/// worker thread the system sets aside while the other runs; far below what a caller left
/// out by its siblings missed, a whole range (the rest of one once its successor was
/// fetched, and the start of the next, until the fetch after).
pub(crate) fn assert_all_served((tasks, smallest_range): (Vec<BusyTask>, u64)) {
    for (n, task) in tasks.iter().enumerate() {
        assert!(task.taken > 0, "task {n} got no value in the window");
        assert!(
            task.gap_in_values <= smallest_range / 4,
            "task {n} went {} values ({:?}) without one, ranges of {smallest_range} or more",
            task.gap_in_values,
            task.gap
        );
    }
}

/// Four tasks that never yield on their own share a buffer on two workers: each keeps
/// getting values throughout, across range switches. Before the buffer took its budget
/// on every value path (not only while a fetch was under way), two of the four stopped for
/// the rest of each range once its fetch landed: woken, but never run, as the two on the
/// workers no longer yielded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_busy_callers_on_two_workers_all_get_values_throughout() {
    assert_all_served(busy_callers(false).await);
}
