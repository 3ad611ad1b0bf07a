//! [`LeasedGenerator`]: snowflake IDs generated in this process, at memory speed, under a
//! worker id leased from the module (`LEASE.ACQUIRE`) as a time window.
//!
//! The fast path ([`LeasedGenerator::try_next_id`]) is a few atomic loads and one
//! compare-and-swap on the last ID ([`LeaseCursor`]): no `.await`, no lock. A background
//! thread (no async runtime needed) acquires the lease, renews it once a third of its window
//! has passed, and acquires another when it is lost. An ID's time field always lies inside
//! the window the server granted for the worker id it carries, so IDs never equal another
//! holder's or the module's own (`SNOWFLAKE.NEXT` never uses leased worker ids), whatever
//! this machine's clock does; the generator also stops issuing at the window's end by its own
//! monotonic clock, counted from when it *sent* the request, minus a margin, so a process
//! frozen past its window issues nothing when it wakes.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use idgen_core::Layout;

/// A monotonic clock in milliseconds (injected in tests).
pub trait MonotonicClock: Send + Sync + 'static {
    /// Milliseconds since some fixed point; never decreases.
    fn now_ms(&self) -> u64;
}

/// The process's monotonic clock ([`Instant`]).
#[derive(Debug, Clone, Copy)]
pub struct SystemMonotonic {
    origin: Instant,
}

impl Default for SystemMonotonic {
    fn default() -> Self {
        SystemMonotonic {
            origin: Instant::now(),
        }
    }
}

impl MonotonicClock for SystemMonotonic {
    #[inline]
    fn now_ms(&self) -> u64 {
        // 1 ms in, so that 0 never means "now". Seconds and sub-second milliseconds rather
        // than `as_millis` (a 128-bit division, on every ID).
        let elapsed = self.origin.elapsed();
        elapsed.as_secs() * 1000 + u64::from(elapsed.subsec_millis()) + 1
    }
}

/// The generator's clock: the process's own (no dynamic call on the fast path) or one
/// injected.
#[derive(Debug, Clone)]
enum Clock {
    System(SystemMonotonic),
    Injected(Arc<dyn MonotonicClock>),
}

impl Clock {
    #[inline]
    fn now_ms(&self) -> u64 {
        match self {
            Clock::System(clock) => clock.now_ms(),
            Clock::Injected(clock) => clock.now_ms(),
        }
    }
}

/// Why the generator gave no ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseError {
    /// No lease yet, and the pool had no worker id free at the last attempt (`-EXHAUSTED`):
    /// every worker id is held, or fenced after a server start or failover.
    NoWorkerFree {
        /// The server's message.
        message: String,
    },
    /// The lease's window ended (or its IDs were used up) and no new lease is in place yet.
    WindowEnded,
    /// The window ended while the server could not be reached (or kept failing): the
    /// generator issued IDs until the window's end, and stops until a server answers.
    Unreachable {
        /// The last failure.
        message: String,
    },
    /// More IDs were asked for than the layout's ceiling allows so far ahead of the clock
    /// (or the window starts ahead): the same call works in about `retry_in_ms`.
    Ahead {
        /// About when an ID is available again.
        retry_in_ms: u64,
    },
    /// The server refused for another reason (leases off, no permission, bad settings): a
    /// change of configuration is needed.
    Refused {
        /// The reply's code and message.
        message: String,
    },
    /// The generator was stopped.
    Stopped,
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::NoWorkerFree { message } => {
                write!(f, "no worker id free in the lease pool: {message}")
            }
            LeaseError::WindowEnded => write!(
                f,
                "the lease window ended and no new lease is in place yet (retry shortly)"
            ),
            LeaseError::Unreachable { message } => write!(
                f,
                "the lease window ended while Redis was unreachable: {message}"
            ),
            LeaseError::Ahead { retry_in_ms } => write!(
                f,
                "IDs asked for faster than the layout's ceiling allows: retry in {retry_in_ms} ms"
            ),
            LeaseError::Refused { message } => write!(f, "the lease was refused: {message}"),
            LeaseError::Stopped => write!(f, "the leased generator was stopped"),
        }
    }
}

