//! Counters shown in `INFO idgen`.

use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonically growing event count.
pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    /// Adds `n`.
    ///
    /// A load and a store rather than an atomic add (`lock xadd`, about 20 cycles, four
    /// times per `SNOWFLAKE.NEXT`): only Redis's main thread counts (commands, key events,
    /// timers and loading all run there), so no addition can be lost. Another thread would
    /// at worst lose a count, never make the value torn or unsound.
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Successful SNOWFLAKE.NEXT calls.
pub static SNOWFLAKE_CALLS: Counter = Counter::new();
/// Snowflake IDs handed out.
pub static SNOWFLAKE_IDS: Counter = Counter::new();
/// SNOWFLAKE.NEXT calls that wrote and replicated a key's record (a new bound), rather than
/// issuing within the bound with no write.
pub static SNOWFLAKE_BOUND_WRITES: Counter = Counter::new();
/// Successful SEGMENT.NEXT calls.
pub static SEGMENT_CALLS: Counter = Counter::new();
/// SEGMENT.NEXT calls that wrote (and replicated) a new reservation into the key, rather
/// than handing values out from the key's reservation in memory.
pub static SEGMENT_WRITES: Counter = Counter::new();
/// Segment values handed out.
pub static SEGMENT_IDS: Counter = Counter::new();
/// Milliseconds the snowflake clock entered ahead of the wall clock.
pub static BORROWED_MS: Counter = Counter::new();
/// Calls that saw the wall clock lower than the call before.
pub static CLOCK_STEP_BACKS: Counter = Counter::new();
/// Calls refused because the clock would pass the drift bound.
pub static DRIFT_REFUSALS: Counter = Counter::new();
/// Segment fences applied (one per key after each start).
pub static FENCES_APPLIED: Counter = Counter::new();
/// Keys whose values were remembered when a full sync was about to erase them.
pub static SEGMENT_MARKS_TAKEN: Counter = Counter::new();
/// Remembered values that a SEGMENT.NEXT call continued above (and then forgot).
pub static SEGMENT_MARKS_APPLIED: Counter = Counter::new();
/// SEGMENT.NEXT calls that found their key lowered (by a `SET`) below values this instance
/// had handed out, and continued above those values instead.
pub static SEGMENT_COUNTERS_LOWERED: Counter = Counter::new();
/// TTLs put on segment keys this instance holds (`EXPIRE`, `SET … EX`, `GETEX`).
pub static SEGMENT_TTLS_SEEN: Counter = Counter::new();
/// Segment keys this instance held that expired.
pub static SEGMENT_COUNTERS_EXPIRED: Counter = Counter::new();
/// Atomic slot migrations (Valkey 9, Redis 8.4+) this instance completed as the target.
pub static SLOT_IMPORTS: Counter = Counter::new();
/// Atomic slot migrations (Valkey 9, Redis 8.4+) this instance completed as the source.
pub static SLOT_EXPORTS: Counter = Counter::new();
/// Atomic slot migrations this instance started as the target.
pub static SLOT_IMPORTS_STARTED: Counter = Counter::new();
/// Atomic slot migrations that failed or were cancelled on this instance as the target.
pub static SLOT_IMPORTS_FAILED: Counter = Counter::new();
/// Atomic slot migrations this instance started as the source.
pub static SLOT_EXPORTS_STARTED: Counter = Counter::new();
/// Atomic slot migrations that failed or were cancelled on this instance as the source.
pub static SLOT_EXPORTS_FAILED: Counter = Counter::new();
/// Trims of slots this instance no longer serves (Redis 8.4+), begun key by key or handed
/// to a background thread.
pub static SLOT_TRIMS: Counter = Counter::new();
/// Times this instance was promoted to master.
pub static PROMOTIONS: Counter = Counter::new();
/// SNOWFLAKE.NEXT and SEGMENT.NEXT calls refused because this node is the later node of an
/// identity conflict.
pub static CONFLICT_REFUSALS: Counter = Counter::new();
/// Identity announcements this node sent (one per message, to one node or to all).
pub static ANNOUNCEMENTS_SENT: Counter = Counter::new();
/// Identity announcements this node received from other nodes.
pub static ANNOUNCEMENTS_RECEIVED: Counter = Counter::new();
/// Received announcements this node could not read (another magic, an older format, a
/// record cut short, a required field missing or malformed): ignored whole. A later
/// release's announcement is read, its new fields skipped, and never counted here.
pub static ANNOUNCEMENTS_UNREADABLE: Counter = Counter::new();
/// Calls answered with any error.
pub static ERRORS: Counter = Counter::new();

// Leased worker ids (`LEASE.*`).
/// Lease grants (`LEASE.ACQUIRE` answered with a worker id).
pub static LEASE_GRANTS: Counter = Counter::new();
/// Lease renewals.
pub static LEASE_RENEWALS: Counter = Counter::new();
/// Lease releases.
pub static LEASE_RELEASES: Counter = Counter::new();
/// Grants that took a worker id whose holder's window had ended without a release.
pub static LEASE_EXPIRIES: Counter = Counter::new();
/// Lease requests refused (no worker id free, window ended or fenced, not the holder).
pub static LEASE_REFUSALS: Counter = Counter::new();
