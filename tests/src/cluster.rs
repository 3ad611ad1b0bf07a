//! A real 3-master/3-replica Redis Cluster with the module, started with the project's own
//! `scripts/cluster.sh` (the one users run), stopped by pid when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::server::{free_ports, module_path};

/// Nodes in the cluster: 3 masters, 3 replicas.
pub const NODES: u16 = 6;

/// Every test cluster requires this password (`requirepass`, `masterauth`), as production
/// clusters do: clients and tools must carry it to every node they reach.
pub const PASSWORD: &str = "cluster-secret";

/// A running cluster.
pub struct Cluster {
    dir: PathBuf,
    base_port: u16,
}

/// One node as `CLUSTER NODES` shows it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node's id.
    pub id: String,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Whether it is a master now.
    pub master: bool,
    /// For a replica, the id of its master.
    pub replica_of: Option<String>,
    /// Its slot ranges (masters), as `CLUSTER NODES` prints them.
    pub slots: Vec<String>,
    /// Whether the node's flags say it failed or may have (`fail`, `fail?`).
    pub failed: bool,
}

impl NodeInfo {
    /// Whether `slot` is in one of this node's slot ranges.
    pub fn owns_slot(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| {
            let mut bounds = range
                .split('-')
                .map(|b| b.parse::<u16>().unwrap_or(u16::MAX));
            let low = bounds.next().unwrap_or(u16::MAX);
            let high = bounds.next().unwrap_or(low);
            (low..=high).contains(&slot)
        })
    }

    /// One line of `CLUSTER NODES` (`id ip:port@bus flags master-id … slots`), or `None`
    /// for a line that is not one.
    pub fn parse(line: &str) -> Option<NodeInfo> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = fields
            .get(1)?
            .split('@')
            .next()?
            .rsplit(':')
            .next()?
            .parse()
            .ok()?;
        Some(NodeInfo {
            id: fields[0].to_string(),
            port,
            master: fields.get(2)?.contains("master"),
            failed: fields.get(2)?.contains("fail"),
            replica_of: fields
                .get(3)
                .filter(|master| **master != "-")
                .map(|master| master.to_string()),
            slots: fields.iter().skip(8).map(|s| s.to_string()).collect(),
        })
    }
}

/// The URL of the node on `port`, with the cluster's password.
fn node_url(port: u16) -> String {
    format!("redis://:{PASSWORD}@127.0.0.1:{port}/")
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster.sh")
}

impl Cluster {
    /// Starts a cluster on free ports; panics with the script's output if it fails.
    pub fn start() -> Cluster {
        Cluster::start_with_module(&module_path())
    }

    /// Starts a cluster whose nodes load this build's module with `module_args` added
    /// (e.g. `lease-workers 16`).
    pub fn start_with_module_args(module_args: &[&str]) -> Cluster {
        Cluster::launch(&module_path(), &module_args.join(" "), 2000)
    }

    /// Starts a cluster whose nodes load `module` (e.g. the previous release's).
    pub fn start_with_module(module: &Path) -> Cluster {
        Cluster::launch(module, "", 2000)
    }

    /// Starts a cluster with `cluster-node-timeout` `node_timeout_ms` (2 s elsewhere): how
    /// long a silent node stays a healthy member.
    pub fn start_with_node_timeout(node_timeout_ms: u32) -> Cluster {
        Cluster::launch(&module_path(), "", node_timeout_ms)
    }

    fn launch(module: &Path, module_args: &str, node_timeout_ms: u32) -> Cluster {
        let base_port = free_ports(NODES);
        let dir =
            std::env::temp_dir().join(format!("idgen-cluster-{}-{base_port}", std::process::id()));
        let cluster = Cluster { dir, base_port };
        let output = Command::new("bash")
            .arg(script())
            .args([
                "start",
                "--port",
                &base_port.to_string(),
                "--password",
                PASSWORD,
                "--node-timeout",
                &node_timeout_ms.to_string(),
            ])
            .arg("--dir")
            .arg(&cluster.dir)
            .env("IDGEN_MODULE", module)
            .env("IDGEN_MODULE_ARGS", module_args)
            .output()
            .expect("run scripts/cluster.sh");
        assert!(
            output.status.success(),
            "cluster did not start:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        cluster.wait_healthy();
        cluster
    }

    /// The slot of `key`, as the cluster computes it.
    pub fn slot_of(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.node_conn(self.ports()[0]))
            .unwrap()
    }

    /// The master serving `slot` now.
    pub fn owner(&self, slot: u16) -> NodeInfo {
        self.nodes()
            .into_iter()
            .filter(|node| node.master)
            .find(|node| node.owns_slot(slot))
            .expect("an owner for the slot")
    }

