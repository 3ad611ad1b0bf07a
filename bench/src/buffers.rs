//! `idgen-bench buffers [--quick] [--rtts 5,25] [--tasks 4,16]`: whether `SegmentBuffer`
//! and `SnowflakeCache` keep their callers off the server and keep every caller served,
//! through a TCP proxy that delays every byte by half the round trip each way (and can
//! freeze), and the local path of `SegmentBuffer::next` against a `fetch_add` loop in the
//! same harness. Writes its own section of BENCHMARKS.md (between the `buffers` markers)
//! and prints it; a quick run or a subset (`--rtts`, `--tasks`) only prints.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen_client::{Client, SegmentOptions, Settings, SnowflakeCacheOptions, Topology};
use idgen_tests::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::local_path::{self, LocalPath};
use crate::server_side::MODULE_ARGS;
use crate::stats::{grouped, median};

const START: &str = "<!-- buffers:start -->";
const END: &str = "<!-- buffers:end -->";

/// A TCP proxy on its own thread and runtime (so that busy benchmark tasks cannot delay
/// it), holding every chunk of bytes for `one_way` before passing it on; while `frozen`,
/// nothing is passed on.
struct DelayProxy {
    port: u16,
    frozen: Arc<AtomicBool>,
}

impl DelayProxy {
    fn start(upstream: u16, one_way: Duration) -> DelayProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let flag = frozen.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((inbound, _)) = listener.accept().await {
                    let Ok(outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        continue;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (in_read, in_write) = inbound.into_split();
                    let (out_read, out_write) = outbound.into_split();
                    tokio::spawn(pump(in_read, out_write, one_way, flag.clone()));
                    tokio::spawn(pump(out_read, in_write, one_way, flag.clone()));
                }
            });
        });
        DelayProxy { port, frozen }
    }
}