impl std::error::Error for LeaseError {}

/// A granted window, as the server replied it (`LEASE.ACQUIRE`, `LEASE.RENEW`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The worker id (the ID's shard field).
    pub worker: u64,
    /// First time unit of the window (since the layout's epoch).
    pub start_unit: u64,
    /// Last time unit of the window.
    pub end_unit: u64,
    /// The window's last unix millisecond.
    pub end_unix_ms: u64,
    /// The server's clock when it granted.
    pub server_now_ms: u64,
}

/// Why [`LeaseCursor::next`] gave no ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// No lease installed.
    NoLease,
    /// Past the deadline, or the window's IDs are used up.
    Ended,
    /// Too far ahead of the clock: retry in this many ms.
    Ahead(u64),
}

const VALID: u64 = 1 << 63;

/// The lock-free state of a generator: the current lease (worker id and window end), when to
/// stop by the monotonic clock, the offset from it to the server's clock, and the last ID.
#[derive(Debug)]
pub(crate) struct LeaseCursor {
    layout: Layout,
    /// `VALID | worker << time_bits | end_unit`, or 0: no lease.
    bounds: AtomicU64,
    /// Monotonic ms from which nothing is issued under the current lease.
    deadline: AtomicU64,
    /// Server unix ms minus monotonic ms, as measured at the last grant (the server's clock
    /// read after the request was sent, so the estimate runs ahead, never behind).
    delta: AtomicI64,
    /// The last ID issued.
    cursor: AtomicU64,
    /// How many time units IDs may run ahead of the clock (borrowing, like the module).
    max_borrow_units: u64,
    /// Subtracted from each window's end (ms).
    margin_ms: u64,
}

impl LeaseCursor {
    pub(crate) fn new(layout: Layout, max_borrow_ms: u64, margin_ms: u64) -> Self {
        LeaseCursor {
            layout,
            bounds: AtomicU64::new(0),
            deadline: AtomicU64::new(0),
            delta: AtomicI64::new(0),
            cursor: AtomicU64::new(0),
            max_borrow_units: layout.units_of_ms(max_borrow_ms),
            margin_ms,
        }
    }

    /// Installs a grant, or with `renewal` a renewal of the installed lease, whose request was
    /// sent at monotonic `sent_ms`.
    pub(crate) fn install(&self, grant: Grant, sent_ms: u64, renewal: bool) {
        let layout = self.layout;
        // Every later ID is above the first of the window, so its time lies at or after the
        // window's start, whatever lease an issuer read.
        let first = layout.compose(grant.start_unit, 0, 0);
        self.cursor
            .fetch_max(first.saturating_sub(1), Ordering::AcqRel);
        // The server's clock at the send, as this reply tells it. A renewal never moves the
        // generator's time back: after a step back of the server's clock the window's end
        // stays where it was, and adopting the earlier time would leave the generator
        // waiting out the whole step with a lease in hand (seen in the fault soak: 123 s).
        let reported = grant.server_now_ms as i64 - sent_ms as i64;
        let delta = if renewal {
            reported.max(self.delta.load(Ordering::Relaxed))
        } else {
            reported
        };
        let server_at_send = (sent_ms as i64 + delta).max(0) as u64;
        let remaining = grant.end_unix_ms.saturating_sub(server_at_send);
        let deadline = (sent_ms + remaining).saturating_sub(self.margin_ms);
        self.delta.store(delta, Ordering::Relaxed);
        self.deadline.store(deadline, Ordering::Release);
        let bounds = VALID | grant.worker << layout.time_bits | grant.end_unit;
        self.bounds.store(bounds, Ordering::Release);
    }

    /// Removes the lease (nothing is issued until the next install).
    pub(crate) fn clear(&self) {
        self.bounds.store(0, Ordering::Release);
    }

