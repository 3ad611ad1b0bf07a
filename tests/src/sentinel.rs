//! Redis Sentinel processes watching one master: the server binary under test started with
//! `--sentinel` (Debian's `redis-sentinel` is the same program), on loopback ports, each in
//! its own directory (a sentinel rewrites its configuration file as it learns).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::{free_ports, server_binary};

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "ids";

/// How long a sentinel may take to answer PING after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Where one sentinel listens and what it watches.
pub struct SentinelSpec<'a> {
    /// The address it binds and its port.
    pub bind: &'a str,
    pub port: u16,
    /// Its directory: its configuration file (which it rewrites as it learns) and log.
    pub dir: &'a Path,
    /// The master it monitors as [`MASTER_NAME`], and how many sentinels must agree that
    /// the master is down.
    pub master_host: &'a str,
    pub master_port: u16,
    pub quorum: usize,
    /// How long without an answer makes the master down.
    pub down_after_ms: u64,
    /// Replicas that resynchronise with a new master at once.
    pub parallel_syncs: u32,
    /// The password its clients must give, if any.
    pub requirepass: Option<&'a str>,
}

/// Writes `spec`'s sentinel.conf into its directory and starts the server binary under
/// test as a sentinel on it (failover timeout 5 s, protected mode off: tests reach it on
/// other addresses than loopback). The caller waits for it to answer.
pub fn spawn_sentinel(spec: &SentinelSpec) -> std::io::Result<Child> {
    std::fs::create_dir_all(spec.dir)?;
    let config = spec.dir.join("sentinel.conf");
    let dir = spec.dir.display();
    let requirepass = spec
        .requirepass
        .map(|password| format!("requirepass {password}\n"))
        .unwrap_or_default();
    std::fs::write(
        &config,
        format!(
            "port {port}\nbind {bind}\nprotected-mode no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
             sentinel monitor {MASTER_NAME} {master_host} {master_port} {quorum}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n\
             sentinel failover-timeout {MASTER_NAME} 5000\n\
             sentinel parallel-syncs {MASTER_NAME} {parallel_syncs}\n{requirepass}",
            port = spec.port,
            bind = spec.bind,
            master_host = spec.master_host,
            master_port = spec.master_port,
            quorum = spec.quorum,
            down_after_ms = spec.down_after_ms,
            parallel_syncs = spec.parallel_syncs,
        ),
    )?;
    Command::new(server_binary())
        .arg(&config)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// Sentinels watching one master, killed (by pid) and their directories removed when
/// dropped.
pub struct Sentinels {
    processes: Vec<(Child, u16, PathBuf)>,
    /// The sentinels' `requirepass`, if any.
    password: Option<String>,
}

impl Sentinels {
    /// Starts `count` sentinels monitoring the master at `127.0.0.1:master_port` as
    /// [`MASTER_NAME`], with a quorum of a majority of them, a master considered down after
    /// `down_after_ms` without an answer, and a failover timeout of 5 s.
    pub fn start(count: u16, master_port: u16, down_after_ms: u64) -> Sentinels {
        Sentinels::start_protected(count, master_port, down_after_ms, None)
    }

    /// As [`Sentinels::start`]; with a password, every sentinel requires it from its
    /// clients (`requirepass` in sentinel.conf), and [`Sentinels::urls`] carry it.
    pub fn start_protected(
        count: u16,
        master_port: u16,
        down_after_ms: u64,
        password: Option<&str>,
    ) -> Sentinels {
        let first = free_ports(count);
        let quorum = count / 2 + 1;
        let mut sentinels = Sentinels {
            processes: Vec::new(),
            password: password.map(str::to_owned),
        };
        for port in first..first + count {
            let dir =
                std::env::temp_dir().join(format!("idgen-sentinel-{}-{port}", std::process::id()));
            let child = spawn_sentinel(&SentinelSpec {
                bind: "127.0.0.1",
                port,
                dir: &dir,
                master_host: "127.0.0.1",
                master_port,
                quorum: usize::from(quorum),
                down_after_ms,
                parallel_syncs: 1,
                requirepass: password,
            })
            .expect("start a sentinel");
            sentinels.processes.push((child, port, dir));
            sentinels.wait_until_ready(port);
        }
        sentinels
    }

    fn wait_until_ready(&self, port: u16) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let pong: redis::RedisResult<String> = self
                .conn_to(port)
                .and_then(|mut conn| redis::cmd("PING").query(&mut conn));
            if pong.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sentinel on port {port} did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url_of(&self, port: u16) -> String {
        match &self.password {
            None => format!("redis://127.0.0.1:{port}/"),
            Some(password) => format!("redis://:{password}@127.0.0.1:{port}/"),
        }
    }

    fn conn_to(&self, port: u16) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url_of(port))?.get_connection_with_timeout(Duration::from_secs(5))
    }

    /// A new connection to sentinel `index`, authenticated if the sentinels require it.
    pub fn conn(&self, index: usize) -> redis::Connection {
        self.conn_to(self.processes[index].1)
            .expect("connect to the sentinel")
    }

    /// `redis://127.0.0.1:port/` of every sentinel (`redis://:password@…` if they require
    /// one).
    pub fn urls(&self) -> Vec<String> {
        self.processes
            .iter()
            .map(|(_, port, _)| self.url_of(*port))
            .collect()
    }

    /// The port of the master the first sentinel that answers names now.
    pub fn master_port(&self) -> Option<u16> {
        self.processes.iter().find_map(|(_, port, _)| {
            let reply: redis::RedisResult<(String, u16)> =
                self.conn_to(*port).and_then(|mut conn| {
                    redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(MASTER_NAME)
                        .query(&mut conn)
                });
            reply.ok().map(|(_, port)| port)
        })
    }

    /// Waits until every sentinel names a master other than `old_port`, and returns it.
    pub fn wait_for_new_master(&self, old_port: u16, timeout: Duration) -> u16 {
        let deadline = Instant::now() + timeout;
        loop {
            let named: Vec<Option<u16>> = self
                .processes
                .iter()
                .map(|(_, port, _)| {
                    self.conn_to(*port)
                        .and_then(|mut conn| {
                            redis::cmd("SENTINEL")
                                .arg("GET-MASTER-ADDR-BY-NAME")
                                .arg(MASTER_NAME)
                                .query::<(String, u16)>(&mut conn)
                        })
                        .ok()
                        .map(|(_, port)| port)
                })
                .collect();
            if let Some(Some(port)) = named.first() {
                if *port != old_port && named.iter().all(|n| *n == Some(*port)) {
                    return *port;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels did not agree on a new master in {timeout:?}: {named:?}\n{}",
                self.log(0)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asks one sentinel to fail over now (`SENTINEL FAILOVER`), as an operator would.
    /// Asks again while it has no replica it considers fit yet (`NOGOODSLAVE`: it has not
    /// refreshed the replica's INFO since it joined) or is still finishing an earlier
    /// failover (`INPROG`: the sentinels already agree on the new master while the one that
    /// led the failover is still reconfiguring replicas).
    pub fn failover(&self) {
        let port = self.processes[0].1;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let reply: redis::RedisResult<()> = self.conn_to(port).and_then(|mut conn| {
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(MASTER_NAME)
                    .query(&mut conn)
            });
            match reply {
                Err(error)
                    if matches!(error.code(), Some("NOGOODSLAVE" | "INPROG"))
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
                other => return other.expect("SENTINEL FAILOVER"),
            }
        }
    }

    /// The log of sentinel `index`.
    pub fn log(&self, index: usize) -> String {
        std::fs::read_to_string(self.processes[index].2.join("sentinel.log")).unwrap_or_default()
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _, dir) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
