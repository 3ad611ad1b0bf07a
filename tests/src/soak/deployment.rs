//! The data nodes and sentinels of a soak, and the network they talk over: each node in its
//! own network namespace behind a link the nemesis can cut (or, without namespaces, all on
//! 127.0.0.1 and no partitions).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sentinel::{spawn_sentinel, SentinelSpec};
use crate::server::{module_path, server_binary};
use crate::values::info_line;

/// Where the nodes run.
#[derive(Debug, Clone)]
pub struct Network {
    /// Node `i` runs in namespace `soak-n{i}` at `10.231.0.{10+i}`, reached over link
    /// `soak-v{i}` of the namespace this program runs in; sentinels bind `10.231.0.1`.
    /// When false, everything runs on 127.0.0.1 and partitions are skipped.
    pub namespaces: bool,
    /// The first port (node `i` listens on `base_port + i`, sentinels above the nodes).
    pub base_port: u16,
}

impl Network {
    /// The address node `index` listens on.
    pub fn node_host(&self, index: usize) -> String {
        if self.namespaces {
            format!("10.231.0.{}", 10 + index)
        } else {
            "127.0.0.1".into()
        }
    }

    /// The address the sentinels and clients use.
    pub fn local_host(&self) -> String {
        if self.namespaces {
            "10.231.0.1".into()
        } else {
            "127.0.0.1".into()
        }
    }

