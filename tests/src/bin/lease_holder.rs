//! A leased-generator holder for the fault soak and the real-process tests: one
//! `LeasedGenerator` on a pool, issuing IDs in small bursts, every ID appended to a file.
//!
//! ```text
//! lease_holder --urls URL[,URL…] --pool KEY --dir DIR [--duration-ms D] [--burst N]
//! ```
//!
//! Files in DIR:
//! - `ids.bin`: every ID issued, little-endian u64, written with one `write` per burst (the
//!   kernel keeps it through a SIGKILL of this process: nothing issued is lost).
//! - `log.tsv`: `unix_ms<TAB>event<TAB>detail` lines: `lease` (a new worker id or window),
//!   `unavailable` (the first failure after an ID, with the error), `available` (the first
//!   ID after failures, with the gap in ms since the last ID), `clock` (a clock offset taken
//!   up), `longest` (a gap between two IDs longer than any before), `stopped` (SIGTERM: the
//!   time since the last ID, the longest gap and the number of IDs).
//!
//! The generator reads a monotonic clock the holder can shift: the number of ms in
//! `DIR/clock_offset_ms` (read every 20 ms, absent = 0) is added to the process's own
//! monotonic clock — a clock step on the holder, for the soak's nemesis. A test knob of this
//! binary, through the client's public clock seam (`LeasedGenerator::start_with_clock`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen_client::{LeaseError, LeasedGenerator, LeasedOptions, MonotonicClock};

/// Set by SIGTERM.
static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    TERMINATED.store(true, Ordering::Relaxed);
}

/// The process's monotonic clock plus an offset the nemesis sets. Starts far from zero so
/// that a step back never goes below it.
struct ShiftedClock {
    origin: Instant,
    offset_ms: AtomicI64,
}

const CLOCK_BASE_MS: i64 = 1_000_000_000;

impl MonotonicClock for ShiftedClock {
    fn now_ms(&self) -> u64 {
        let elapsed = self.origin.elapsed().as_millis() as i64;
        (CLOCK_BASE_MS + elapsed + self.offset_ms.load(Ordering::Relaxed)).max(0) as u64
    }
}

