//! idgen's commands beside the floor of any module command, on every server CI tests.
//!
//! The floor is `IDFLOOR.NEXTID` (bench/floor/floor.c): a module command in C that shares
//! no code with idgen, with `SNOWFLAKE.NEXT`'s name length, flags and key spec, which opens
//! its existing key for reading and replies a 19-digit integer. One server per version runs
//! both modules; rounds of `redis-benchmark -c 50 -P 32` for `INCR`, the floor,
//! `SNOWFLAKE.NEXT` and `SEGMENT.NEXT` are interleaved against it, so every command sees
//! the same machine load and the same server. Callgrind then counts instructions per
//! request for each on one server under valgrind, phase by phase (`callgrind_control`
//! zeroes the counts before a phase and dumps them after it), so the four share its hash
//! seed and key table too.

use std::path::{Path, PathBuf};
use std::process::Command;

use idgen_tests::{Server, ServerOptions};

use crate::cpus;
use crate::driver::{requests_per_second, Load};
use crate::server_side::MODULE_ARGS;
use crate::stats::median;

/// A command of the comparison: its label and the words sent.
pub struct FloorCommand {
    pub label: &'static str,
    pub words: [&'static str; 2],
}

/// The commands compared, in the order they run in each round.
pub const COMMANDS: [FloorCommand; 4] = [
    FloorCommand {
        label: "INCR",
        words: ["INCR", "ki"],
    },
    FloorCommand {
        label: "IDFLOOR.NEXTID (the floor)",
        words: ["IDFLOOR.NEXTID", "kf"],
    },
    FloorCommand {
        label: "SNOWFLAKE.NEXT",
        words: ["SNOWFLAKE.NEXT", "ks"],
    },
    FloorCommand {
        label: "SEGMENT.NEXT",
        words: ["SEGMENT.NEXT", "kg"],
    },
];

/// The least number of interleaved rounds per server.
const FLOOR_ROUNDS: usize = 25;

/// Index of the floor in [`COMMANDS`].
pub const FLOOR: usize = 1;
/// Index of `INCR` in [`COMMANDS`].
pub const INCR: usize = 0;

/// What one server measured.
pub struct ServerFloor {
    /// The server's name in scripts/servers.sh (`redis-7.0`).
    pub name: String,
    /// Its `--version` line.
    pub version: String,
    /// Median requests per second of each of [`COMMANDS`].
    pub rates: Vec<f64>,
    /// Each round's rates, by command.
    pub rounds: Vec<Vec<f64>>,
    /// Instructions per request of each of [`COMMANDS`] (callgrind), when valgrind is
    /// installed: the whole server's, and `processCommand`'s inclusive.
    pub instructions: Option<Vec<Instructions>>,
}

impl ServerFloor {
    /// Each round's rate of command `index` over command `base`'s in the same round.
    pub fn round_ratios(&self, index: usize, base: usize) -> Vec<f64> {
        self.rounds[index]
            .iter()
            .zip(&self.rounds[base])
            .map(|(ours, theirs)| ours / theirs)
            .collect()
    }