    /// Cuts one direction of the cluster bus: in node `from`'s namespace, TCP to node
    /// `to`'s bus port (`to_port + 10000`) is routed to a blackhole (`cut == false` removes
    /// the rule). `to` still reaches `from`: the connection it opens carries its messages and
    /// `from`'s replies, so `from` hears `to` and `to` never hears `from` (a module message
    /// goes out over its sender's own link). A policy-routing rule, because this kernel
    /// offers no tc drop action.
    pub fn set_one_way_cut(
        &self,
        from: usize,
        to: usize,
        to_port: u16,
        cut: bool,
    ) -> Result<(), String> {
        let bus_port = (u32::from(to_port) + 10_000).to_string();
        let to_host = self.node_host(to);
        let output = Command::new("ip")
            .args(["-n", &format!("soak-n{from}"), "rule"])
            .arg(if cut { "add" } else { "del" })
            .args([
                "to",
                &to_host,
                "ipproto",
                "tcp",
                "dport",
                &bus_port,
                "blackhole",
            ])
            .output()
            .map_err(|e| format!("ip rule: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// Takes node `index`'s link down (`up == false`) or up again.
    pub fn set_link(&self, index: usize, up: bool) -> Result<(), String> {
        link(&format!("soak-v{index}"), up)
    }

    /// Takes leased-generator holder `index`'s link (`soak-w{index}`, to its namespace
    /// `soak-h{index}`) down or up again.
    pub fn set_holder_link(&self, index: usize, up: bool) -> Result<(), String> {
        link(&format!("soak-w{index}"), up)
    }
}

fn link(device: &str, up: bool) -> Result<(), String> {
    let state = if up { "up" } else { "down" };
    let output = Command::new("ip")
        .args(["link", "set", device, state])
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// One data node: a redis-server with the module, its configuration in a file of its own
/// (so that what Sentinel or the cluster rewrite into it survives a restart).
pub struct Node {
    /// `n0`, `n1`…
    pub label: String,
    /// Its index (namespace, link and port follow it).
    pub index: usize,
    /// Its address.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Its module offset.
    pub offset: u64,
    /// Its directory (configuration, log, AOF).
    pub dir: PathBuf,
    namespaces: bool,
    process: Process,
    /// Module arguments a mistaken operator added (`offset 2`), used by the next start.
    mistake: Option<String>,
}

/// How long a node may take to load its data and answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

impl Node {
    /// Writes the node's configuration; `extra` lines are appended (replicaof, cluster…).
    pub fn new(
        network: &Network,
        index: usize,
        run_dir: &Path,
        step: u64,
        offset: u64,
        extra: &str,
    ) -> Node {
        let dir = run_dir.join(format!("n{index}"));
        std::fs::create_dir_all(&dir).expect("create the node's directory");
        let host = network.node_host(index);
        let port = network.base_port + index as u16;
        let config = format!(
            "port {port}\nbind {host}\ndir {dir}\nlogfile {dir}/redis.log\n\
             appendonly yes\nappendfsync everysec\nsave \"\"\n\
             enable-debug-command yes\nenable-protected-configs yes\nprotected-mode no\n\
             repl-diskless-sync-delay 0\n\
             loadmodule {module} step {step} offset {offset}\n{extra}",
            dir = dir.display(),
            module = module_path().display(),
        );
        std::fs::write(dir.join("redis.conf"), config).expect("write redis.conf");
        Node {
            label: format!("n{index}"),
            index,
            host,
            port,
            offset,
            dir,
            namespaces: network.namespaces,
            process: Process::default(),
            mistake: None,
        }
    }

    /// Sets the module arguments the next start adds to the node's own (later ones win):
    /// an operator's mistake such as `offset 2`; `None` for the node's own settings.
    pub fn set_mistake(&mut self, module_args: Option<String>) {
        self.mistake = module_args;
    }

    /// The configuration file the next start reads: `redis.conf`, or a copy whose module
    /// line carries the mistake.
    fn config_file(&self) -> Result<PathBuf, String> {
        let own = self.dir.join("redis.conf");
        let Some(mistake) = &self.mistake else {
            return Ok(own);
        };
        let config = std::fs::read_to_string(&own).map_err(|e| e.to_string())?;
        let mistaken: Vec<String> = config
            .lines()
            .map(|line| {
                if line.starts_with("loadmodule ") {
                    format!("{line} {mistake}")
                } else {
                    line.to_string()
                }
            })
            .collect();
        let path = self.dir.join("redis-mistaken.conf");
        std::fs::write(&path, mistaken.join("\n") + "\n").map_err(|e| e.to_string())?;
        Ok(path)
    }

    /// Starts the server (in its namespace) and waits until it answers PING. Does nothing
    /// if it runs already (two faults applied together may both restart the same node).
    pub fn start(&mut self) -> Result<(), String> {
        if self.process.running() {
            return Ok(());
        }
        let namespace = self.namespaces.then(|| format!("soak-n{}", self.index));
        let mut command = Process::command(namespace, server_binary());
        let stderr = std::fs::File::create(self.dir.join("stderr.log")).expect("stderr.log");
        let child = command
            .arg(self.config_file()?)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("spawn the server: {e}"))?;
        self.process.set(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.process.exited() {
                return Err(format!("{} exited at start ({status})", self.label));
            }
            let pong = self
                .conn()
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if pong.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not answer in {START_TIMEOUT:?}",
                    self.label
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the process runs (it may be stopped).
    pub fn running(&self) -> bool {
        self.process.running()
    }

    /// Sends `signal` to the process, if it runs.
    pub fn signal(&self, signal: libc::c_int) {
        self.process.signal(signal);
    }

    /// SIGKILL, and reaps the process.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// `redis://host:port/`.
    pub fn url(&self) -> String {
        format!("redis://{}:{}/", self.host, self.port)
    }

    /// A connection with 1 s timeouts.
    pub fn conn(&self) -> redis::RedisResult<redis::Connection> {
        let conn =
            redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        conn.set_write_timeout(Some(Duration::from_secs(2)))?;
        Ok(conn)
    }

    /// `ROLE`'s first word (`master`, `slave`), if the node answers.
    pub fn role(&self) -> Option<String> {
        let reply: redis::Value = redis::cmd("ROLE").query(&mut self.conn().ok()?).ok()?;
        match reply {
            redis::Value::Array(items) => match items.first()? {
                redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into()),
                _ => None,
            },
            _ => None,
        }
    }

    /// One INFO field, if the node answers.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut self.conn().ok()?)
            .ok()?;
        info_line(&info, field)
    }

    /// The newest incremental AOF file and its size now.
    pub fn aof_tail(&self) -> Option<(PathBuf, u64)> {
        let newest = std::fs::read_dir(self.dir.join("appendonlydir"))
            .ok()?
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let number: u64 = name
                    .strip_suffix(".incr.aof")?
                    .rsplit('.')
                    .next()?
                    .parse()
                    .ok()?;
                Some((number, entry.path()))
            })
            .max()?
            .1;
        let size = std::fs::metadata(&newest).ok()?.len();
        Some((newest, size))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill();
    }
}

/// The sentinels watching the master as `ids`.
pub struct Sentinels {
    processes: Vec<(Child, u16)>,
    host: String,
}

pub use crate::sentinel::MASTER_NAME;

impl Sentinels {
    /// Starts `count` sentinels on `ports`, watching `master`, quorum a majority, the master
    /// down after `down_after_ms`.
    pub fn start(
        network: &Network,
        run_dir: &Path,
        ports: std::ops::Range<u16>,
        master: &Node,
        down_after_ms: u64,
    ) -> Result<Sentinels, String> {
        let host = network.local_host();
        let quorum = ports.len() / 2 + 1;
        let mut sentinels = Sentinels {
            processes: Vec::new(),
            host: host.clone(),
        };
        for port in ports {
            let child = spawn_sentinel(&SentinelSpec {
                bind: &host,
                port,
                dir: &run_dir.join(format!("sentinel-{port}")),
                master_host: &master.host,
                master_port: master.port,
                quorum,
                down_after_ms,
                parallel_syncs: 2,
                requirepass: None,
            })
            .map_err(|e| format!("start a sentinel: {e}"))?;
            sentinels.processes.push((child, port));
            let deadline = Instant::now() + Duration::from_secs(20);
            while sentinels.query_one(port, &["PING"]).is_none() {
                if Instant::now() > deadline {
                    return Err(format!("sentinel on port {port} did not start"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(sentinels)
    }

    fn query_one(&self, port: u16, args: &[&str]) -> Option<redis::Value> {
        let mut conn = redis::Client::open(format!("redis://{}:{port}/", self.host))
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        redis::cmd(args[0]).arg(&args[1..]).query(&mut conn).ok()
    }

    /// `redis://host:port/` of every sentinel.
    pub fn urls(&self) -> Vec<String> {
        self.processes
            .iter()
            .map(|(_, port)| format!("redis://{}:{port}/", self.host))
            .collect()
    }

    /// The master's port as each sentinel names it now (`None` where one does not answer).
    pub fn named_masters(&self) -> Vec<Option<u16>> {
        self.processes
            .iter()
            .map(|(_, port)| {
                let reply =
                    self.query_one(*port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])?;
                let (_, master_port): (String, u16) = redis::from_redis_value(reply).ok()?;
                Some(master_port)
            })
            .collect()
    }

    /// Asks a sentinel for a failover; its refusal, if it refused.
    pub fn failover(&self, pick: u64) -> Result<(), String> {
        let (_, port) = self.processes[pick as usize % self.processes.len()];
        let mut conn = redis::Client::open(format!("redis://{}:{port}/", self.host))
            .map_err(|e| e.to_string())?
            .get_connection_with_timeout(Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER_NAME)
            .query::<()>(&mut conn)
            .map_err(|e| e.to_string())
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The nodes, each behind a lock (faults applied together touch them from two threads).
pub type Nodes = Vec<Mutex<Node>>;

impl Sentinels {
    /// Whether every sentinel lists at least `count` replicas of the master.
    pub fn know_replicas(&self, count: usize) -> bool {
        self.processes.iter().all(|(_, port)| {
            self.query_one(*port, &["SENTINEL", "REPLICAS", MASTER_NAME])
                .and_then(|reply| match reply {
                    redis::Value::Array(items) => Some(items.len() >= count),
                    _ => None,
                })
                .unwrap_or(false)
        })
    }
}

/// A process the soak started (a data node or a lease holder): running (perhaps stopped),
/// or none.
#[derive(Debug, Default)]
pub struct Process(Option<Child>);

impl Process {
    /// A command running `program`, in network namespace `namespace` when one is given.
    pub fn command(namespace: Option<String>, program: impl AsRef<OsStr>) -> Command {
        match namespace {
            Some(namespace) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", &namespace]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    /// Keeps `child` as the running process.
    pub fn set(&mut self, child: Child) {
        self.0 = Some(child);
    }

    /// Whether a process runs (it may be stopped).
    pub fn running(&self) -> bool {
        self.0.is_some()
    }

    /// Sends `signal` to the process, if one runs.
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.0 {
            // SAFETY: signalling a process this program started and has not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        }
    }

    /// SIGKILL, and reaps the process.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The exit status, if the process has exited (it is then forgotten).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.0.as_mut()?.try_wait().ok()??;
        self.0 = None;
        Some(status)
    }
}
