//! `idgen-bench buffers [--quick]`: whether `SegmentBuffer` and `SnowflakeCache` keep their
//! callers off the server, through a TCP proxy that delays every byte by half the round trip
//! each way (and can freeze), and the local path of `SegmentBuffer::next` against a
//! `fetch_add` loop in the same harness. Writes its own section of BENCHMARKS.md (between
//! the `buffers` markers) and prints it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
}

impl Load {
    fn describe(self) -> String {
        match self {
            Load::Paced(rate) => format!("paced {}/s", grouped(rate)),
            Load::Full(None) => "full speed, never yields".into(),
            Load::Full(Some(n)) => format!("full speed, yields every {n}"),
        }
    }
}

#[derive(Debug)]
struct Row {
    buffer: Buffer,
    tasks: u32,
    load: Load,
    rtt_ms: u64,
    measured_rtt: Duration,
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

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// What every task shares while a case runs.
struct Shared {
    stop: AtomicBool,
    counted: AtomicU64,
    errors: AtomicU64,
    /// Snowflake ages in ms, after the warm-up.
    ages: Mutex<Vec<f64>>,
    measuring: AtomicBool,
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
    measure: Duration,
) -> Row {
    let proxy = DelayProxy::start(server.port(), Duration::from_micros(rtt_ms * 500));
    let port = proxy.port;
    let measured_rtt = tokio::task::spawn_blocking(move || measure_rtt(port))
        .await
        .unwrap();
    let client = Client::connect(Topology::single(format!("redis://127.0.0.1:{port}/")).unwrap())
        .await
        .expect("connect through the proxy");
    let key = format!("{buffer:?}-{tasks}-{rtt_ms}-{}", load.describe()).replace(' ', "_");
    let segments = client.segment_buffer(&key, SegmentOptions::default());
    let snowflakes = client.snowflake_cache(&key, SnowflakeCacheOptions::default());
    let keep_values = matches!(load, Load::Paced(_));
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        counted: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        ages: Mutex::new(Vec::new()),
        measuring: AtomicBool::new(false),
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
                let mut done: u64 = 0;
                let mut unreported: u64 = 0;
                let mut values = Vec::new();
                let mut ages = Vec::new();
                let take = async |values: &mut Vec<i64>, ages: &mut Vec<f64>| match buffer {
                    Buffer::Segments => match segments.next().await {
                        Ok(value) => {
                            if keep_values {
                                values.push(value);
                            } else {
                                std::hint::black_box(value);
                            }
                        }
                        Err(_) => {
                            shared.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    Buffer::Snowflakes => match snowflakes.next().await {
                        Ok(id) => {
                            values.push(id);
                            if shared.measuring.load(Ordering::Relaxed) {
                                let issued = client.decode(id).unwrap().unix_ms as f64;
                                ages.push(now_ms() - issued);
                            }
                        }
                        Err(_) => {
                            shared.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                };
                match load {
                    Load::Paced(rate) => {
                        let per_task = rate / f64::from(tasks);
                        while !shared.stop.load(Ordering::Relaxed) {
                            let due = (started.elapsed().as_secs_f64() * per_task) as u64;
                            while done < due {
                                take(&mut values, &mut ages).await;
                                done += 1;
                                unreported += 1;
                            }
                            shared.counted.fetch_add(unreported, Ordering::Relaxed);
                            unreported = 0;
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    Load::Full(yield_every) => loop {
                        take(&mut values, &mut ages).await;
                        done += 1;
                        if done.is_multiple_of(1024) {
                            shared.counted.fetch_add(1024, Ordering::Relaxed);
                            if shared.stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                        if let Some(n) = yield_every {
                            if done.is_multiple_of(u64::from(n)) {
                                tokio::task::yield_now().await;
                            }
                        }
                    },
                }
                shared.ages.lock().unwrap().extend(ages);
                shared.values.lock().unwrap().extend(values);
            })
        })
        .collect();
    tokio::time::sleep(warm_up).await;
    let waits_before = match buffer {
        Buffer::Segments => segments.wait_stats().waits,
        Buffer::Snowflakes => snowflakes.wait_stats().waits,
    };
    let counted_before = shared.counted.load(Ordering::Relaxed);
    let discarded_before = snowflakes.discarded();
    shared.measuring.store(true, Ordering::Relaxed);
    let measured_from = Instant::now();
    tokio::time::sleep(measure).await;
    let stats = match buffer {
        Buffer::Segments => segments.wait_stats(),
        Buffer::Snowflakes => snowflakes.wait_stats(),
    };
    let counted = shared.counted.load(Ordering::Relaxed) - counted_before;
    let elapsed = measured_from.elapsed().as_secs_f64();
    shared.stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.await.unwrap();
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
    let row = Row {
        buffer,
        tasks,
        load,
        rtt_ms,
        measured_rtt,
        values_per_s: counted as f64 / elapsed,
        waits_per_s: (stats.waits - waits_before) as f64 / elapsed,
        worst_wait: stats.longest,
        staleness,
        errors: shared.errors.load(Ordering::Relaxed),
        duplicates,
        discarded: (buffer == Buffer::Snowflakes)
            .then(|| (discarded_before, snowflakes.discarded() - discarded_before)),
    };
    eprintln!(
        "{row:?}; cached at the end {}, batches fetched {}",
        snowflakes.cached(),
        client.metrics().snowflake_batches_fetched
    );
    row
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
        "`{command}` (writes this section). Each case: a fresh client connected through a TCP \
         proxy that holds every chunk of bytes for half the round trip each way (its own \
         thread and runtime), a fresh `SegmentBuffer` or `SnowflakeCache` with default \
         options, tasks on a 2-worker multi-thread runtime; 1 s of warm-up, then the \
         measurement. *Waits/s* are calls that found nothing at hand and waited for a fetch \
         (`wait_stats()`, counted on the slow path), per second after the warm-up; *worst* \
         is the longest of those. *RTT* is the median PING through the proxy (the timer \
         rounds each way up to whole milliseconds). Staleness: now minus the time in the \
         ID, when handed out (p50 / p99 / max ms), after the warm-up. *Thrown away*: IDs a \
         cache discarded rather than hand out too old, during the warm-up / after it (the \
         warm-up's are the surplus of batches that grew while callers waited). Duplicates \
         are checked on every value of \
         the paced cases and every snowflake (full-speed segment cases hand out too many to \
         keep; their uniqueness is tested in `tests/tests/buffers.rs`).\n\n"
    ));
    out.push_str(
        "| buffer | load | tasks | RTT (ms) | values/s | waits/s | worst wait (ms) | \
         staleness p50/p99/max (ms) | thrown away (warm-up / after) | errors | duplicates |\n\
         |---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|\n",
    );
    for row in rows {
        let staleness = row.staleness.map_or("—".into(), |(p50, p99, max)| {
            format!("{p50:.0} / {p99:.0} / {max:.0}")
        });
        out.push_str(&format!(
            "| {:?} | {} | {} | {} ({}) | {} | {:.1} | {} | {} | {} | {} | {} |\n",
            row.buffer,
            row.load.describe(),
            row.tasks,
            row.rtt_ms,
            ms(row.measured_rtt),
            grouped(row.values_per_s),
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

pub async fn run(quick: bool, report: &std::path::Path) {
    let server = Server::start(&MODULE_ARGS);
    let (rtts, task_counts, warm_up, measure): (&[u64], &[u32], _, _) = if quick {
        (
            &[5, 50],
            &[1, 16],
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
    } else {
        (
            &[1, 5, 25, 50],
            &[1, 4, 16],
            Duration::from_secs(1),
            Duration::from_secs(3),
        )
    };
    let mut rows = Vec::new();
    for &rtt in rtts {
        for &tasks in task_counts {
            for (buffer, load) in [
                (Buffer::Segments, Load::Paced(50_000.0)),
                (Buffer::Segments, Load::Full(None)),
                (Buffer::Segments, Load::Full(Some(1024))),
                (Buffer::Snowflakes, Load::Paced(1_000.0)),
                (Buffer::Snowflakes, Load::Paced(50_000.0)),
            ] {
                rows.push(run_case(&server, buffer, tasks, load, rtt, warm_up, measure).await);
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
    let command = if quick {
        "cargo run --release -p idgen-bench -- buffers --quick"
    } else {
        "cargo run --release -p idgen-bench -- buffers"
    };
    let sync = sync_path(&client, per_task_total, rounds).await;
    eprintln!("try_next: {:.0} vs {:.0}", sync.0, sync.1);
    let section = render(&rows, &freeze, &local, sync, command);
    print!("{section}");
    if !quick {
        let text = std::fs::read_to_string(report).unwrap_or_default();
        std::fs::write(report, splice(&text, &section)).expect("write BENCHMARKS.md");
        eprintln!("wrote the buffers section of {}", report.display());
    }
}