    /// The median of [`ServerFloor::round_ratios`]: robust to a round the machine slowed
    /// as a whole.
    pub fn ratio_to(&self, index: usize, base: usize) -> f64 {
        median(&self.round_ratios(index, base))
    }
}

/// Instructions per request of one command.
#[derive(Clone, Copy)]
pub struct Instructions {
    /// Everything the server executed during the phase (reading requests, writing replies
    /// and the event loop included) but its once-a-tick timer work, per request.
    pub total: f64,
    /// `processCommand`, inclusive: look up, run, reply.
    pub process_command: f64,
    /// For idgen's commands: the floor's counts when it opens this command's key. Where
    /// the server's random hash seed puts a key in its table moves a lookup by up to about
    /// 150 instructions, so the floor is compared on the same key.
    pub floor_on_same_key: Option<FloorOnKey>,
}

/// The floor's counts on another command's key.
#[derive(Clone, Copy)]
pub struct FloorOnKey {
    /// As [`Instructions::total`].
    pub total: f64,
    /// As [`Instructions::process_command`].
    pub process_command: f64,
}

impl Instructions {
    /// The floor's instructions per request over these. Where the floor ran on the same
    /// key: its whole request over its whole request plus what this command adds inside
    /// `processCommand`. Reading requests and writing replies are the same work for both,
    /// but under valgrind how many requests one read takes varies from phase to phase
    /// (up to 260 instructions a request seen between two phases of one command).
    pub fn floor_ratio(&self, floor: &Instructions) -> f64 {
        match self.floor_on_same_key {
            Some(same_key) => {
                same_key.total / (same_key.total + self.process_command - same_key.process_command)
            }
            None => floor.total / self.total,
        }
    }
}

/// The floor module, built by scripts/floor-module.sh (`IDGEN_FLOOR_MODULE` names it).
pub fn floor_module() -> PathBuf {
    std::env::var_os("IDGEN_FLOOR_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/release/libidgen_floor.so"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The servers CI tests, as scripts/servers.sh names them, with their programs.
pub fn servers() -> Vec<(String, PathBuf)> {
    let script = root().join("scripts/servers.sh");
    let names = Command::new(&script)
        .arg("names")
        .output()
        .expect("run scripts/servers.sh names");
    String::from_utf8_lossy(&names.stdout)
        .lines()
        .map(|name| {
            let path = Command::new(&script)
                .args(["path", name])
                .output()
                .expect("run scripts/servers.sh path");
            assert!(
                path.status.success(),
                "{name} is not installed: run scripts/servers.sh install"
            );
            let path = String::from_utf8_lossy(&path.stdout).trim().to_string();
            (name.to_string(), PathBuf::from(path))
        })
        .collect()
}

fn options(program: &Path) -> ServerOptions {
    let floor = floor_module();
    assert!(
        floor.exists(),
        "{} is missing: run scripts/floor-module.sh",
        floor.display()
    );
    ServerOptions::module(&MODULE_ARGS)
        .binary(program.to_path_buf())
        .server_args(&["--loadmodule", &floor.to_string_lossy()])
}

/// Every command's key exists before it is measured, as in steady use.
fn seed_keys(server: &Server) {
    let mut conn = server.conn();
    let _: () = redis::cmd("SET").arg("kf").arg(1).query(&mut conn).unwrap();
    let _: i64 = redis::cmd("SNOWFLAKE.NEXT")
        .arg("ks")
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("SEGMENT.NEXT")
        .arg("kg")
        .query(&mut conn)
        .unwrap();
}

/// A command's words as redis-benchmark's arguments.
fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

pub fn run(rounds: usize, scale: f64, count_instructions: bool) -> Vec<ServerFloor> {
    servers()
        .into_iter()
        .map(|(name, program)| {
            let server = Server::start_with(options(&program).run_under(&cpus::server_launcher()))
                .unwrap_or_else(|failure| panic!("{name} did not start:\n{}", failure.log));
            let version = version_of(&program);
            seed_keys(&server);
            let load = Load {
                clients: 50,
                pipeline: 32,
                requests: (300_000.0 * scale) as u64,
                pinned: true,
            };
            let mut by_command = vec![Vec::new(); COMMANDS.len()];
            // Single rounds swing by ±30% on a shared VM, whatever their length: many short
            // rounds (about a quarter second each), pinned, put the two commands of a ratio
            // closer in time and give the median more rounds. Nine rounds of a million
            // requests, unpinned, put SNOWFLAKE.NEXT's median anywhere in 0.85–1.02 over four
            // full runs; 30 pinned rounds of 300,000 (Redis 7.0.15) had 21 of their ratios
            // within 0.90–0.93.
            for round in 0..rounds.max(FLOOR_ROUNDS) {
                for (index, command) in COMMANDS.iter().enumerate() {
                    let rate = requests_per_second(server.port(), load, &owned(&command.words));
                    eprintln!(
                        "{name} round {}: {:<18} {:>12.0} requests/s",
                        round + 1,
                        command.label,
                        rate
                    );
                    by_command[index].push(rate);
                }
            }
            drop(server);
            let instructions = count_instructions.then(|| {
                let requests = (20_000.0 * scale) as u64;
                instructions(&name, &program, requests.max(1_000))
            });
            ServerFloor {
                name,
                version,
                rates: by_command.iter().map(|rates| median(rates)).collect(),
                rounds: by_command,
                instructions,
            }
        })
        .collect()
}

fn version_of(program: &Path) -> String {
    Command::new(program)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Instructions per request of each command, on one server under callgrind.
fn instructions(name: &str, program: &Path, requests: u64) -> Vec<Instructions> {
    let out = std::env::temp_dir().join(format!(
        "idgen-floor-callgrind-{}-{name}.out",
        std::process::id()
    ));
    let out_arg = format!("--callgrind-out-file={}", out.display());
    let mut server =
        Server::start_with(options(program).run_under(&["valgrind", "--tool=callgrind", &out_arg]))
            .unwrap_or_else(|failure| panic!("{name} under callgrind:\n{}", failure.log));
    seed_keys(&server);
    let pid = server_pid(&server);
    let load = Load {
        clients: 8,
        pipeline: 32,
        requests,
        // Under valgrind, instructions are counted, not time: placement does not matter.
        pinned: false,
    };
    let mut phases = 0;
    let mut count = |words: &[&str]| {
        control(&pid, &["-z"]);
        requests_per_second(server.port(), load, &owned(words));
        phases += 1;
        control(&pid, &["-d", &format!("phase{phases}")]);
        // Dumps are numbered from 1 in the order they are made.
        let dump = PathBuf::from(format!("{}.{phases}", out.display()));
        let annotated = Command::new("callgrind_annotate")
            .arg("--inclusive=yes")
            .arg(&dump)
            .output()
            .expect("run callgrind_annotate (installed with valgrind)");
        let text = String::from_utf8_lossy(&annotated.stdout);
        let per_request = |count: u64| count as f64 / requests as f64;
        // The server's timer work (serverCron) runs per second of wall time, not per
        // request, and a phase runs for seconds under valgrind: counted, it would charge the
        // slower command for the time valgrind took. It is left out.
        let cron = crate::instructions::inclusive(&text, "serverCron");
        let _ = std::fs::remove_file(&dump);
        Instructions {
            total: per_request(program_total(&text).saturating_sub(cron)),
            process_command: per_request(crate::instructions::inclusive(&text, "processCommand")),
            floor_on_same_key: None,
        }
    };
    let mut counts = Vec::new();
    for (index, command) in COMMANDS.iter().enumerate() {
        let mut counted = count(&command.words);
        if index > FLOOR {
            let floor = count(&[COMMANDS[FLOOR].words[0], command.words[1]]);
            counted.floor_on_same_key = Some(FloorOnKey {
                total: floor.total,
                process_command: floor.process_command,
            });
        }
        eprintln!(
            "{name} callgrind: {:<18} {:>6.0} instructions per request ({:.0} in processCommand){}",
            command.label,
            counted.total,
            counted.process_command,
            counted
                .floor_on_same_key
                .map_or(String::new(), |floor| format!(
                    "; the floor on its key {:.0} ({:.0})",
                    floor.total, floor.process_command
                ))
        );
        counts.push(counted);
    }
    server.terminate();
    let _ = std::fs::remove_file(&out);
    counts
}

/// The pid of the server's process: valgrind runs the server in its own process, so the
/// server's `INFO` names the pid callgrind_control needs.
fn server_pid(server: &Server) -> String {
    server
        .info_value("server", "process_id")
        .expect("INFO server names process_id")
}

fn control(pid: &str, args: &[&str]) {
    let status = Command::new("callgrind_control")
        .args(args)
        .arg(pid)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run callgrind_control (installed with valgrind)");
    assert!(status.success(), "callgrind_control {args:?} {pid} failed");
}

/// `PROGRAM TOTALS` of callgrind_annotate's output: `3,946,000 (100.0%)  PROGRAM TOTALS`.
fn program_total(annotated: &str) -> u64 {
    annotated
        .lines()
        .find(|line| line.contains("PROGRAM TOTALS"))
        .and_then(|line| line.split_whitespace().next())
        .and_then(|count| count.replace(',', "").parse().ok())
        .unwrap_or(0)
}