struct Options {
    urls: Vec<String>,
    pool: String,
    dir: PathBuf,
    duration_ms: u64,
    burst: u64,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Log(std::fs::File);

impl Log {
    fn line(&mut self, event: &str, detail: &str) {
        let _ = writeln!(self.0, "{}\t{event}\t{detail}", unix_ms());
    }
}

fn main() {
    let options = parse();
    std::fs::create_dir_all(&options.dir).expect("create the holder's directory");
    // SAFETY: installs a handler that only stores to an atomic (async-signal-safe).
    unsafe { libc::signal(libc::SIGTERM, on_sigterm as *const () as libc::sighandler_t) };
    let open = |name: &str| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(options.dir.join(name))
            .unwrap_or_else(|e| panic!("open {name}: {e}"))
    };
    let mut ids_file = open("ids.bin");
    let mut log = Log(open("log.tsv"));
    let clock = Arc::new(ShiftedClock {
        origin: Instant::now(),
        offset_ms: AtomicI64::new(read_offset(&options.dir)),
    });
    watch_offset(options.dir.clone(), Arc::clone(&clock));
    let mut lease_options = LeasedOptions::new(options.pool.clone());
    lease_options.holder_prefix = "soak".into();
    lease_options.duration = Duration::from_millis(options.duration_ms);
    lease_options.start_timeout = Duration::from_secs(120);
    lease_options.request_timeout = Duration::from_millis(500);
    let urls: Vec<&str> = options.urls.iter().map(String::as_str).collect();
    log.line("starting", &options.urls.join(","));
    let started = Instant::now();
    let mut generator = loop {
        match LeasedGenerator::start_with_clock(&urls, lease_options.clone(), clock.clone()) {
            Ok(generator) => break generator,
            Err(error) if !TERMINATED.load(Ordering::Relaxed) => {
                log.line("unavailable", &format!("start: {error}"));
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(_) => return,
        }
    };
    log.line("started", generator.holder());
    let mut last_grant = None;
    let mut last_ok = started;
    let mut failing: Option<String> = None;
    let mut longest_gap_ms = 0u64;
    let mut issued = 0u64;
    let mut buffer: Vec<u8> = Vec::with_capacity(8 * options.burst as usize);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
    while !TERMINATED.load(Ordering::Relaxed) {
        let grant = generator.grant();
        if grant != last_grant {
            if let Some(g) = grant {
                log.line(
                    "lease",
                    &format!(
                        "worker {} units {}..={} end_unix_ms {}",
                        g.worker, g.start_unit, g.end_unit, g.end_unix_ms
                    ),
                );
            }
            last_grant = grant;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let burst = 1 + rng % options.burst;
        buffer.clear();
        let mut error = None;
        for _ in 0..burst {
            match generator.try_next_id() {
                Ok(id) => buffer.extend_from_slice(&id.to_le_bytes()),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        if !buffer.is_empty() {
            ids_file.write_all(&buffer).expect("write ids.bin");
            issued += buffer.len() as u64 / 8;
            let gap = last_ok.elapsed().as_millis() as u64;
            if failing.take().is_some() {
                log.line("available", &format!("gap {gap} ms"));
            }
            if gap > longest_gap_ms {
                longest_gap_ms = gap;
                log.line("longest", &format!("{gap} ms"));
            }
            last_ok = Instant::now();
        }
        if let Some(error) = error.filter(|_| buffer.is_empty()) {
            // Each new reason once (an `Ahead` only says how long to wait).
            // Without the server's countdown ("one can be granted in N ms").
            let reason = match error {
                LeaseError::Ahead { .. } => "ahead of the clock".to_string(),
                LeaseError::NoWorkerFree { .. } => "no worker id free".to_string(),
                other => other.to_string(),
            };
            if failing.as_deref() != Some(reason.as_str()) {
                log.line("unavailable", &reason);
                failing = Some(reason);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let trailing_ms = last_ok.elapsed().as_millis() as u64;
    generator.stop();
    log.line(
        "stopped",
        &format!(
            "trailing gap {trailing_ms} ms, longest gap before it {longest_gap_ms} ms, \
             {issued} ids"
        ),
    );
}

fn read_offset(dir: &Path) -> i64 {
    std::fs::read_to_string(dir.join("clock_offset_ms"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Reads `clock_offset_ms` every 20 ms and applies it; logs each change.
fn watch_offset(dir: PathBuf, clock: Arc<ShiftedClock>) {
    std::thread::spawn(move || {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("log.tsv"))
            .map(Log)
            .ok();
        loop {
            let offset = read_offset(&dir);
            if clock.offset_ms.swap(offset, Ordering::Relaxed) != offset {
                if let Some(log) = log.as_mut() {
                    log.line("clock", &format!("offset {offset} ms"));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

fn parse() -> Options {
    let mut options = Options {
        urls: Vec::new(),
        pool: String::new(),
        dir: PathBuf::new(),
        duration_ms: 3_000,
        burst: 20,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--urls" => options.urls = value().split(',').map(str::to_string).collect(),
            "--pool" => options.pool = value(),
            "--dir" => options.dir = PathBuf::from(value()),
            "--duration-ms" => options.duration_ms = number(&value()),
            "--burst" => options.burst = number::<u64>(&value()).max(1),
            other => usage(&format!("unknown argument '{other}'")),
        }
    }
    if options.urls.is_empty() || options.pool.is_empty() || options.dir.as_os_str().is_empty() {
        usage("--urls, --pool and --dir are needed");
    }
    options
}

fn number<T: std::str::FromStr>(text: &str) -> T {
    text.parse()
        .unwrap_or_else(|_| usage(&format!("'{text}' is not a number")))
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "lease_holder: {problem}\nusage: lease_holder --urls URL[,URL…] --pool KEY --dir DIR \
         [--duration-ms D] [--burst N]"
    );
    std::process::exit(2);
}
