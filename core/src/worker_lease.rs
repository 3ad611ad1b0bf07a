//! Leased worker ids: time windows during which one holder may issue snowflake IDs with a
//! worker id of its own, in its own process.
//!
//! A worker id is a shard value in a band reserved at the top of the shard field
//! ([`LeaseBand`]): `SNOWFLAKE.NEXT` never uses those shard values, so leased IDs never
//! equal the module's own. A holder of worker id `w` with window `[start, end]` (in the
//! layout's time units since the epoch, both included) may issue IDs `time | w | sequence`
//! with `start <= time <= end` and any sequence; so two holders of one worker id whose
//! windows do not overlap can never issue the same ID, whatever their clocks say.
//!
//! The rules that keep the windows of one worker id apart ([`LeasePool`], [`LeaseFences`]):
//! - every grant starts strictly after the highest end ever granted for that worker id —
//!   in this pool (the pool's `fence` per worker id) and in every pool of this instance (the
//!   instance's [`LeaseFences`]) — and not before "now";
//! - every end written at time `t` is below `t + max` (the longest lease): a grant whose
//!   start lies ahead gets a shorter window, never a later end; so whatever writes a crash or
//!   a failover loses, the windows they granted end by `now + max` (plus the clock
//!   difference between the nodes, at most the drift allowance);
//! - after a restart or a promotion the instance is *fenced*
//!   ([`LeaseFences::fence_all`]): every worker id is treated as granted up to
//!   `now + max + allowance`, and no window it knows of can be renewed any more (a lost
//!   release and re-grant could have given the id to someone else);
//! - a renewal extends a window's end only while nobody was granted or fenced past it.
//!
//! Everything takes "now" as an argument: there is no clock in here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::{Config, ConfigError, Identity, Layout};

/// The shard values reserved for leased worker ids: the top `count` values of the shard
/// field. `SNOWFLAKE.NEXT` and `SNOWFLAKE.COMPOSE` refuse them, and the default shard must
/// lie below them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBand {
    /// The lowest reserved shard value (`shard_values - count`).
    pub first: u64,
    /// How many shard values are reserved; 0 turns leases off.
    pub count: u64,
}

impl LeaseBand {
    /// The band of `workers` shard values at the top of `layout`'s shard field. Refused
    /// when it would take the whole field (nothing left for `SNOWFLAKE.NEXT`).
    pub fn new(layout: &Layout, workers: u64) -> Result<Self, ConfigError> {
        let shard_values = layout.shard_values();
        if workers >= shard_values {
            return Err(ConfigError(format!(
                "lease-workers {workers} does not leave a shard value for SNOWFLAKE.NEXT: the \
                 layout has {shard_values} shard values (shard-bits {}); use at most {}",
                layout.shard_bits,
                shard_values - 1
            )));
        }
        Ok(LeaseBand {
            first: shard_values - workers,
            count: workers,
        })
    }

    /// Whether `shard` is a leased worker id.
    #[inline]
    pub fn contains(&self, shard: u64) -> bool {
        shard >= self.first && shard - self.first < self.count
    }

    /// The last reserved shard value, if any.
    pub fn last(&self) -> Option<u64> {
        (self.count > 0).then(|| self.first + self.count - 1)
    }

    /// Refuses a configuration whose default shard lies inside the band.
    pub fn check(&self, config: &Config) -> Result<(), ConfigError> {
        if self.contains(config.default_shard) {
            return Err(ConfigError(format!(
                "default-shard {} lies inside the {} shard values reserved for leased worker \
                 ids by lease-workers ({} to {}); choose a default-shard below {} or fewer \
                 lease-workers",
                config.default_shard,
                self.count,
                self.first,
                self.first + self.count - 1,
                self.first
            )));
        }
        Ok(())
    }

    /// The worker ids an instance of `identity` may grant: those of the band whose position
    /// in it is `≡ offset (mod step)`. Two instances of one deployment never grant the same
    /// worker id, whatever pools they hold.
    pub fn workers_of(&self, identity: Identity) -> impl Iterator<Item = u64> + Clone {
        let step = identity.step.max(1);
        let first = self.first + identity.offset;
        let end = self.first + self.count;
        (first..end).step_by(step as usize)
    }
}

/// A window of time units (since the layout's epoch), both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first time unit in the window.
    pub start: u64,
    /// The last time unit in the window.
    pub end: u64,
}

