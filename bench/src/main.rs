//! Side-by-side benchmarks of redis-idgen, written to BENCHMARKS.md and bench/throughput.svg.
//!
//! `cargo run --release -p idgen-bench -- [--quick] [--rounds N] [--floor-only]`, or
//! `cargo run --release -p idgen-bench -- buffers [--quick] [--rtts 5,25] [--tasks 4,16]
//! [--local-only]` for the client buffers alone, on a 2-worker runtime, and
//! `cargo run --release -p idgen-bench -- leases [--quick]` for leased generators alone
//! (scripts/bench.sh builds the module first). `--quick` runs a small version for a smoke
//! test; `--floor-only` only compares idgen's commands with the C floor on every server and
//! prints the ratios (`IDGEN_MODULE=path/to/libidgen.so` compares another build:
//! `scripts/bench.sh --floor-only`).

mod buffers;
mod client_side;
mod cpus;
mod driver;
mod floor;
mod instructions;
mod key_memory;
mod leased;
mod local_path;
mod plot;
mod report;
mod seed;
mod server_side;
mod stats;
mod write_traffic;

use std::path::Path;
use std::process::Command;

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
                    / 1024
                    / 1024
            })
        })
        .unwrap_or(0);
    let version = |program: &str, flag: &str| {
        Command::new(program)
            .arg(flag)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{cpu}, {cores} cores, {memory} GiB; {}; {}",
        version("redis-server", "--version"),
        version("rustc", "--version")
    )
}

/// What `--help` prints: the usage in this file's header.
const USAGE: &str = "\
idgen-bench: side-by-side benchmarks of redis-idgen, written to BENCHMARKS.md.

  idgen-bench [--quick] [--rounds N] [--floor-only]
  idgen-bench buffers [--quick] [--rtts 5,25] [--tasks 4,16] [--local-only]
  idgen-bench leases [--quick]

Run it through scripts/bench.sh, which builds the module and the C floor module first
(IDGEN_FLOOR_MODULE). --quick runs a small version; --floor-only compares idgen's commands
with the C floor on every server and prints the ratios (IDGEN_MODULE=path/to/libidgen.so
compares another build).
";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return;
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if args.get(1).is_some_and(|a| a == "buffers") {
        // The buffers' cases are stated for two workers, whatever the machine.
        runtime
            .worker_threads(buffers::WORKERS)
            .thread_name(buffers::WORKER_NAME);
    }
    runtime.enable_all().build().unwrap().block_on(run(args));
}

/// The comma-separated list after `flag`, if given.
fn list<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<Vec<T>> {
    let i = args.iter().position(|a| a == flag)?;
    let items = args.get(i + 1).map(|list| {
        list.split(',')
            .map(|item| item.trim().parse().ok())
            .collect::<Option<Vec<T>>>()
    });
    Some(
        items
            .flatten()
            .unwrap_or_else(|| panic!("{flag} takes a comma-separated list of numbers")),
    )
}

async fn run(args: Vec<String>) {
    let quick = args.iter().any(|a| a == "--quick");
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 });
    let scale = if quick { 0.1 } else { 1.0 };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if args.get(1).is_some_and(|a| a == "buffers") {
        // Only the client buffers through a delay proxy, and their local path: their own
        // section of BENCHMARKS.md.
        if args.iter().any(|a| a == "--local-only") {
            buffers::run_local_only(quick).await;
        } else {
            let cases = buffers::Cases {
                quick,
                rtts: list(&args, "--rtts"),
                tasks: list(&args, "--tasks"),
            };
            buffers::run(&cases, &root.join("BENCHMARKS.md")).await;
        }
        return;
    }
    if args.get(1).is_some_and(|a| a == "leases") {
        // Leased generators alone: their own section at the end of BENCHMARKS.md.
        let report = root.join("BENCHMARKS.md");
        tokio::task::spawn_blocking(move || leased::run(quick, &report))
            .await
            .unwrap();
        return;
    }
    if args.iter().any(|a| a == "--floor-only") {
        // Only the floor comparison (rates and, with valgrind, instructions), printed rather
        // than written into BENCHMARKS.md: for comparing two builds of the module
        // (`IDGEN_MODULE=path/to/libidgen.so`) without the full run.
        let count_instructions = instructions::available();
        let floors =
            tokio::task::spawn_blocking(move || floor::run(rounds, scale, count_instructions))
                .await
                .unwrap();
        print!("{}", report::floor_summary(&floors));
        return;
    }

    eprintln!("server side…");
    let server = tokio::task::spawn_blocking(move || server_side::run(rounds, scale))
        .await
        .unwrap();
    let count_instructions = instructions::available();
    eprintln!("the floor of a module command, on every server CI tests…");
    let floors = tokio::task::spawn_blocking(move || floor::run(rounds, scale, count_instructions))
        .await
        .unwrap();
    eprintln!("client side…");
    let client = client_side::run(rounds, scale).await;
    eprintln!("time to N IDs…");
    let counts: &[u64] = if quick {
        &seed::COUNTS[..2]
    } else {
        &seed::COUNTS
    };
    let seed = seed::run(counts).await;
    eprintln!(
        "AOF and replication bytes per {} single calls…",
        write_traffic::CALLS
    );
    let traffic = tokio::task::spawn_blocking(write_traffic::run)
        .await
        .unwrap();
    eprintln!("memory per key ({} keys)…", key_memory::KEYS);
    let keys = if quick { 100_000 } else { key_memory::KEYS };
    let memory = tokio::task::spawn_blocking(move || key_memory::run(keys))
        .await
        .unwrap();
    let instructions = if count_instructions {
        eprintln!("instructions per request (callgrind)…");
        let requests = if quick { 2_000 } else { 20_000 };
        tokio::task::spawn_blocking(move || instructions::run(requests))
            .await
            .unwrap()
    } else {
        eprintln!("valgrind is not installed: instructions per request are skipped");
        Vec::new()
    };

    let context = report::Context {
        machine: machine(),
        command: if quick {
            "scripts/bench.sh --quick".into()
        } else {
            "scripts/bench.sh".into()
        },
        rounds,
    };
    let results = report::Results {
        server,
        floors,
        instructions,
        traffic,
        memory,
        client,
        seed,
    };
    let mut text = report::render(&context, &results);
    if !quick {
        let previous = std::fs::read_to_string(root.join("BENCHMARKS.md")).unwrap_or_default();
        let kept = buffers::kept_part(&previous);
        if !kept.is_empty() {
            text = format!("{}\n\n{kept}", text.trim_end());
        }
    }
    let (report_path, plot_path) = if quick {
        (
            std::env::temp_dir().join("BENCHMARKS.quick.md"),
            std::env::temp_dir().join("throughput.quick.svg"),
        )
    } else {
        (
            root.join("BENCHMARKS.md"),
            root.join("bench/throughput.svg"),
        )
    };
    std::fs::write(&report_path, text).expect("write the report");
    plot::draw(&results.server, &plot_path).expect("draw the plot");
    eprintln!(
        "wrote {} and {}",
        report_path.display(),
        plot_path.display()
    );
}
