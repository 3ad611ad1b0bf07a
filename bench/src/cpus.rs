//! Where the measured server and its load generator run: on separate cores when the
//! machine has two or more and `taskset` (util-linux) is there.
//!
//! The server runs commands on one thread and `redis-benchmark` on one more. Left to the
//! scheduler on a two-core machine, they share a core now and then, and a round's rate
//! drops by a third for reasons that have nothing to do with the command measured (single
//! rounds of the floor comparison ranged 0.54–1.70 unpinned). Pinned, both commands of a
//! comparison run under the same placement. The Rust client's benchmarks are not pinned:
//! its runtime spreads tasks over every core, as it would in an application.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The core the server runs on, and the core `redis-benchmark` runs on.
const SERVER_CORE: &str = "0";
const DRIVER_CORE: &str = "1";

/// Whether servers and drivers are pinned (decided once per run).
pub fn pinned() -> bool {
    static PINNED: OnceLock<bool> = OnceLock::new();
    *PINNED.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let taskset = Command::new("taskset")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        cores >= 2 && taskset
    })
}

/// The launcher that starts a measured server on its core (empty when not pinned).
pub fn server_launcher() -> Vec<&'static str> {
    if pinned() {
        vec!["taskset", "-c", SERVER_CORE]
    } else {
        Vec::new()
    }
}

/// The command that runs `program` as a load generator: on its core if `pin` and the
/// machine can pin, else where the scheduler puts it.
pub fn driver_command(program: &str, pin: bool) -> Command {
    if pin && pinned() {
        let mut command = Command::new("taskset");
        command.args(["-c", DRIVER_CORE, program]);
        command
    } else {
        Command::new(program)
    }
}

/// How the report describes the placement.
pub fn placement() -> &'static str {
    if pinned() {
        "the server pinned to core 0 and redis-benchmark to core 1 (taskset)"
    } else {
        "server and redis-benchmark placed by the scheduler (fewer than two cores, or no taskset)"
    }
}