impl Window {
    /// Whether the two windows share a time unit.
    pub fn overlaps(&self, other: &Window) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// One worker id of a pool: who holds it, its last window, and the highest end ever granted
/// for it in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLease {
    /// The worker id (a shard value in the band).
    pub worker: u64,
    /// The holder, or `None` once released.
    pub holder: Option<Vec<u8>>,
    /// The last window granted (or renewed) for the worker id.
    pub window: Window,
    /// The highest window end ever granted for this worker id in this pool.
    pub fence: u64,
    /// The time unit of the last grant or renewal.
    pub renewed_at: u64,
}

impl WorkerLease {
    /// Whether a holder has it at time unit `now`: held, and its window not ended.
    pub fn is_held(&self, now: u64) -> bool {
        self.holder.is_some() && self.window.end >= now
    }
}

/// The limits of a deployment's leases, in time units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRules {
    /// The longest window a grant or renewal may reach past "now" (at least 1).
    pub max_units: u64,
    /// How far another node's clock may be ahead of this one's (the drift bound): added to
    /// the fence after a restart or a promotion.
    pub allowance_units: u64,
}

impl LeaseRules {
    /// The rules for `layout` with the longest lease `max_ms` and the drift bound
    /// `max_drift_ms`, rounded to whole time units (at least one unit each).
    pub fn new(layout: &Layout, max_ms: u64, max_drift_ms: u64) -> Self {
        LeaseRules {
            max_units: layout.units_of_ms(max_ms).max(1),
            allowance_units: layout
                .units_of_ms(max_drift_ms.saturating_add(layout.time_unit_ms - 1))
                .max(1),
        }
    }
}

/// A grant or renewal: the worker id and its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The worker id.
    pub worker: u64,
    /// The window the holder may issue in.
    pub window: Window,
    /// Whether an earlier holder's window had ended without a release (an expiry).
    pub took_expired: bool,
}

/// Why a lease request was refused (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseError {
    /// The requested duration is 0 or longer than the longest lease.
    Duration {
        /// Units asked for.
        asked: u64,
        /// The longest allowed.
        max_units: u64,
    },
    /// The instance has no worker id to grant (leases off, or none of its residue class).
    NoWorkers,
    /// Every worker id this instance may grant is held or fenced.
    Exhausted {
        /// Worker ids held now.
        held: usize,
        /// Worker ids this instance may grant.
        workers: usize,
        /// The earliest time unit at which a grant could succeed.
        retry_at: u64,
    },
    /// The worker id is not held by this holder in this pool.
    NotHeld {
        /// The worker id.
        worker: u64,
    },
    /// The holder's window ended before the renewal: the worker id may be someone else's.
    Ended {
        /// The worker id.
        worker: u64,
        /// The window's last unit.
        end: u64,
    },
    /// Someone was granted (or a restart or failover fenced) the worker id past this window:
    /// it cannot be extended.
    Fenced {
        /// The worker id.
        worker: u64,
        /// The window's last unit.
        end: u64,
    },
}

impl LeaseError {
    /// The upper-case code that starts the Redis error reply.
    pub fn code(&self) -> &'static str {
        match self {
            LeaseError::Duration { .. } => "ERR",
            LeaseError::NoWorkers => "NOWORKERS",
            LeaseError::Exhausted { .. } => "EXHAUSTED",
            LeaseError::NotHeld { .. } => "NOTHELD",
            LeaseError::Ended { .. } | LeaseError::Fenced { .. } => "LEASELOST",
        }
    }
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Duration { asked, max_units } => write!(
                f,
                "DURATION of {asked} time units is outside 1 to {max_units} (idgen.lease-max-ms)"
            ),
            LeaseError::NoWorkers => write!(
                f,
                "this instance has no worker id to lease: raise idgen.lease-workers to at \
                 least step x the worker ids each instance needs"
            ),
            LeaseError::Exhausted {
                held,
                workers,
                retry_at,
            } => write!(
                f,
                "no worker id free: {held} of this instance's {workers} worker ids are held \
                 and the others are fenced (after a start or promotion, or by windows of \
                 other pools); one can be granted from time unit {retry_at}; release unused \
                 leases, or raise idgen.lease-workers"
            ),
            LeaseError::NotHeld { worker } => write!(
                f,
                "worker id {worker} is not held by this holder in this pool; acquire a lease"
            ),
            LeaseError::Ended { worker, end } => write!(
                f,
                "the window of worker id {worker} ended at time unit {end}; it may be someone \
                 else's now: acquire a new lease"
            ),
            LeaseError::Fenced { worker, end } => write!(
                f,
                "the window of worker id {worker} (to time unit {end}) cannot be extended: \
                 a restart, failover or another grant fenced the worker id past it; keep \
                 issuing until its end and acquire a new lease"
            ),
        }
    }
}