/// Passes bytes from `from` to `to`, each chunk `delay` after it arrived, in order.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    frozen: Arc<AtomicBool>,
) {
    let (send, mut receive) =
        tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((due, bytes)) = receive.recv().await {
            tokio::time::sleep_until(due).await;
            while frozen.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        let due = tokio::time::Instant::now() + delay;
        if send.send((due, buffer[..n].to_vec())).is_err() {
            break;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Buffer {
    Segments,
    Snowflakes,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Load {
    /// This many values per second in all, shared by the tasks.
    Paced(f64),
    /// As fast as possible; `Some(n)`: a `yield_now` every n calls.
    Full(Option<u32>),
    /// As fast as possible through a handle per task (`SegmentBuffer::local`), never
    /// yielding on its own.
    FullLocal,
}

impl Load {
    fn describe(self) -> String {
        match self {
            Load::Paced(rate) => format!("paced {}/s", grouped(rate)),
            Load::Full(None) => "full speed, never yields".into(),
            Load::Full(Some(n)) => format!("full speed, yields every {n}"),
            Load::FullLocal => "full speed, `local()` handles, never yield".into(),
        }
    }
}

/// What one task lived through in the measured window.
#[derive(Debug, Default, Clone, Copy)]
struct TaskStats {
    /// Values it took in the window.
    values: u64,
    /// The longest time between two of its values (at full speed, between two clock reads:
    /// one every [`CLOCK_EVERY`] values, a few hundred nanoseconds apart when nothing stops
    /// the task). A gap that began in the warm-up or ends after the window counts whole.
    longest_gap: Duration,
    /// Calls slower than the measured round trip plus 1 ms, whatever the cause: a wait for
    /// a fetch, or a task woken but not run (at full speed: such intervals between clock
    /// reads).
    slow_calls: u64,
}

/// Full-speed tasks read the clock once every this many values, so that timing costs them
/// little (a clock read costs several values' worth).
const CLOCK_EVERY: u64 = 64;

/// The phases of a case, in `Shared::phase`.
const WARM_UP: u8 = 0;
const MEASURING: u8 = 1;
const STOPPED: u8 = 2;

/// The measured window of a case: at least this long…
const MIN_WINDOW: Duration = Duration::from_secs(3);
/// …and, for segments, until this many ranges were fetched in it (each fetch starts only
/// once the range before it is installed, so 4 fetches mean at least 3 range switches)…
const FETCHES_IN_WINDOW: u64 = 4;
/// …but no longer than this.
const MAX_WINDOW: Duration = Duration::from_secs(12);

/// Worker threads of the runtime the cases run on (see `main`), and their name (its
/// blocking threads have it too; idle, they wait for no CPU).
pub const WORKERS: usize = 2;
pub const WORKER_NAME: &str = "idgen-worker";

/// Segment ranges in the cases are sized to last this long at the measured rate (the
/// default is 10 s), so that a window of a few seconds crosses several range switches.
const RANGE_DURATION: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Row {
    buffer: Buffer,
    tasks: u32,
    load: Load,
    rtt_ms: u64,
    measured_rtt: Duration,
    /// How long the window lasted, and how many ranges (segments) or batches (snowflakes)
    /// were fetched in it.
    window: Duration,
    fetches: u64,
    /// How long the worker threads waited for a CPU in the window, in all.
    cpu_wait: Duration,
    per_task: Vec<TaskStats>,
    values_per_s: f64,
    waits_per_s: f64,
    worst_wait: Duration,
    /// Snowflakes: how old IDs were when handed out (ms), p50 / p99 / max.
    staleness: Option<(f64, f64, f64)>,
    errors: u64,
    duplicates: Option<u64>,
    /// IDs thrown away during the warm-up, and after it.
    discarded: Option<(u64, u64)>,
}

/// The round trip through the proxy as a client sees it: the median of 21 PINGs.
fn measure_rtt(port: u16) -> Duration {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut samples: Vec<f64> = (0..21)
        .map(|_| {
            let started = Instant::now();
            let _: String = redis::cmd("PING").query(&mut con).unwrap();
            started.elapsed().as_secs_f64()
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Duration::from_secs_f64(median(&samples))
}

/// How long the runtime's worker threads have waited, runnable, for a CPU (the kernel's
/// `run_delay` in `/proc/self/task/*/schedstat`), in all; zero where the kernel does not
/// say. On a shared machine, the part of a task's gaps that is not the runtime's doing.
fn workers_cpu_wait() -> Duration {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut waited = 0u64;
    for thread in threads.flatten() {
        let path = thread.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != WORKER_NAME {
            continue;
        }
        let schedstat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        waited += schedstat
            .split_whitespace()
            .nth(1)
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(waited)
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// What every task shares while a case runs.
struct Shared {
    /// [`WARM_UP`], [`MEASURING`] or [`STOPPED`].
    phase: AtomicU8,
    errors: AtomicU64,
    /// Snowflake ages in ms, after the warm-up.
    ages: Mutex<Vec<f64>>,
    /// Every value handed out (paced cases only: full speed hands out too many to keep).
    values: Mutex<Vec<i64>>,
}

async fn run_case(
    server: &Server,
    buffer: Buffer,
    tasks: u32,
    load: Load,
    rtt_ms: u64,
    warm_up: Duration,
) -> Row {
    let proxy = DelayProxy::start(server.port(), Duration::from_micros(rtt_ms * 500));
    let port = proxy.port;
    let measured_rtt = tokio::task::spawn_blocking(move || measure_rtt(port))
        .await
        .unwrap();
    let slow = measured_rtt + Duration::from_millis(1);
    let client = Client::connect(Topology::single(format!("redis://127.0.0.1:{port}/")).unwrap())
        .await
        .expect("connect through the proxy");
    let key = format!("{buffer:?}-{tasks}-{rtt_ms}-{}", load.describe()).replace(' ', "_");
    let mut options = SegmentOptions::default().target_duration(RANGE_DURATION);
    if let Load::Paced(rate) = load {
        // The first range sized as the later ones will be: measured from the first values,
        // taken in a catch-up burst after the first fetch, the rate would be far too high,
        // and ranges would take many switches to come down to the target.
        options = options.initial_size((rate * RANGE_DURATION.as_secs_f64()) as u64);
    }
    let segments = client.segment_buffer(&key, options);
    let snowflakes = client.snowflake_cache(&key, SnowflakeCacheOptions::default());
    let keep_values = matches!(load, Load::Paced(_));
    let shared = Arc::new(Shared {
        phase: AtomicU8::new(WARM_UP),
        errors: AtomicU64::new(0),
        ages: Mutex::new(Vec::new()),
        values: Mutex::new(Vec::new()),
    });
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (segments, snowflakes, client, shared) = (
                segments.clone(),
                snowflakes.clone(),
                client.clone(),
                shared.clone(),
            );
            tokio::spawn(async move {
                let mut stats = TaskStats::default();
                let mut values = Vec::new();
                let mut ages = Vec::new();
                let mut handle = segments.local();
                let use_handle = load == Load::FullLocal;
                let mut take = async |values: &mut Vec<i64>, ages: &mut Vec<f64>| match buffer {
                    Buffer::Segments => {
                        let outcome = if use_handle {
                            handle.next().await
                        } else {
                            segments.next().await
                        };
                        match outcome {
                            Ok(value) if keep_values => values.push(value),
                            Ok(value) => {
                                std::hint::black_box(value);
                            }
                            Err(_) => {
                                shared.errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Buffer::Snowflakes => match snowflakes.next().await {
                        Ok(id) => {
                            values.push(id);
                            if shared.phase.load(Ordering::Relaxed) == MEASURING {
                                let issued = client.decode(id).unwrap().unix_ms as f64;
                                ages.push(now_ms() - issued);
                            }
                        }
                        Err(_) => {
                            shared.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                };
                // The task's last value (paced) or clock read (full speed), and whether the
                // window was open then: a gap counts if the window was open at either end.
                let mut last = Instant::now();
                let mut was_measuring = false;
                let mut done: u64 = 0;
                match load {
                    Load::Paced(rate) => {
                        let per_task = rate / f64::from(tasks);
                        loop {
                            let phase = shared.phase.load(Ordering::Relaxed);
                            if phase == STOPPED {
                                break;
                            }
                            let measuring = phase == MEASURING;
                            let due = (started.elapsed().as_secs_f64() * per_task) as u64;
                            while done < due {
                                let before = Instant::now();
                                take(&mut values, &mut ages).await;
                                let after = Instant::now();
                                if measuring || was_measuring {
                                    stats.longest_gap = stats.longest_gap.max(after - last);
                                    stats.slow_calls += u64::from(after - before > slow);
                                }
                                stats.values += u64::from(measuring);
                                (last, was_measuring) = (after, measuring);
                                done += 1;
                            }
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    Load::Full(_) | Load::FullLocal => loop {
                        take(&mut values, &mut ages).await;
                        done += 1;
                        if done.is_multiple_of(CLOCK_EVERY) {
                            let now = Instant::now();
                            let phase = shared.phase.load(Ordering::Relaxed);
                            let measuring = phase == MEASURING;
                            if measuring || was_measuring {
                                let interval = now - last;
                                stats.longest_gap = stats.longest_gap.max(interval);
                                stats.slow_calls += u64::from(interval > slow);
                            }
                            if measuring {
                                stats.values += CLOCK_EVERY;
                            }
                            (last, was_measuring) = (now, measuring);
                            if phase == STOPPED {
                                break;
                            }
                        }
                        if let Load::Full(Some(n)) = load {
                            if done.is_multiple_of(u64::from(n)) {
                                tokio::task::yield_now().await;
                            }
                        }
                    },
                }
                shared.ages.lock().unwrap().extend(ages);
                shared.values.lock().unwrap().extend(values);
                stats
            })
        })
        .collect();
    tokio::time::sleep(warm_up).await;
    let fetched = || {
        let metrics = client.metrics();
        match buffer {
            Buffer::Segments => metrics.ranges_fetched,
            Buffer::Snowflakes => metrics.snowflake_batches_fetched,
        }
    };
    let waits_before = match buffer {
        Buffer::Segments => segments.wait_stats().waits,
        Buffer::Snowflakes => snowflakes.wait_stats().waits,
    };
    let fetched_before = fetched();
    let discarded_before = snowflakes.discarded();
    let cpu_wait_before = workers_cpu_wait();
    shared.phase.store(MEASURING, Ordering::Relaxed);
    let measured_from = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let elapsed = measured_from.elapsed();
        let enough =
            buffer == Buffer::Snowflakes || fetched() - fetched_before >= FETCHES_IN_WINDOW;
        if (elapsed >= MIN_WINDOW && enough) || elapsed >= MAX_WINDOW {
            break;
        }
    }
    let stats = match buffer {
        Buffer::Segments => segments.wait_stats(),
        Buffer::Snowflakes => snowflakes.wait_stats(),
    };
    let fetches = fetched() - fetched_before;
    let window = measured_from.elapsed();
    let cpu_wait = workers_cpu_wait().saturating_sub(cpu_wait_before);
    shared.phase.store(STOPPED, Ordering::Relaxed);
    let mut per_task = Vec::new();
    for handle in handles {
        per_task.push(handle.await.unwrap());
    }
    let values = std::mem::take(&mut *shared.values.lock().unwrap());
    let duplicates = (buffer == Buffer::Snowflakes || keep_values).then(|| {
        let distinct: HashSet<i64> = values.iter().copied().collect();
        (values.len() - distinct.len()) as u64
    });
    let mut ages = std::mem::take(&mut *shared.ages.lock().unwrap());
    ages.sort_by(f64::total_cmp);
    let pick = |q: f64| ages[((ages.len() - 1) as f64 * q).round() as usize];
    let staleness = (buffer == Buffer::Snowflakes && !ages.is_empty())
        .then(|| (pick(0.5), pick(0.99), *ages.last().unwrap()));
    let counted: u64 = per_task.iter().map(|task| task.values).sum();
    let row = Row {
        buffer,
        tasks,
        load,
        rtt_ms,
        measured_rtt,
        window,
        fetches,
        cpu_wait,
        values_per_s: counted as f64 / window.as_secs_f64(),
        waits_per_s: (stats.waits - waits_before) as f64 / window.as_secs_f64(),
        worst_wait: stats.longest,
        staleness,
        errors: shared.errors.load(Ordering::Relaxed),
        duplicates,
        discarded: (buffer == Buffer::Snowflakes)
            .then(|| (discarded_before, snowflakes.discarded() - discarded_before)),
        per_task,
    };
    eprintln!(
        "{row:?}; cached at the end {}, batches fetched {}",
        snowflakes.cached(),
        client.metrics().snowflake_batches_fetched
    );
    row
}

impl Row {
    /// The smallest and largest share of the values a task took, as a multiple of a fair
    /// share (1 / tasks).
    fn shares(&self) -> (f64, f64) {
        let total: u64 = self.per_task.iter().map(|task| task.values).sum();
        let fair = total as f64 / self.per_task.len() as f64;
        let shares = self.per_task.iter().map(|task| task.values as f64 / fair);
        shares.fold((f64::INFINITY, 0.0_f64), |(low, high), share| {
            (low.min(share), high.max(share))
        })
    }

    /// The longest gap any task lived through.
    fn longest_gap(&self) -> Duration {
        self.per_task
            .iter()
            .map(|task| task.longest_gap)
            .max()
            .unwrap_or_default()
    }

    /// Slow calls in all, and how many tasks had any.
    fn slow_calls(&self) -> (u64, usize) {
        let total = self.per_task.iter().map(|task| task.slow_calls).sum();
        let tasks = self
            .per_task
            .iter()
            .filter(|task| task.slow_calls > 0)
            .count();
        (total, tasks)
    }
}

/// Segments and snowflakes through a proxy that stops passing bytes for 2 s.
struct Freeze {
    what: &'static str,
    values: usize,
    errors: u64,
    not_retryable: u64,
    duplicates: usize,
    longest_call: Duration,
}

async fn freeze_case(server: &Server) -> Vec<Freeze> {
    let proxy = DelayProxy::start(server.port(), Duration::from_micros(2_500));
    let timeout = Duration::from_millis(300);
    let settings = Settings::default()
        .response_timeout(timeout)
        .connect_timeout(timeout);
    let url = format!("redis://127.0.0.1:{}/", proxy.port);
    let client = Client::connect_with(Topology::single(url).unwrap(), settings)
        .await
        .unwrap();
    let segments = client.segment_buffer("freeze", SegmentOptions::default());
    let snowflakes = client.snowflake_cache("freeze-ids", SnowflakeCacheOptions::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for which in 0..8u32 {
        let (segments, snowflakes, stop) = (segments.clone(), snowflakes.clone(), stop.clone());
        handles.push(tokio::spawn(async move {
            let (mut values, mut errors, mut not_retryable) = (Vec::new(), 0u64, 0u64);
            let mut longest = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let outcome = if which % 2 == 0 {
                    segments.next().await
                } else {
                    snowflakes.next().await
                };
                longest = longest.max(started.elapsed());
                match outcome {
                    Ok(value) => values.push(value),
                    Err(error) => {
                        errors += 1;
                        not_retryable += u64::from(!error.is_retryable());
                    }
                }
                // 4 tasks each: 20,000 values/s per buffer.
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            (which % 2, values, errors, not_retryable, longest)
        }));
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    proxy.frozen.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.frozen.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut out: Vec<Freeze> = ["SegmentBuffer", "SnowflakeCache"]
        .into_iter()
        .map(|what| Freeze {
            what,
            values: 0,
            errors: 0,
            not_retryable: 0,
            duplicates: 0,
            longest_call: Duration::ZERO,
        })
        .collect();
    let mut seen: [HashSet<i64>; 2] = [HashSet::new(), HashSet::new()];
    for handle in handles {
        let (which, values, errors, not_retryable, longest) = handle.await.unwrap();
        let row = &mut out[which as usize];
        row.values += values.len();
        row.errors += errors;
        row.not_retryable += not_retryable;
        row.longest_call = row.longest_call.max(longest);
        for value in values {
            if !seen[which as usize].insert(value) {
                row.duplicates += 1;
            }
        }
    }
    out
}

/// `SegmentBuffer::try_next` in a plain loop on this thread (no runtime, no future, no
/// cooperative budget) against a `fetch_add` loop, both through `black_box`; median of
/// `rounds`. Shows what the synchronous part of the local path costs on its own.
async fn sync_path(client: &Client, per_round: u64, rounds: usize) -> (f64, f64) {
    let (mut ours, mut baseline) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let buffer =
            local_path::one_range_buffer(client, &format!("sync-{round}"), per_round).await;
        let started = Instant::now();
        for _ in 0..per_round {
            std::hint::black_box(buffer.try_next());
        }
        ours.push(per_round as f64 / started.elapsed().as_secs_f64());
        let counter = AtomicU64::new(0);
        let started = Instant::now();
        for _ in 0..per_round {
            std::hint::black_box(counter.fetch_add(1, Ordering::Relaxed));
        }
        baseline.push(per_round as f64 / started.elapsed().as_secs_f64());
    }
    (median(&ours), median(&baseline))
}

fn ms(duration: Duration) -> String {
    format!("{:.1}", duration.as_secs_f64() * 1000.0)
}

fn render(
    rows: &[Row],
    freeze: &[Freeze],
    local: &[LocalPath],
    sync: (f64, f64),
    command: &str,
) -> String {
    let mut out = String::new();
    out.push_str(START);
    out.push_str("\n## Client buffers: callers kept off the server\n\n");
    out.push_str(&format!(
        "`{command}` (writes this section; about 5 minutes). Each case: a fresh client \
         connected through a TCP proxy that holds every chunk of bytes for half the round \
         trip each way (its own thread and runtime), a fresh `SegmentBuffer` (default \
         options but ranges sized to last {range_s} s instead of 10 s, so that a window \
         crosses several range switches) or `SnowflakeCache` (default options), tasks on a \
         2-worker multi-thread runtime; 1 s of warm-up, then a window of at least {min_s} s \
         that, for segments, lasts until {fetches} ranges were fetched in it (each fetch \
         starts once the range before it is installed: at least {switches} range switches; \
         at most {max_s} s). *Window* is its length and the ranges (segments) or batches \
         (snowflakes) fetched in it. Per task: its *share* of the window's values as a \
         multiple of a fair share (lowest–highest task; 1 task: 1.00); its *longest gap* \
         between two values (the worst task; paced tasks' gaps include their pacing, \
         tasks/rate); and *slow calls*, calls that took longer than the round trip plus \
         1 ms whatever the cause — a wait for a fetch, or a task woken but not run — in \
         all (tasks with any). Full-speed tasks read the clock every {clock} values, so \
         their gaps and slow calls are intervals between two reads. *CPU wait*: how long \
         the runtime's {workers} worker threads waited, runnable, for a CPU during the \
         window (the kernel's `run_delay`), as a share of their time: on a shared machine, \
         gaps the runtime did not make. *Waits/s* are calls \
         that found nothing at hand and waited for a fetch (`wait_stats()`, counted on the \
         slow path), per second of the window; *worst* is the longest of those. *RTT* is \
         the median PING through the proxy (the timer rounds each way up to whole \
         milliseconds). Staleness: now minus the time in the ID, when handed out (p50 / \
         p99 / max ms), in the window. *Thrown away*: IDs a cache discarded rather than \
         hand out too old, during the warm-up / in the window (the warm-up's are the \
         surplus of batches that grew while callers waited). Duplicates are checked on \
         every value of the paced cases and every snowflake (full-speed segment cases hand \
         out too many to keep; their uniqueness is tested in `tests/tests/buffers.rs`).\n\n",
        range_s = RANGE_DURATION.as_secs(),
        min_s = MIN_WINDOW.as_secs(),
        fetches = FETCHES_IN_WINDOW,
        switches = FETCHES_IN_WINDOW - 1,
        max_s = MAX_WINDOW.as_secs(),
        clock = CLOCK_EVERY,
        workers = WORKERS,
    ));
    out.push_str(
        "| buffer | load | tasks | RTT (ms) | window (s) / fetched | values/s | share (× fair) | \
         longest gap (ms) | slow calls (tasks) | CPU wait | waits/s | worst wait (ms) | \
         staleness p50/p99/max (ms) | thrown away (warm-up / window) | errors | duplicates |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|\n",
    );
    for row in rows {
        let staleness = row.staleness.map_or("—".into(), |(p50, p99, max)| {
            format!("{p50:.0} / {p99:.0} / {max:.0}")
        });
        let (low, high) = row.shares();
        let (slow, slow_tasks) = row.slow_calls();
        out.push_str(&format!(
            "| {:?} | {} | {} | {} ({}) | {:.1} / {} | {} | {:.2}–{:.2} | {} | {} ({}) | {:.0} % | {:.1} | {} | {} | {} | {} | {} |\n",
            row.buffer,
            row.load.describe(),
            row.tasks,
            row.rtt_ms,
            ms(row.measured_rtt),
            row.window.as_secs_f64(),
            row.fetches,
            grouped(row.values_per_s),
            low,
            high,
            ms(row.longest_gap()),
            slow,
            slow_tasks,
            100.0 * row.cpu_wait.as_secs_f64() / (row.window.as_secs_f64() * WORKERS as f64),
            row.waits_per_s,
            if row.worst_wait.is_zero() {
                "—".into()
            } else {
                ms(row.worst_wait)
            },
            staleness,
            row.discarded.map_or("—".into(), |(warm_up, after)| {
                format!("{} / {}", grouped(warm_up as f64), grouped(after as f64))
            }),
            row.errors,
            row.duplicates.map_or("—".into(), |n| n.to_string()),
        ));
    }
    out.push_str(
        "\nA server that stops answering: the proxy passes no bytes for 2 s while 4 tasks per \
         buffer take 5,000 values/s each (5 ms round trip, `response_timeout` and \
         `connect_timeout` 300 ms):\n\n\
         | buffer | values | errors (all retryable?) | longest call (ms) | duplicates |\n\
         |---|--:|---|--:|--:|\n",
    );
    for row in freeze {
        out.push_str(&format!(
            "| {} | {} | {} ({}) | {} | {} |\n",
            row.what,
            grouped(row.values as f64),
            row.errors,
            if row.not_retryable == 0 {
                "yes".to_string()
            } else {
                format!("{} not", row.not_retryable)
            },
            ms(row.longest_call),
            row.duplicates
        ));
    }
    out.push_str(
        "\nThe local path: `SegmentBuffer::next().await` (one buffer shared by the tasks) and \
         `LocalSegmentBuffer::next().await` (a handle per task, from `buffer.local()`) in \
         tokio tasks, one range for the whole run, against \
         `std::future::ready(counter.fetch_add(1)).await` on one counter in the same kind of \
         tasks, all results through `black_box`; median of 3 interleaved rounds:\n\n",
    );
    out.push_str(&local_path::table(local));
    out.push_str(&format!(
        "\nThe same range taken with `SegmentBuffer::try_next()` in a plain loop on one thread \
         (no runtime, no future, no cooperative budget): {} values/s against a `fetch_add` \
         loop's {} ({:.2}). The difference from the table's first ratio is what \
         `next().await` adds: the future, kept in the task's own future between polls.\n",
        grouped(sync.0),
        grouped(sync.1),
        sync.0 / sync.1
    ));
    out.push_str(END);
    out.push('\n');
    out
}

/// The buffers section of an existing BENCHMARKS.md and the analysis after it (from the start
/// marker to the end of the file), or nothing: a full run rewrites the rest of the file and
/// keeps this part, which only `idgen-bench buffers` measures.
pub fn kept_part(text: &str) -> &str {
    text.find(START).map_or("", |start| &text[start..])
}

/// Replaces the section between the markers in `text`, or appends it.
fn splice(text: &str, section: &str) -> String {
    match (text.find(START), text.find(END)) {
        (Some(start), Some(end)) if end > start => {
            let after = &text[end + END.len()..];
            let after = after.strip_prefix('\n').unwrap_or(after);
            format!("{}{}{}", &text[..start], section, after)
        }
        _ => format!("{}\n{}", text.trim_end(), "\n".to_string() + section),
    }
}

/// The local path alone, printed (for profiling: `buffers --local-only`).
pub async fn run_local_only(quick: bool) {
    let server = Server::start(&MODULE_ARGS);
    let per_task_total: u64 = if quick { 20_000_000 } else { 100_000_000 };
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    for tasks in [1u32, 8] {
        let row = local_path::measure(&client, tasks, per_task_total / u64::from(tasks), 1).await;
        row.print();
    }
    let (ours, baseline) = sync_path(&client, per_task_total, 1).await;
    println!(
        "try_next without a runtime: {ours:.0} vs {baseline:.0} ({:.2})",
        ours / baseline
    );
}

/// Which cases `run` measures: every round trip and task count, unless narrowed.
pub struct Cases {
    pub quick: bool,
    /// Round trips (ms) to measure, if not all.
    pub rtts: Option<Vec<u64>>,
    /// Task counts to measure, if not all.
    pub tasks: Option<Vec<u32>>,
}

impl Cases {
    /// A run that measures only part of the table: printed, not written.
    fn subset(&self) -> bool {
        self.quick || self.rtts.is_some() || self.tasks.is_some()
    }
}

pub async fn run(cases: &Cases, report: &std::path::Path) {
    let quick = cases.quick;
    let server = Server::start(&MODULE_ARGS);
    let (default_rtts, default_tasks): (&[u64], &[u32]) = if quick {
        (&[5], &[1, 4])
    } else {
        (&[1, 5, 25], &[1, 4, 16])
    };
    let rtts = cases.rtts.as_deref().unwrap_or(default_rtts);
    let task_counts = cases.tasks.as_deref().unwrap_or(default_tasks);
    let warm_up = Duration::from_secs(1);
    let mut rows = Vec::new();
    for &rtt in rtts {
        for &tasks in task_counts {
            for (buffer, load) in [
                (Buffer::Segments, Load::Paced(50_000.0)),
                (Buffer::Segments, Load::Full(None)),
                (Buffer::Segments, Load::Full(Some(1024))),
                (Buffer::Segments, Load::FullLocal),
                (Buffer::Snowflakes, Load::Paced(1_000.0)),
                (Buffer::Snowflakes, Load::Paced(50_000.0)),
            ] {
                rows.push(run_case(&server, buffer, tasks, load, rtt, warm_up).await);
            }
        }
    }
    eprintln!("a frozen server…");
    let freeze = freeze_case(&server).await;
    eprintln!("the local path…");
    let per_task_total: u64 = if quick { 20_000_000 } else { 100_000_000 };
    let rounds = if quick { 1 } else { 3 };
    let mut local = Vec::new();
    let client = Client::connect(Topology::single(server.url()).unwrap())
        .await
        .unwrap();
    for tasks in [1u32, 8] {
        let row =
            local_path::measure(&client, tasks, per_task_total / u64::from(tasks), rounds).await;
        row.print();
        local.push(row);
    }
    let command = format!(
        "cargo run --release -p idgen-bench -- {}",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    let sync = sync_path(&client, per_task_total, rounds).await;
    eprintln!("try_next: {:.0} vs {:.0}", sync.0, sync.1);
    let section = render(&rows, &freeze, &local, sync, &command);
    print!("{section}");
    if !cases.subset() {
        let text = std::fs::read_to_string(report).unwrap_or_default();
        std::fs::write(report, splice(&text, &section)).expect("write BENCHMARKS.md");
        eprintln!("wrote the buffers section of {}", report.display());
    }
}