    /// The installed lease's deadline (monotonic ms), if any.
    pub(crate) fn deadline(&self) -> Option<u64> {
        (self.bounds.load(Ordering::Acquire) & VALID != 0)
            .then(|| self.deadline.load(Ordering::Acquire))
    }

    /// The time unit the server's clock is at, estimated from monotonic `now_ms`.
    fn server_unit(&self, now_ms: u64) -> u64 {
        let server_ms = (now_ms as i64 + self.delta.load(Ordering::Relaxed)).max(0) as u64;
        self.layout
            .units_of_ms(server_ms.saturating_sub(self.layout.epoch_unix_ms))
    }

    /// The next ID at monotonic `now_ms`: above every ID issued before, with the lease's
    /// worker id and a time inside its window.
    #[inline]
    pub(crate) fn next(&self, now_ms: u64) -> Result<u64, Stop> {
        let layout = self.layout;
        let bounds = self.bounds.load(Ordering::Acquire);
        if bounds & VALID == 0 {
            return Err(Stop::NoLease);
        }
        let time_mask = (1u64 << layout.time_bits) - 1;
        let worker = (bounds & !VALID) >> layout.time_bits;
        let end = bounds & time_mask;
        if now_ms >= self.deadline.load(Ordering::Acquire) {
            return Err(Stop::Ended);
        }
        let now_unit = self.server_unit(now_ms);
        let sequences = layout.sequence_values();
        let seq_mask = sequences - 1;
        let shard_mask = layout.shard_values() - 1;
        let time_shift = layout.shard_bits + layout.sequence_bits;
        let mut last = self.cursor.load(Ordering::Relaxed);
        loop {
            let (last_time, last_worker, last_seq) = (
                last >> time_shift,
                (last >> layout.sequence_bits) & shard_mask,
                last & seq_mask,
            );
            let (time, seq) = if last_time < now_unit {
                (now_unit, 0)
            } else if last_worker == worker && last_seq + 1 < sequences {
                (last_time, last_seq + 1)
            } else if last_worker < worker {
                (last_time, 0)
            } else {
                (last_time + 1, 0)
            };
            if time > end {
                return Err(Stop::Ended);
            }
            let limit = now_unit + self.max_borrow_units;
            if time > limit {
                return Err(Stop::Ahead(layout.ms_of_units(time - limit).max(1)));
            }
            let id = layout.compose(time, worker, seq);
            match self
                .cursor
                .compare_exchange_weak(last, id, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(id),
                Err(actual) => last = actual,
            }
        }
    }
}

/// How a [`LeasedGenerator`] leases.
#[derive(Debug, Clone)]
pub struct LeasedOptions {
    /// The pool's key.
    pub pool: String,
    /// The start of the holder name; the generator appends the process id and a random
    /// token, so that every generator is a holder of its own.
    pub holder_prefix: String,
    /// How long a window should last (`DURATION`); at most the server's `lease-max-ms`.
    pub duration: Duration,
    /// Subtracted from every window's end: the generator stops this much before it.
    pub margin: Duration,
    /// How far IDs may run ahead of the clock when more than a time unit's sequence is asked
    /// for at once (borrowing, as the module does).
    pub max_borrow: Duration,
    /// How long [`LeasedGenerator::start`] waits for the first lease.
    pub start_timeout: Duration,
    /// The timeout of one request to the server.
    pub request_timeout: Duration,
}

impl LeasedOptions {
    /// Options for `pool` with 10 s windows (the server's default `lease-max-ms`), a
    /// 100 ms margin and 1 s of borrowing.
    pub fn new(pool: impl Into<String>) -> Self {
        LeasedOptions {
            pool: pool.into(),
            holder_prefix: "idgen".into(),
            duration: Duration::from_secs(10),
            margin: Duration::from_millis(100),
            max_borrow: Duration::from_secs(1),
            start_timeout: Duration::from_secs(20),
            request_timeout: Duration::from_secs(1),
        }
    }
}

