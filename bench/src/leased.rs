//! Leased generators (`idgen_client::LeasedGenerator`) side by side with the layout's ceiling
//! and a bare `AtomicU64` loop: IDs per second per generator, how long a generator keeps
//! issuing with Redis stopped, and its renewal traffic. `idgen-bench leases [--quick]`
//! writes its own section at the end of BENCHMARKS.md (between the `leases` markers).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idgen_client::{LeaseError, LeasedGenerator, LeasedOptions};
use idgen_tests::Server;

const START: &str = "<!-- leases: start -->";
const END: &str = "<!-- leases: end -->";

/// The layout's ceiling per worker id with Twitter's widths: 4,096 IDs per millisecond.
const CEILING: f64 = 4_096_000.0;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn server(max_ms: u64) -> Server {
    Server::start(&[
        "lease-workers",
        "8",
        "lease-max-ms",
        &max_ms.to_string(),
        "max-drift-ms",
        "100",
    ])
}

fn generator(server: &Server, duration_ms: u64, borrow: Duration) -> LeasedGenerator {
    let options = LeasedOptions {
        duration: Duration::from_millis(duration_ms),
        max_borrow: borrow,
        margin: Duration::from_millis(20),
        ..LeasedOptions::new("bench:workers")
    };
    LeasedGenerator::start(&[&server.url()], options).expect("a lease")
}

/// IDs per second of a bare `fetch_add` loop in one thread.
fn atomic_rate(count: u64) -> f64 {
    let counter = AtomicU64::new(0);
    let started = Instant::now();
    for _ in 0..count {
        std::hint::black_box(counter.fetch_add(1, Ordering::Relaxed));
    }
    count as f64 / started.elapsed().as_secs_f64()
}

/// IDs per second of `try_next_id` while the window and borrowing allow: the fast path.
fn burst_rate(generator: &LeasedGenerator, count: u64) -> f64 {
    generator.next_id().expect("an ID");
    let started = Instant::now();
    for _ in 0..count {
        std::hint::black_box(generator.try_next_id().expect("an ID within the borrow"));
    }
    count as f64 / started.elapsed().as_secs_f64()
}

/// IDs per second of `next_id` sustained for `span` without borrowing: the ceiling.
fn sustained_rate(generator: &LeasedGenerator, span: Duration) -> f64 {
    // Once its window has begun (after a server start it begins a little ahead).
    generator.next_id().expect("an ID");
    let started = Instant::now();
    let mut count = 0u64;
    while started.elapsed() < span {
        for _ in 0..4096 {
            std::hint::black_box(generator.next_id().expect("an ID"));
        }
        count += 4096;
    }
    count as f64 / started.elapsed().as_secs_f64()
}

struct Outage {
    window_left_ms: u64,
    issued_for_ms: u64,
    ids: u64,
    error: String,
}