    /// Ports of all nodes.
    pub fn ports(&self) -> Vec<u16> {
        (self.base_port..self.base_port + NODES).collect()
    }

    /// `redis://:PASSWORD@127.0.0.1:port/` of every node, to use as seeds.
    pub fn urls(&self) -> Vec<String> {
        self.ports().iter().map(|&port| node_url(port)).collect()
    }

    /// A plain (non-cluster) connection to one node.
    pub fn node_conn(&self, port: u16) -> redis::Connection {
        redis::Client::open(node_url(port))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to cluster node")
    }

    /// A cluster connection that follows MOVED/ASK.
    pub fn conn(&self) -> redis::cluster::ClusterConnection {
        redis::cluster::ClusterClient::new(self.urls())
            .unwrap()
            .get_connection()
            .expect("cluster connection")
    }

    /// The nodes as a live node sees them.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        for port in self.ports() {
            let Ok(mut conn) = redis::Client::open(node_url(port))
                .unwrap()
                .get_connection_with_timeout(Duration::from_secs(1))
            else {
                continue;
            };
            let Ok(text) = redis::cmd("CLUSTER")
                .arg("NODES")
                .query::<String>(&mut conn)
            else {
                continue;
            };
            return text
                .lines()
                .filter(|line| !line.contains("fail"))
                .filter_map(NodeInfo::parse)
                .collect();
        }
        panic!("no cluster node answers");
    }

    /// A replica of the master with id `master_id`, as the cluster sees it now.
    pub fn replica_of(&self, master_id: &str) -> NodeInfo {
        self.nodes()
            .into_iter()
            .find(|node| node.replica_of.as_deref() == Some(master_id))
            .unwrap_or_else(|| panic!("no replica of master {master_id}"))
    }

    /// The pid of the node on `port`.
    pub fn pid(&self, port: u16) -> u32 {
        let index = port - self.base_port;
        let path = self.dir.join(format!("node-{index}/redis.pid"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("no pid file {}", path.display()))
            .trim()
            .parse()
            .expect("pid")
    }

    /// The server log of the node on `port` (every run of it, as the node appends).
    pub fn log(&self, port: u16) -> String {
        let index = port - self.base_port;
        std::fs::read_to_string(self.dir.join(format!("node-{index}/redis.log")))
            .unwrap_or_default()
    }

    /// Kills the node on `port` with SIGKILL.
    pub fn kill(&self, port: u16) {
        // SAFETY: signalling a process this test started, by its pid.
        unsafe { libc::kill(self.pid(port) as libc::pid_t, libc::SIGKILL) };
    }

    /// Stops the node on `port` (SIGTERM: it flushes its AOF) and starts it again with the
    /// same command line, loading `module` instead of the one it had: a rolling upgrade or
    /// downgrade of one node. Returns when it answers PING (its data loaded).
    pub fn restart_node_onto(&self, port: u16, module: &Path) {
        self.restart_node_with(port, module, &[]);
    }

    /// As [`Cluster::restart_node_onto`], with `extra_module_args` after the node's own
    /// (later module arguments override earlier ones: `["offset", "0"]`).
    pub fn restart_node_with(&self, port: u16, module: &Path, extra_module_args: &[&str]) {
        let pid = self.pid(port) as libc::pid_t;
        // SIGTERM again every 200 ms until the node is gone: a node writing its initial AOF
        // (just after a full sync) ignores it ("Writing initial AOF, can't exit").
        // SAFETY: signalling (and probing with signal 0) a process this test started; the
        // probe errs once the process is gone.
        while unsafe { libc::kill(pid, 0) } == 0 {
            unsafe { libc::kill(pid, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(200));
        }
        let dir = self.dir.join(format!("node-{}", port - self.base_port));
        let saved = std::fs::read(dir.join("command")).expect("the node's command file");
        let mut args: Vec<String> = saved
            .split(|&byte| byte == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect();
        let at = args
            .iter()
            .position(|arg| arg == "--loadmodule")
            .expect("--loadmodule")
            + 1;
        args[at] = module.display().to_string();
        let status = Command::new(&args[0])
            .args(&args[1..])
            .args(extra_module_args)
            .status()
            .expect("start the node again");
        assert!(status.success(), "node on port {port} did not start again");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let pong = redis::Client::open(node_url(port))
                .unwrap()
                .get_connection_with_timeout(Duration::from_secs(1))
                .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn));
            if pong.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node on port {port} never answered"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until every live node reports `cluster_state:ok`.
    pub fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all_ok = self.nodes().iter().all(|node| {
                let mut conn = self.node_conn(node.port);
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut conn)
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            });
            if all_ok {
                return;
            }
            assert!(Instant::now() < deadline, "cluster did not become healthy");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg("--dir")
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