/// What the background thread last saw, for the slow path's errors.
#[derive(Debug, Default)]
struct Status {
    /// The last failure, classified; `None` after a success.
    failure: Option<LeaseError>,
    /// The current grant.
    grant: Option<Grant>,
    /// Leases acquired, renewals, failures (for tests and metrics).
    acquired: u64,
    renewed: u64,
}

#[derive(Debug)]
struct Shared {
    cursor: LeaseCursor,
    clock: Clock,
    status: Mutex<Status>,
    stop: AtomicBool,
    wake: Condvar,
    wake_lock: Mutex<()>,
}

impl fmt::Debug for dyn MonotonicClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MonotonicClock")
    }
}

/// Snowflake IDs generated in this process under a leased worker id (see the module docs).
///
/// ```no_run
/// use idgen_client::{LeasedGenerator, LeasedOptions};
///
/// let generator = LeasedGenerator::start(
///     &["redis://127.0.0.1:6379/"],
///     LeasedOptions::new("idgen:workers"),
/// )?;
/// let id = generator.next_id()?;
/// # let _ = id;
/// # Ok::<(), idgen_client::LeaseError>(())
/// ```
#[derive(Debug)]
pub struct LeasedGenerator {
    shared: Arc<Shared>,
    holder: String,
    worker: Option<JoinHandle<()>>,
}

impl LeasedGenerator {
    /// Connects to the first of `urls` that answers (a node holding the pool's key; the
    /// others are tried in turn when it fails, e.g. a replica that may be promoted), acquires
    /// a lease and starts renewing it in a background thread. Waits for the first lease at
    /// most `options.start_timeout`.
    pub fn start(urls: &[&str], options: LeasedOptions) -> Result<Self, LeaseError> {
        Self::start_on(urls, options, Clock::System(SystemMonotonic::default()))
    }

    /// [`LeasedGenerator::start`] with another monotonic clock.
    pub fn start_with_clock(
        urls: &[&str],
        options: LeasedOptions,
        clock: Arc<dyn MonotonicClock>,
    ) -> Result<Self, LeaseError> {
        Self::start_on(urls, options, Clock::Injected(clock))
    }

