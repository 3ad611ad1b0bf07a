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

mod clock;
mod cursor;
mod error;
mod session;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use self::clock::{MonotonicClock, SystemMonotonic};
pub use self::cursor::Grant;
pub use self::error::LeaseError;

use self::clock::Clock;
use self::cursor::{LeaseCursor, Stop};
use self::session::Session;
use crate::lock::lock;

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
        let holder = holder_name(&options.holder_prefix);
        let mut session = Session::new(
            urls,
            &options.pool,
            holder,
            options.duration,
            options.request_timeout,
        )?;
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

fn holder_name(prefix: &str) -> String {
    use std::hash::{BuildHasher, RandomState};
    let token = RandomState::new().hash_one(std::process::id());
    format!("{prefix}:{}:{token:016x}", std::process::id())
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
                || next.start_unit <= shared.cursor.server_unit(now)
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
