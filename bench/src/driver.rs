//! Runs `redis-benchmark` (the C driver shipped with Redis, so the client side is not the
//! bottleneck) and reads its requests per second.

use std::time::{Duration, Instant};

use crate::cpus;

/// Connections, pipeline depth and request count of one run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub clients: u32,
    pub pipeline: u32,
    pub requests: u64,
    /// Run redis-benchmark on its own core, for a server started on the other one
    /// (`cpus::server_launcher`); ignored where the machine cannot pin.
    pub pinned: bool,
}

/// What one `redis-benchmark` run measured.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// Requests per second, as redis-benchmark reports it; `None` when it stopped without a
    /// rate. redis-benchmark 7.0 stops at the first error reply, and a refusal (`DRIFT`
    /// when a batched cell asks for more IDs than the layout's clock may issue) is the
    /// product working: the caller then counts what the server issued over `elapsed`.
    pub requests_per_second: Option<f64>,
    /// Wall time of the whole run, process start included.
    pub elapsed: Duration,
}

/// Runs `command` against 127.0.0.1:`port` under `load`.
pub fn run(port: u16, load: Load, command: &[String]) -> Run {
    let started = Instant::now();
    let output = cpus::driver_command("redis-benchmark", load.pinned)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-c",
            &load.clients.to_string(),
            "-P",
            &load.pipeline.to_string(),
        ])
        .args(["-n", &load.requests.to_string(), "--csv"])
        .args(command)
        .output()
        .expect("run redis-benchmark (installed with redis-tools)");
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&output.stdout);
    let requests_per_second = text
        .lines()
        .nth(1)
        .and_then(|line| line.split(',').nth(1))
        .and_then(|field| field.trim_matches('"').parse().ok());
    Run {
        requests_per_second,
        elapsed,
    }
}

/// Requests per second for a command that is never refused (INCR, and the cells where a
/// refusal would be a bug); panics with redis-benchmark's output otherwise.
pub fn requests_per_second(port: u16, load: Load, command: &[String]) -> f64 {
    run(port, load, command)
        .requests_per_second
        .unwrap_or_else(|| panic!("redis-benchmark gave no rate for {command:?} (an error reply?)"))
}
