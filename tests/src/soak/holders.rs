//! The soak's leased-generator holders: `lease_holder` processes (one `LeasedGenerator`
//! each on the soak's pool), each in a network namespace of its own when the nodes have
//! theirs, and what they wrote: every ID issued, and when they could not issue.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::deployment::{Network, Process};

/// The pool every holder leases from.
pub const POOL: &str = "soak:lease-pool";
/// `idgen.lease-workers` of every node: 16 worker ids per node with step 4, 8 with step 8 —
/// room for every holder on one master plus the leases of killed holders until their
/// windows end.
pub const LEASE_WORKERS: u64 = 64;
/// `idgen.lease-max-ms`: windows turn over many times in a 45 s run.
pub const LEASE_MAX_MS: u64 = 2_500;

/// The module settings the soak's nodes need for leases (configuration-file lines).
pub fn module_config(control_fence_off: bool) -> String {
    let mut lines =
        format!("idgen.lease-workers {LEASE_WORKERS}\nidgen.lease-max-ms {LEASE_MAX_MS}\n");
    if control_fence_off {
        lines.push_str("idgen.debug-lease-fence-off yes\n");
    }
    lines
}

/// The `lease_holder` binary next to the running one.
pub fn holder_binary() -> PathBuf {
    let me = std::env::current_exe().expect("the soak's own path");
    me.with_file_name("lease_holder")
}

/// One holder: a slot that runs one process at a time (a restart starts a new generation
/// with files of its own).
pub struct Holder {
    /// `h0`, `h1`…
    pub label: String,
    /// Its index (namespace and link follow it).
    pub index: usize,
    dir: PathBuf,
    urls: Vec<String>,
    namespaces: bool,
    generation: u32,
    process: Process,
    /// The current process's clock offset (ms).
    clock_offset_ms: i64,
}

impl Holder {
    /// A holder that will talk to the nodes at `urls`; its files go under `run_dir/h{index}`.
    pub fn new(network: &Network, index: usize, run_dir: &Path, urls: Vec<String>) -> Holder {
        Holder {
            label: format!("h{index}"),
            index,
            dir: run_dir.join(format!("h{index}")),
            urls,
            namespaces: network.namespaces,
            generation: 0,
            process: Process::default(),
            clock_offset_ms: 0,
        }
    }

    fn generation_dir(&self) -> PathBuf {
        self.dir.join(format!("g{}", self.generation))
    }

    /// Starts a new process (a new generation) unless one runs.
    pub fn start(&mut self) -> Result<(), String> {
        if self.process.running() {
            return Ok(());
        }
        self.generation += 1;
        self.clock_offset_ms = 0;
        let dir = self.generation_dir();
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let namespace = self.namespaces.then(|| format!("soak-h{}", self.index));
        let mut command = Process::command(namespace, holder_binary());
        let stderr = std::fs::File::create(dir.join("stderr.log")).map_err(|e| e.to_string())?;
        let child = command
            .arg("--urls")
            .arg(self.urls.join(","))
            .args(["--pool", POOL, "--duration-ms", &LEASE_MAX_MS.to_string()])
            .arg("--burst")
            .arg("10")
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", holder_binary().display()))?;
        self.process.set(child);
        Ok(())
    }

    /// Whether a process runs (it may be stopped).
    pub fn running(&self) -> bool {
        self.process.running()
    }

    /// Sends `signal` to the process, if one runs.
    pub fn signal(&self, signal: libc::c_int) {
        self.process.signal(signal);
    }