impl std::error::Error for LeaseError {}

/// What an instance knows of every window granted for each worker id, in any pool: a floor
/// under every new window's start. Kept in memory (raised by its own grants and by the
/// ones replicated to it), and fenced at each start and promotion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseFences {
    all_until: u64,
    each: HashMap<u64, u64>,
}

impl LeaseFences {
    /// No window known.
    pub fn new() -> Self {
        Self::default()
    }

    /// After a restart or a promotion that may have lost grants and renewals: every worker id
    /// is treated as granted up to `now + max + allowance`.
    pub fn fence_all(&mut self, rules: LeaseRules, now: u64) {
        let until = now
            .saturating_add(rules.max_units)
            .saturating_add(rules.allowance_units);
        self.all_until = self.all_until.max(until);
    }

    /// Records that `worker` was granted up to `end`.
    pub fn raise(&mut self, worker: u64, end: u64) {
        let known = self.each.entry(worker).or_insert(0);
        *known = (*known).max(end);
    }

    /// Every window granted for `worker` ends at or before this.
    pub fn floor(&self, worker: u64) -> u64 {
        self.all_until
            .max(self.each.get(&worker).copied().unwrap_or(0))
    }

    /// The fence of the last restart or promotion.
    pub fn fenced_until(&self) -> u64 {
        self.all_until
    }
}

/// A named pool of worker ids, as a key holds it: one [`WorkerLease`] per worker id ever
/// granted in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeasePool {
    workers: BTreeMap<u64, WorkerLease>,
}

impl LeasePool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every worker id the pool has granted, in order.
    pub fn leases(&self) -> impl Iterator<Item = &WorkerLease> {
        self.workers.values()
    }

    /// The worker id's record, if it was ever granted here.
    pub fn lease(&self, worker: u64) -> Option<&WorkerLease> {
        self.workers.get(&worker)
    }

    /// Records a worker id as it arrives from a file or by replication, and raises the
    /// instance's `fences` under it.
    pub fn put(&mut self, lease: WorkerLease, fences: &mut LeaseFences) {
        fences.raise(lease.worker, lease.fence.max(lease.window.end));
        self.workers.insert(lease.worker, lease);
    }

    /// Worker ids held at `now`.
    pub fn held(&self, now: u64) -> usize {
        self.workers.values().filter(|l| l.is_held(now)).count()
    }

    /// Grants `holder` one of `eligible` (the worker ids this instance may grant) for
    /// `duration` units from `now`: the one free soonest (lowest id on a tie). Its window
    /// starts after every window granted for it (here and in `fences`) and not before `now`,
    /// and ends before `now + max_units`; a window starting ahead of `now` is granted only
    /// if at least half of `duration` fits. Returns the grant, or why none can be made
    /// (nothing changed).
    pub fn acquire(
        &mut self,
        fences: &mut LeaseFences,
        rules: LeaseRules,
        holder: &[u8],
        now: u64,
        duration: u64,
        eligible: impl IntoIterator<Item = u64>,
    ) -> Result<Grant, LeaseError> {
        check_duration(rules, duration)?;
        let latest_end = now.saturating_add(rules.max_units - 1);
        // A window that would start ahead (after a fence) is granted only if at least half
        // the duration asked for remains before now + max; else the caller retries later.
        let min_len = duration.div_ceil(2);
        let mut best: Option<(u64, u64)> = None; // (start, worker)
        let mut workers = 0;
        let mut held = 0;
        let mut retry_at = u64::MAX;
        for worker in eligible {
            workers += 1;
            let record = self.workers.get(&worker);
            let floor = fences
                .floor(worker)
                .max(record.map_or(0, |record| record.fence));
            // Reachable from when a window of at least `min_len` units after the floor
            // ends before now + max.
            let reachable = floor
                .saturating_add(min_len + 1)
                .saturating_sub(rules.max_units);
            if let Some(record) = record.filter(|record| record.is_held(now)) {
                held += 1;
                retry_at = retry_at.min((record.window.end + 1).max(reachable));
                continue;
            }
            let start = floor.saturating_add(1).max(now);
            if start.saturating_add(min_len - 1) > latest_end {
                retry_at = retry_at.min(reachable);
                continue;
            }
            if best.is_none_or(|(best_start, _)| start < best_start) {
                best = Some((start, worker));
            }
        }
        if workers == 0 {
            return Err(LeaseError::NoWorkers);
        }
        let Some((start, worker)) = best else {
            return Err(LeaseError::Exhausted {
                held,
                workers,
                retry_at,
            });
        };
        let end = start.saturating_add(duration - 1).min(latest_end);
        let window = Window { start, end };
        let previous = self.workers.get(&worker);
        let took_expired = previous.is_some_and(|record| record.holder.is_some());
        let fence = previous.map_or(end, |record| record.fence.max(end));
        self.workers.insert(
            worker,
            WorkerLease {
                worker,
                holder: Some(holder.to_vec()),
                window,
                fence,
                renewed_at: now,
            },
        );
        fences.raise(worker, end);
        Ok(Grant {
            worker,
            window,
            took_expired,
        })
    }

    /// Extends `holder`'s window of `worker` to end `duration` units after `now` (never
    /// shortening it). Refused when the window ended, or when anyone was granted or fenced
    /// past it; nothing changes then.
    pub fn renew(
        &mut self,
        fences: &mut LeaseFences,
        rules: LeaseRules,
        worker: u64,
        holder: &[u8],
        now: u64,
        duration: u64,
    ) -> Result<Grant, LeaseError> {
        check_duration(rules, duration)?;
        let record = self.held_by(worker, holder)?;
        let end = record.window.end;
        if end < now {
            return Err(LeaseError::Ended { worker, end });
        }
        if fences.floor(worker).max(record.fence) > end {
            return Err(LeaseError::Fenced { worker, end });
        }
        let new_end = end.max(now.saturating_add(duration - 1));
        let record = self.workers.get_mut(&worker).expect("checked above");
        record.window.end = new_end;
        record.fence = record.fence.max(new_end);
        record.renewed_at = now;
        let window = record.window;
        fences.raise(worker, new_end);
        Ok(Grant {
            worker,
            window,
            took_expired: false,
        })
    }

    /// Frees `holder`'s `worker`: the next holder still starts after its window's end.
    pub fn release(&mut self, worker: u64, holder: &[u8]) -> Result<WorkerLease, LeaseError> {
        self.held_by(worker, holder)?;
        let record = self.workers.get_mut(&worker).expect("checked above");
        record.holder = None;
        Ok(record.clone())
    }

    fn held_by(&self, worker: u64, holder: &[u8]) -> Result<&WorkerLease, LeaseError> {
        self.workers
            .get(&worker)
            .filter(|record| record.holder.as_deref() == Some(holder))
            .ok_or(LeaseError::NotHeld { worker })
    }
}

