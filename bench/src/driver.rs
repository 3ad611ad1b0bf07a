//! Runs `redis-benchmark` (the C driver shipped with Redis, so the client side is not the
//! bottleneck) and reads its requests per second.

use std::process::Command;

/// Connections, pipeline depth and request count of one run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub clients: u32,
    pub pipeline: u32,
    pub requests: u64,
}

/// Requests per second for `command` against 127.0.0.1:`port`.
pub fn requests_per_second(port: u16, load: Load, command: &[String]) -> f64 {
    let output = Command::new("redis-benchmark")
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
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .nth(1)
        .and_then(|line| line.split(',').nth(1))
        .and_then(|field| field.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("no rate in redis-benchmark output for {command:?}:\n{text}"))
}