/// Kills the server and counts how long the generator goes on.
fn outage(window_ms: u64) -> Outage {
    let mut server = server(window_ms);
    let generator = generator(&server, window_ms, Duration::ZERO);
    generator.next_id().unwrap();
    let grant = generator.grant().unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    server.kill();
    let killed = Instant::now();
    let mut ids = 0u64;
    let error = loop {
        match generator.next_id() {
            Ok(id) => {
                std::hint::black_box(id);
                ids += 1;
                if ids.is_multiple_of(4096) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Err(error) => break error,
        }
        assert!(killed.elapsed() < Duration::from_secs(60), "never stopped");
    };
    Outage {
        window_left_ms: grant.end_unix_ms.saturating_sub(wall),
        issued_for_ms: killed.elapsed().as_millis() as u64,
        ids,
        error: match error {
            LeaseError::Unreachable { .. } => "Unreachable".into(),
            other => format!("{other:?}"),
        },
    }
}

/// Renewal requests per second of a generator with `window_ms` windows, over `span`.
fn renewals_per_second(window_ms: u64, span: Duration) -> f64 {
    let server = server(window_ms);
    let generator = generator(&server, window_ms, Duration::ZERO);
    let (_, before) = generator.lease_counts();
    let started = Instant::now();
    while started.elapsed() < span {
        std::hint::black_box(generator.next_id().unwrap());
        std::thread::sleep(Duration::from_millis(1));
    }
    let (_, after) = generator.lease_counts();
    (after - before) as f64 / started.elapsed().as_secs_f64()
}

fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Runs the measurements and writes the section.
pub fn run(quick: bool, report: &std::path::Path) {
    let rounds = if quick { 1 } else { 3 };
    let burst_count: u64 = if quick { 2_000_000 } else { 5_000_000 };
    let mut atomic = Vec::new();
    let mut burst = Vec::new();
    let mut sustained = Vec::new();
    for round in 0..rounds {
        eprintln!("leases: round {}…", round + 1);
        atomic.push(atomic_rate(burst_count * 5));
        let server = server(4_000);
        // Borrowing as far as the window: the fast path alone.
        let fast = generator(&server, 4_000, Duration::from_millis(3_900));
        burst.push(burst_rate(&fast, burst_count));
        drop(fast);
        let strict = generator(&server, 4_000, Duration::ZERO);
        sustained.push(sustained_rate(
            &strict,
            Duration::from_millis(if quick { 300 } else { 1000 }),
        ));
    }
    let (atomic, burst, sustained) = (
        median(&mut atomic),
        median(&mut burst),
        median(&mut sustained),
    );
    eprintln!("leases: an outage…");
    let down = outage(if quick { 1000 } else { 3000 });
    eprintln!("leases: renewal traffic…");
    let renewals = renewals_per_second(1000, Duration::from_secs(if quick { 1 } else { 3 }));

    let mut section = String::new();
    let _ = writeln!(section, "{START}");
    let _ = writeln!(
        section,
        "## Leased generators: IDs made in the process\n\n\
         `cargo run --release -p idgen-bench -- leases` (writes this section). One \
         `LeasedGenerator` per row, one thread, against a fresh server (`lease-workers 8`); \
         medians of {rounds} round(s). The layout's ceiling with 41|10|12 is 4,096 IDs per \
         millisecond per worker id. Anchors: CosId's SnowflakeId reaches its 4.095 M/s \
         ceiling; its segment chain runs at 0.9x an AtomicLong.\n"
    );
    let _ = writeln!(
        section,
        "| case | IDs per second | vs the ceiling | vs the atomic loop |"
    );
    let _ = writeln!(section, "|---|---|---|---|");
    let _ = writeln!(
        section,
        "| bare `AtomicU64::fetch_add` loop | {} | {:.1}x | 1.00 |",
        thousands(atomic),
        atomic / CEILING
    );
    let _ = writeln!(
        section,
        "| `try_next_id`, borrowing within the window (the fast path: a clock read, atomic \
         loads, one compare-and-swap) | {} | {:.2}x | {:.2} |",
        thousands(burst),
        burst / CEILING,
        burst / atomic
    );
    let _ = writeln!(
        section,
        "| `next_id` sustained without borrowing (waits when a millisecond's 4,096 are used) | \
         {} | {:.2}x | {:.2} |",
        thousands(sustained),
        sustained / CEILING,
        sustained / atomic
    );
    let _ = writeln!(
        section,
        "\nWith the server killed (SIGKILL) {} ms before its window's end, a generator went on \
         for {} ms ({} IDs, at most 4,096 per ms) and then stopped with `{}` (its margin is \
         20 ms). Renewal traffic: {:.2} `LEASE.RENEW` per second per generator with 1 s \
         windows (one per third of a window: with the default 10 s windows, one request \
         every 3.3 s).",
        down.window_left_ms, down.issued_for_ms, down.ids, down.error, renewals
    );
    let _ = writeln!(section, "{END}");
    print!("{section}");
    if !quick {
        let text = std::fs::read_to_string(report).unwrap_or_default();
        let spliced = match (text.find(START), text.find(END)) {
            (Some(start), Some(end)) if end > start => {
                let after = &text[end + END.len()..];
                format!(
                    "{}{}{}",
                    &text[..start],
                    section,
                    after.strip_prefix('\n').unwrap_or(after)
                )
            }
            _ => format!("{}\n\n{}", text.trim_end(), section),
        };
        std::fs::write(report, spliced).expect("write BENCHMARKS.md");
        eprintln!("wrote the leases section of {}", report.display());
    }
}