fn check_duration(rules: LeaseRules, duration: u64) -> Result<(), LeaseError> {
    if duration == 0 || duration > rules.max_units {
        return Err(LeaseError::Duration {
            asked: duration,
            max_units: rules.max_units,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: LeaseRules = LeaseRules {
        max_units: 100,
        allowance_units: 10,
    };

    fn band() -> LeaseBand {
        LeaseBand::new(&Layout::default(), 4).unwrap()
    }

    fn workers() -> Vec<u64> {
        band().workers_of(Identity::default()).collect()
    }

    #[test]
    fn the_band_is_the_top_of_the_shard_field() {
        let band = band();
        assert_eq!((band.first, band.count, band.last()), (1020, 4, Some(1023)));
        assert!(band.contains(1020) && band.contains(1023) && !band.contains(1019));
        // Past the shard field is out of range, not leased (a separate refusal says so).
        assert!(!band.contains(1024));
        let off = LeaseBand::new(&Layout::default(), 0).unwrap();
        assert!(!off.contains(1023) && off.last().is_none());
        assert!(LeaseBand::new(&Layout::default(), 1024)
            .unwrap_err()
            .0
            .contains("at most 1023"));
        let config = Config {
            default_shard: 1021,
            ..Config::default()
        };
        assert!(band
            .check(&config)
            .unwrap_err()
            .0
            .contains("default-shard 1021"));
        assert_eq!(band.workers_of(Identity::default()).count(), 4);
    }

    #[test]
    fn instances_grant_disjoint_worker_ids() {
        let band = LeaseBand::new(&Layout::default(), 10).unwrap();
        let of = |offset| -> Vec<u64> { band.workers_of(Identity { step: 3, offset }).collect() };
        assert_eq!(of(0), [1014, 1017, 1020, 1023]);
        assert_eq!(of(1), [1015, 1018, 1021]);
        assert_eq!(of(2), [1016, 1019, 1022]);
        let tiny = LeaseBand::new(&Layout::default(), 2).unwrap();
        assert_eq!(tiny.workers_of(Identity { step: 3, offset: 2 }).count(), 0);
    }

    #[test]
    fn grant_renew_release_and_the_next_holder() {
        let mut pool = LeasePool::new();
        let mut fences = LeaseFences::new();
        let a = pool
            .acquire(&mut fences, RULES, b"a", 1000, 50, workers())
            .unwrap();
        assert_eq!(
            a.window,
            Window {
                start: 1000,
                end: 1049
            }
        );
        assert_eq!(a.worker, 1020);
        let b = pool
            .acquire(&mut fences, RULES, b"b", 1000, 50, workers())
            .unwrap();
        assert_eq!(b.worker, 1021);
        // Renewal extends from now, never shortens, and is the holder's only.
        assert_eq!(
            pool.renew(&mut fences, RULES, 1020, b"b", 1010, 50),
            Err(LeaseError::NotHeld { worker: 1020 })
        );
        let renewed = pool
            .renew(&mut fences, RULES, 1020, b"a", 1010, 100)
            .unwrap();
        assert_eq!(
            renewed.window,
            Window {
                start: 1000,
                end: 1109
            }
        );
        assert_eq!(
            pool.renew(&mut fences, RULES, 1020, b"a", 1011, 101),
            Err(LeaseError::Duration {
                asked: 101,
                max_units: 100
            })
        );
        // Released: the next holder starts after the end granted.
        pool.release(1020, b"a").unwrap();
        let next = pool
            .acquire(&mut fences, RULES, b"c", 1020, 10, [1020])
            .unwrap();
        assert_eq!(
            next.window,
            Window {
                start: 1110,
                end: 1119
            }
        );
        assert_eq!(
            pool.release(1020, b"a"),
            Err(LeaseError::NotHeld { worker: 1020 })
        );
    }

    #[test]
    fn an_ended_window_is_free_and_cannot_be_renewed() {
        let mut pool = LeasePool::new();
        let mut fences = LeaseFences::new();
        pool.acquire(&mut fences, RULES, b"a", 1000, 10, [7])
            .unwrap();
        assert!(matches!(
            pool.acquire(&mut fences, RULES, b"b", 1005, 10, [7]),
            Err(LeaseError::Exhausted {
                held: 1,
                workers: 1,
                retry_at: 1010
            })
        ));
        assert_eq!(
            pool.renew(&mut fences, RULES, 7, b"a", 1010, 10),
            Err(LeaseError::Ended {
                worker: 7,
                end: 1009
            })
        );
        let taken = pool
            .acquire(&mut fences, RULES, b"b", 1010, 10, [7])
            .unwrap();
        assert!(taken.took_expired);
        assert_eq!(taken.window.start, 1010);
        assert_eq!(
            LeasePool::new().acquire(&mut fences, RULES, b"b", 1010, 10, []),
            Err(LeaseError::NoWorkers)
        );
    }

    #[test]
    fn a_fence_delays_grants_and_stops_renewals() {
        let mut pool = LeasePool::new();
        let mut fences = LeaseFences::new();
        pool.acquire(&mut fences, RULES, b"a", 1000, 100, [7, 8])
            .unwrap();
        fences.fence_all(RULES, 1050);
        assert_eq!(fences.fenced_until(), 1160);
        assert_eq!(
            pool.renew(&mut fences, RULES, 7, b"a", 1050, 100),
            Err(LeaseError::Fenced {
                worker: 7,
                end: 1099
            })
        );
        // Both are fenced (worker 7's window has ended by 1110): one can be granted once half
        // the duration fits between the fence and now + max, starting after the fence.
        assert!(matches!(
            pool.acquire(&mut fences, RULES, b"b", 1110, 100, [7, 8]),
            Err(LeaseError::Exhausted { retry_at: 1111, .. })
        ));
        let late = pool
            .acquire(&mut fences, RULES, b"b", 1111, 100, [7, 8])
            .unwrap();
        assert_eq!(
            (late.worker, late.window),
            (
                7,
                Window {
                    start: 1161,
                    end: 1210
                }
            )
        );
    }

    #[test]
    fn two_pools_of_one_instance_never_overlap_on_a_worker_id() {
        let mut first = LeasePool::new();
        let mut second = LeasePool::new();
        let mut fences = LeaseFences::new();
        let a = first
            .acquire(&mut fences, RULES, b"a", 1000, 20, [7])
            .unwrap();
        let b = second
            .acquire(&mut fences, RULES, b"b", 1000, 50, [7])
            .unwrap();
        assert!(!a.window.overlaps(&b.window));
        // The first pool's holder cannot extend into the second's window.
        assert_eq!(
            first.renew(&mut fences, RULES, 7, b"a", 1001, 50),
            Err(LeaseError::Fenced {
                worker: 7,
                end: 1019
            })
        );
    }
}