    fn start_on(urls: &[&str], options: LeasedOptions, clock: Clock) -> Result<Self, LeaseError> {
        let clients: Vec<redis::Client> = urls
            .iter()
            .map(|url| redis::Client::open(*url))
            .collect::<Result<_, _>>()
            .map_err(|error| LeaseError::Refused {
                message: error.to_string(),
            })?;
        let mut session = Session {
            clients,
            current: 0,
            connection: None,
            options: options.clone(),
            holder: holder_name(&options.holder_prefix),
        };
        // The first lease, here, to learn the layout (and fail early on a refusal).
        let start = Instant::now();
        let (grant, layout, sent) = loop {
            let sent = clock.now_ms();
            match session.acquire() {
                Ok((grant, layout)) => break (grant, layout, sent),
                Err(error) => {
                    let retry = matches!(
                        error,
                        LeaseError::NoWorkerFree { .. } | LeaseError::Unreachable { .. }
                    );
                    if !retry || start.elapsed() >= options.start_timeout {
                        return Err(error);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        };
        let cursor = LeaseCursor::new(
            layout,
            options.max_borrow.as_millis() as u64,
            options.margin.as_millis() as u64,
        );
        cursor.install(grant, sent, false);
        let shared = Arc::new(Shared {
            cursor,
            clock,
            status: Mutex::new(Status {
                grant: Some(grant),
                acquired: 1,
                ..Status::default()
            }),
            stop: AtomicBool::new(false),
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
        });
        let holder = session.holder.clone();
        let background = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name("idgen-lease".into())
            .spawn(move || run(&background, session, sent))
            .map_err(|error| LeaseError::Refused {
                message: format!("could not start the lease thread: {error}"),
            })?;
        Ok(LeasedGenerator {
            shared,
            holder,
            worker: Some(worker),
        })
    }

    /// The next ID, without waiting: the fast path (atomics only).
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, LeaseError> {
        let now = self.shared.clock.now_ms();
        match self.shared.cursor.next(now) {
            Ok(id) => Ok(id),
            Err(stop) => Err(self.why(stop)),
        }
    }

    /// The next ID; when the layout's ceiling is reached (more than a time unit's sequence
    /// per unit, beyond the borrowing allowed), waits until the clock lets it go on.
    pub fn next_id(&self) -> Result<u64, LeaseError> {
        loop {
            match self.try_next_id() {
                // Within a millisecond of the next one: let other threads run and try
                // again (a sleep would lose most of that millisecond's sequence).
                Err(LeaseError::Ahead { retry_in_ms }) if retry_in_ms <= 1 => {
                    std::thread::yield_now()
                }
                Err(LeaseError::Ahead { retry_in_ms }) => {
                    std::thread::sleep(Duration::from_millis((retry_in_ms - 1).min(50)))
                }
                other => return other,
            }
        }
    }

    /// The worker id and window in use, if any.
    pub fn grant(&self) -> Option<Grant> {
        self.shared
            .cursor
            .deadline()
            .and(lock(&self.shared.status).grant)
    }

    /// This generator's holder name in the pool.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Leases acquired and renewals made so far.
    pub fn lease_counts(&self) -> (u64, u64) {
        let status = lock(&self.shared.status);
        (status.acquired, status.renewed)
    }

    #[cold]
    fn why(&self, stop: Stop) -> LeaseError {
        if self.shared.stop.load(Ordering::Relaxed) {
            return LeaseError::Stopped;
        }
        if let Stop::Ahead(ms) = stop {
            return LeaseError::Ahead { retry_in_ms: ms };
        }
        // Ask for a renewal or a new lease now.
        self.shared.wake.notify_all();
        match lock(&self.shared.status).failure.clone() {
            Some(failure) => failure,
            None => LeaseError::WindowEnded,
        }
    }

    /// Stops renewing and releases the lease (also done on drop).
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.cursor.clear();
        self.shared.wake.notify_all();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Drop for LeasedGenerator {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn holder_name(prefix: &str) -> String {
    use std::hash::{BuildHasher, RandomState};
    let token = RandomState::new().hash_one(std::process::id());
    format!("{prefix}:{}:{token:016x}", std::process::id())
}

/// The background thread's connection to the servers.
struct Session {
    clients: Vec<redis::Client>,
    current: usize,
    connection: Option<redis::Connection>,
    options: LeasedOptions,
    holder: String,
}

impl Session {
    fn connection(&mut self) -> Result<&mut redis::Connection, LeaseError> {
        if self.connection.is_none() {
            let client = &self.clients[self.current % self.clients.len()];
            let connection = client
                .get_connection_with_timeout(self.options.request_timeout)
                .map_err(|error| self.unreachable(error))?;
            let _ = connection.set_read_timeout(Some(self.options.request_timeout));
            let _ = connection.set_write_timeout(Some(self.options.request_timeout));
            self.connection = Some(connection);
        }
        Ok(self.connection.as_mut().expect("just connected"))
    }

    fn unreachable(&mut self, error: redis::RedisError) -> LeaseError {
        // Try the next node next time.
        self.connection = None;
        self.current += 1;
        LeaseError::Unreachable {
            message: error.to_string(),
        }
    }

    fn query(&mut self, command: &redis::Cmd) -> Result<(Grant, Layout), LeaseError> {
        // In a cluster the pool's key may live elsewhere, or move: follow a redirection.
        for _ in 0..3 {
            let reply: redis::RedisResult<HashMap<String, redis::Value>> =
                command.query(self.connection()?);
            match reply {
                Ok(map) => {
                    return parse_grant(&map).ok_or_else(|| LeaseError::Refused {
                        message: format!("unexpected lease reply: {map:?}"),
                    })
                }
                Err(error) => match error.redirect_node() {
                    Some((address, _)) => self.redirect(address)?,
                    None => return Err(self.classify(error)),
                },
            }
        }
        Err(LeaseError::Unreachable {
            message: "redirected more than three times".into(),
        })
    }

    /// Talks to the node at `address` (`host:port`) from now on, with the same credentials
    /// and TLS as the node that redirected there.
    fn redirect(&mut self, address: &str) -> Result<(), LeaseError> {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
            .ok_or_else(|| LeaseError::Refused {
                message: format!("a redirection to '{address}', which is not host:port"),
            })?;
        let index = self.current % self.clients.len();
        let info = self.clients[index].get_connection_info().clone();
        let mut addr = info.addr().clone();
        match &mut addr {
            redis::ConnectionAddr::TcpTls {
                host: tls_host,
                port: tls_port,
                ..
            } => {
                *tls_host = host;
                *tls_port = port;
            }
            other => *other = redis::ConnectionAddr::Tcp(host, port),
        }
        let client =
            redis::Client::open(info.set_addr(addr)).map_err(|error| LeaseError::Refused {
                message: error.to_string(),
            })?;
        self.clients[index] = client;
        self.connection = None;
        Ok(())
    }

    fn classify(&mut self, error: redis::RedisError) -> LeaseError {
        let message = format!(
            "{} {}",
            error.code().unwrap_or(""),
            error.detail().unwrap_or("")
        )
        .trim()
        .to_string();
        match error.code() {
            Some("EXHAUSTED") => LeaseError::NoWorkerFree { message },
            Some("NOTHELD") | Some("LEASELOST") => LeaseError::WindowEnded,
            // A replica (before its promotion) or a node on its way: try another.
            Some("READONLY") | Some("LOADING") | Some("MASTERDOWN") | Some("TRYAGAIN") => {
                self.unreachable(error)
            }
            Some(_) => LeaseError::Refused { message },
            None => self.unreachable(error),
        }
    }

    fn acquire(&mut self) -> Result<(Grant, Layout), LeaseError> {
        let mut command = redis::cmd("LEASE.ACQUIRE");
        command
            .arg(&self.options.pool)
            .arg(&self.holder)
            .arg("DURATION")
            .arg(self.options.duration.as_millis() as u64);
        self.query(&command)
    }

    fn renew(&mut self, worker: u64) -> Result<(Grant, Layout), LeaseError> {
        let mut command = redis::cmd("LEASE.RENEW");
        command
            .arg(&self.options.pool)
            .arg(worker)
            .arg(&self.holder)
            .arg("DURATION")
            .arg(self.options.duration.as_millis() as u64);
        self.query(&command)
    }

    fn release(&mut self, worker: u64) {
        let mut command = redis::cmd("LEASE.RELEASE");
        command
            .arg(&self.options.pool)
            .arg(worker)
            .arg(&self.holder);
        if let Ok(connection) = self.connection() {
            let _: redis::RedisResult<()> = command.query(connection);
        }
    }
}

fn parse_grant(map: &HashMap<String, redis::Value>) -> Option<(Grant, Layout)> {
    let int = |field: &str| match map.get(field)? {
        redis::Value::Int(value) => u64::try_from(*value).ok(),
        _ => None,
    };
    let grant = Grant {
        worker: int("worker")?,
        start_unit: int("start_unit")?,
        end_unit: int("end_unit")?,
        end_unix_ms: int("end_unix_ms")?,
        server_now_ms: int("now_unix_ms")?,
    };
    let layout = Layout {
        time_bits: u32::try_from(int("time_bits")?).ok()?,
        shard_bits: u32::try_from(int("shard_bits")?).ok()?,
        sequence_bits: u32::try_from(int("sequence_bits")?).ok()?,
        epoch_unix_ms: int("epoch_ms")?,
        time_unit_ms: int("time_unit_ms")?,
    };
    Some((grant, layout))
}

/// The background thread: renews once a third of the window has passed, acquires a new
/// lease when the current one is lost or ends, releases it when stopped.
fn run(shared: &Shared, mut session: Session, mut sent: u64) {
    let clock = &shared.clock;
    let mut grant = lock(&shared.status).grant;
    let mut pending: Option<(Grant, u64)> = None;
    let mut lost = false;
    while !shared.stop.load(Ordering::Relaxed) {
        let now = clock.now_ms();
        let deadline = shared.cursor.deadline();
        // A new lease waiting for the current one to end (or to become usable).
        if let Some((next, next_sent)) = pending {
            if deadline.is_none_or(|deadline| now >= deadline)
                || next.start_unit <= current_unit(shared, now)
            {
                shared.cursor.install(next, next_sent, false);
                grant = Some(next);
                sent = next_sent;
                lost = false;
                pending = None;
                let mut status = lock(&shared.status);
                status.grant = grant;
                status.acquired += 1;
                // `deadline` above is the old lease's: decide again on the new one (with the
                // old one cleared, the branch below would clear the new lease too).
                continue;
            }
        }
        let wait_ms = match (grant, deadline) {
            (Some(current), Some(deadline)) if !lost && pending.is_none() => {
                let renew_at = sent + deadline.saturating_sub(sent) / 3;
                if now >= renew_at {
                    let request_sent = clock.now_ms();
                    match session.renew(current.worker) {
                        Ok((renewed, _)) => {
                            shared.cursor.install(renewed, request_sent, true);
                            grant = Some(renewed);
                            sent = request_sent;
                            let mut status = lock(&shared.status);
                            status.grant = grant;
                            status.renewed += 1;
                            status.failure = None;
                            0
                        }
                        Err(LeaseError::WindowEnded) => {
                            // Not renewable (a restart or failover fenced it): keep issuing to
                            // its end, and get a new lease meanwhile.
                            lost = true;
                            0
                        }
                        Err(failure) => {
                            lock(&shared.status).failure = Some(failure);
                            100
                        }
                    }
                } else {
                    renew_at - now
                }
            }
            _ => {
                if deadline.is_some_and(|deadline| now >= deadline) || deadline.is_none() {
                    // The window is over: nothing more under it.
                    shared.cursor.clear();
                }
                if pending.is_some() {
                    10
                } else {
                    let request_sent = clock.now_ms();
                    match session.acquire() {
                        Ok((next, _)) => {
                            pending = Some((next, request_sent));
                            lock(&shared.status).failure = None;
                            0
                        }
                        Err(failure) => {
                            lock(&shared.status).failure = Some(failure);
                            50
                        }
                    }
                }
            }
        };
        if wait_ms > 0 {
            let guard = lock(&shared.wake_lock);
            let _ = shared
                .wake
                .wait_timeout(guard, Duration::from_millis(wait_ms.min(1000)));
        }
    }
    if let Some(current) = grant {
        session.release(current.worker);
    }
    if let Some((next, _)) = pending {
        session.release(next.worker);
    }
}

fn current_unit(shared: &Shared, now_ms: u64) -> u64 {
    shared.cursor.server_unit(now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: u64 = idgen_core::DEFAULT_EPOCH_UNIX_MS;

    fn grant(worker: u64, start_ms: u64, end_ms: u64, server_now_ms: u64) -> Grant {
        Grant {
            worker,
            start_unit: start_ms - EPOCH,
            end_unit: end_ms - EPOCH,
            end_unix_ms: end_ms,
            server_now_ms,
        }
    }

    fn parts(id: u64) -> (u64, u64, u64) {
        (id >> 22, (id >> 12) & 1023, id & 4095)
    }

    const T: u64 = EPOCH + 1_000_000;

    #[test]
    fn ids_carry_the_worker_and_a_time_inside_the_window() {
        let cursor = LeaseCursor::new(Layout::default(), 0, 100);
        assert_eq!(cursor.next(5), Err(Stop::NoLease));
        // Sent at monotonic 1000; the server's clock read T then.
        cursor.install(grant(1021, T, T + 9_999, T), 1000, false);
        let id = cursor.next(1000).unwrap();
        assert_eq!(parts(id), (T - EPOCH, 1021, 0));
        let later = cursor.next(1500).unwrap();
        assert_eq!(parts(later), (T - EPOCH + 500, 1021, 0));
        // The deadline: sent + (end - server now) - margin = 1000 + 9999 - 100.
        assert_eq!(cursor.deadline(), Some(10_899));
        assert!(cursor.next(10_898).is_ok());
        assert_eq!(cursor.next(10_899), Err(Stop::Ended));
    }

    #[test]
    fn a_unit_gives_the_whole_sequence_then_borrows_within_the_window() {
        let cursor = LeaseCursor::new(Layout::default(), 2, 0);
        cursor.install(grant(1023, T, T + 2, T), 1, false);
        let mut last = 0;
        for i in 0..4096 {
            let id = cursor.next(1).unwrap();
            assert!(id > last);
            assert_eq!(parts(id), (T - EPOCH, 1023, i));
            last = id;
        }
        // Borrowed: the next two units, then the window's end.
        assert_eq!(parts(cursor.next(1).unwrap()), (T - EPOCH + 1, 1023, 0));
        for _ in 0..4095 {
            cursor.next(1).unwrap();
        }
        assert_eq!(parts(cursor.next(1).unwrap()), (T - EPOCH + 2, 1023, 0));
        for _ in 0..4095 {
            cursor.next(1).unwrap();
        }
        assert_eq!(cursor.next(1), Err(Stop::Ended));
        // Without borrowing, the same unit's sequence is all there is until the clock moves.
        let strict = LeaseCursor::new(Layout::default(), 0, 0);
        strict.install(grant(1023, T, T + 9, T), 1, false);
        for _ in 0..4096 {
            strict.next(1).unwrap();
        }
        assert_eq!(strict.next(1), Err(Stop::Ahead(1)));
        assert_eq!(parts(strict.next(2).unwrap()), (T - EPOCH + 1, 1023, 0));
    }

    #[test]
    fn a_new_lease_keeps_ids_increasing_and_inside_its_window() {
        let cursor = LeaseCursor::new(Layout::default(), 1000, 0);
        cursor.install(grant(1023, T, T + 999, T), 1, false);
        let first = cursor.next(1).unwrap();
        // A new lease with a lower worker id whose window starts later (after a fence).
        cursor.install(grant(1020, T + 500, T + 1499, T + 2), 3, false);
        let id = cursor.next(3).unwrap();
        assert!(id > first);
        assert_eq!(parts(id), (T - EPOCH + 500, 1020, 0));
        // A renewal that finds the server's clock stepped back 5 s: the generator's time does
        // not go back with it, so it goes on issuing, above the last ID, and its window ends
        // where it ended (not 5 s later by the server's earlier time).
        let deadline = cursor.deadline();
        cursor.install(grant(1020, T + 500, T + 1499, T - 5000), 4, true);
        assert_eq!(cursor.deadline(), deadline);
        let after = cursor.next(4).unwrap();
        assert!(after > id);
        assert_eq!(parts(after).1, 1020);
        // A new lease from that server adopts its time: nothing below the last ID, so the
        // generator waits (too far ahead of this clock to borrow) rather than issue out of
        // order.
        cursor.install(grant(1020, T + 500, T + 1499, T - 5000), 5, false);
        assert!(matches!(cursor.next(5), Err(Stop::Ahead(_))));
        assert!(cursor.next(5 + 4500).unwrap() > after);
        cursor.clear();
        assert_eq!(cursor.next(5), Err(Stop::NoLease));
    }

    #[test]
    fn threads_share_one_increasing_unique_sequence() {
        let cursor = Arc::new(LeaseCursor::new(Layout::default(), 1_000_000, 0));
        cursor.install(grant(1000, T, T + 1_000_000, T), 1, false);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let cursor = Arc::clone(&cursor);
                std::thread::spawn(move || {
                    let mut ids = Vec::with_capacity(50_000);
                    for _ in 0..50_000 {
                        ids.push(cursor.next(1).unwrap());
                    }
                    ids
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            let ids = handle.join().unwrap();
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
            all.extend(ids);
        }
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
        assert!(all.iter().all(|&id| parts(id).1 == 1000));
    }
}