    /// SIGKILL, and reaps the process.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGTERM (the holder releases its lease and writes its figures), SIGKILL after 5 s.
    pub fn stop(&mut self) {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.process.running() && Instant::now() < deadline {
            if self.process.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.process.kill();
    }

    /// Steps the current process's generator clock by `step_ms` (added to the steps
    /// before); the holder takes it up within 20 ms. Returns the offset now in force.
    pub fn step_clock(&mut self, step_ms: i64) -> Result<i64, String> {
        self.clock_offset_ms += step_ms;
        self.write_clock_offset(self.clock_offset_ms)?;
        Ok(self.clock_offset_ms)
    }

    fn write_clock_offset(&self, offset_ms: i64) -> Result<(), String> {
        let dir = self.generation_dir();
        let temporary = dir.join("clock_offset_ms.new");
        std::fs::write(&temporary, offset_ms.to_string()).map_err(|e| e.to_string())?;
        std::fs::rename(&temporary, dir.join("clock_offset_ms")).map_err(|e| e.to_string())
    }

    /// The worker id of the current process's newest lease, if it logged one.
    pub fn worker(&self) -> Option<u64> {
        let log = std::fs::read_to_string(self.generation_dir().join("log.tsv")).ok()?;
        log.lines().rev().find_map(|line| {
            let mut fields = line.split('\t');
            let _ = fields.next()?;
            (fields.next()? == "lease").then_some(())?;
            fields.next()?.split_whitespace().nth(1)?.parse().ok()
        })
    }

    /// Waits (up to `timeout`) until the current process logs a lease other than `not`.
    pub fn wait_for_lease(&self, not: Option<u64>, timeout: Duration) -> Option<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(worker) = self.worker().filter(|w| Some(*w) != not) {
                return Some(worker);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the holder's processes wrote, one record per generation.
    pub fn collect(&self) -> Vec<Generation> {
        (1..=self.generation)
            .map(|generation| {
                let dir = self.dir.join(format!("g{generation}"));
                let bytes = std::fs::read(dir.join("ids.bin")).unwrap_or_default();
                let ids = bytes
                    .chunks_exact(8)
                    .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
                    .collect();
                let log = std::fs::read_to_string(dir.join("log.tsv")).unwrap_or_default();
                Generation {
                    label: format!("{}/g{generation}", self.label),
                    ids,
                    log: parse_log(&log),
                }
            })
            .collect()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill();
    }
}

/// One holder process's output.
#[derive(Debug, Clone, Default)]
pub struct Generation {
    /// `h0/g1`: holder and generation.
    pub label: String,
    /// Every ID it issued, in order.
    pub ids: Vec<u64>,
    /// Its log: (unix ms, event, detail).
    pub log: Vec<(u64, String, String)>,
}

impl Generation {
    /// The longest time without an ID while the process ran, in ms, with the unix ms at
    /// which it ended (the `longest` lines; the last one is the longest).
    pub fn longest_gap(&self) -> Option<(u64, u64)> {
        self.log
            .iter()
            .filter_map(|(at, event, detail)| {
                let gap = match event.as_str() {
                    "longest" => detail.split(' ').next()?,
                    // `trailing gap N ms, …`: the time after the last ID.
                    "stopped" => detail.split(' ').nth(2)?,
                    _ => return None,
                };
                Some((gap.parse().ok()?, *at))
            })
            .max()
    }

    /// How many leases (new worker ids or windows taken up) it logged.
    pub fn leases(&self) -> usize {
        self.log
            .iter()
            .filter(|(_, event, _)| event == "lease")
            .count()
    }
}

fn parse_log(text: &str) -> Vec<(u64, String, String)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            Some((
                fields.next()?.parse().ok()?,
                fields.next()?.to_string(),
                fields.next().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

/// The holders, each behind a lock (faults applied together touch them from two threads).
pub type Holders = Vec<std::sync::Mutex<Holder>>;

impl Holder {
    /// Bytes the current process has written to `ids.bin` (8 per ID).
    fn issued_bytes(&self) -> u64 {
        std::fs::metadata(self.generation_dir().join("ids.bin")).map_or(0, |m| m.len())
    }
}

/// Waits (up to `timeout`) until every holder has issued an ID since the call; returns the
/// labels of those that did not (a generator that never recovers from a fault).
pub fn stalled(holders: &Holders, timeout: Duration) -> Vec<String> {
    let before: Vec<u64> = holders
        .iter()
        .map(|h| h.lock().unwrap().issued_bytes())
        .collect();
    let deadline = Instant::now() + timeout;
    loop {
        let stalled: Vec<String> = holders
            .iter()
            .zip(&before)
            .map(|(h, &bytes)| (h.lock().unwrap(), bytes))
            .filter(|(h, bytes)| h.issued_bytes() <= *bytes)
            .map(|(h, _)| h.label.clone())
            .collect();
        if stalled.is_empty() || Instant::now() > deadline {
            return stalled;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
