//! Server instructions per request, counted by callgrind: unlike requests per second, the
//! count does not move with what else the machine is doing, so it shows where the
//! module's commands spend more than `INCR` even on a noisy shared machine.
//!
//! Each approach runs on its own redis-server under `valgrind --tool=callgrind`, loaded with
//! the same redis-benchmark run (8 connections, pipeline 32). The figures are the inclusive
//! counts of Redis's `processCommand` (looking the command up, running it, building its
//! reply, propagating its effect) and of `RM_Replicate` inside it, divided by the requests
//! sent. Reading requests and writing to the socket are left out: they depend on the
//! network, not on the command.

use std::process::Command;

use idgen_tests::{Server, ServerOptions};

use crate::driver::{requests_per_second, Load};
use crate::server_side::{Approach, MODULE_ARGS};

/// The approaches counted: every server-side approach of the report.
pub const APPROACHES: [Approach; 6] = Approach::ALL;

/// Instructions per request for one approach.
#[derive(Debug, Clone)]
pub struct InstructionCount {
    pub approach: Approach,
    /// `processCommand`, inclusive.
    pub per_request: f64,
    /// `RM_Replicate` (propagating the effect to replicas and the AOF), inclusive.
    pub replicate_per_request: f64,
    /// `processCommand` per ID issued (per request for one-ID approaches).
    pub per_id: f64,
}

/// Whether valgrind is installed; without it this part of the report is skipped.
pub fn available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

pub fn run(requests: u64) -> Vec<InstructionCount> {
    APPROACHES
        .iter()
        .map(|&approach| count(approach, requests))
        .collect()
}

fn count(approach: Approach, requests: u64) -> InstructionCount {
    // Batches cost more per request; fewer of them keep the run short under callgrind.
    let requests = (requests / approach.ids_per_request().min(10)).max(100);
    let out_file = std::env::temp_dir().join(format!(
        "idgen-callgrind-{}-{:?}.out",
        std::process::id(),
        approach
    ));
    let out_arg = format!("--callgrind-out-file={}", out_file.display());
    let options =
        ServerOptions::module(&MODULE_ARGS).run_under(&["valgrind", "--tool=callgrind", &out_arg]);
    let mut server = Server::start_with(options)
        .unwrap_or_else(|failure| panic!("redis-server under callgrind:\n{}", failure.log));
    let command = approach.command(&server);
    let load = Load {
        clients: 8,
        pipeline: 32,
        requests,
        pinned: false,
    };
    requests_per_second(server.port(), load, &command);
    // A clean exit, so that callgrind writes its counts.
    server.terminate();
    let annotated = Command::new("callgrind_annotate")
        .arg("--inclusive=yes")
        .arg(&out_file)
        .output()
        .expect("run callgrind_annotate (installed with valgrind)");
    let _ = std::fs::remove_file(&out_file);
    let text = String::from_utf8_lossy(&annotated.stdout);
    let per_request = |function: &str| inclusive(&text, function) as f64 / requests as f64;
    let counted = InstructionCount {
        approach,
        per_request: per_request("processCommand"),
        replicate_per_request: per_request("RM_Replicate"),
        per_id: per_request("processCommand") / approach.ids_per_request() as f64,
    };
    eprintln!(
        "{:<28} {:>7.0} instructions per request ({:.0} in RM_Replicate)",
        approach.name(),
        counted.per_request,
        counted.replicate_per_request
    );
    counted
}

/// The inclusive count of `function` in callgrind_annotate's output, whose lines read
/// `356,922,721 (75.82%)  ???:processCommand [/usr/bin/redis-server]`; 0 if absent.
pub fn inclusive(annotated: &str, function: &str) -> u64 {
    let needle = format!(":{function} ");
    annotated
        .lines()
        .find(|line| line.contains(&needle))
        .and_then(|line| line.split_whitespace().next())
        .and_then(|count| count.replace(',', "").parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::inclusive;

    #[test]
    fn reads_inclusive_counts_from_callgrind_annotate() {
        let text = "470,741,510 (100.0%)  PROGRAM TOTALS\n\
                    356,922,721 (75.82%)  ???:processCommand [/usr/bin/redis-check-rdb]\n\
                    127,110,503 (27.00%)  ???:RM_Replicate [/usr/bin/redis-check-rdb]\n";
        assert_eq!(inclusive(text, "processCommand"), 356_922_721);
        assert_eq!(inclusive(text, "RM_Replicate"), 127_110_503);
        assert_eq!(inclusive(text, "incrCommand"), 0);
    }
}
