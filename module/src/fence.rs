//! The segment fence: after this instance starts or is promoted, each segment key skips
//! `idgen.segment-fence` values on its first use, so a tail of values this instance handed
//! out but lost (a crash before the write reached disk, or a failover before it reached the
//! replica that took over) is never handed out again.
//!
//! Each start or promotion is an *event*; a key is fenced once per event. Events come from
//! the module loading (a restart) and from the role-changed server event (`REPLICAOF NO
//! ONE`, cluster failover) — never from loading data, so replaying an AOF applies nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use crate::counters;

/// Keys already fenced since the last event, by database. `None` until the first event.
struct FenceState {
    events: u64,
    fenced: Option<HashMap<i32, HashSet<Vec<u8>>>>,
}

static STATE: Mutex<FenceState> = Mutex::new(FenceState {
    events: 0,
    fenced: None,
});

fn lock() -> MutexGuard<'static, FenceState> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts a new event: every key gets the fence again on its next use.
pub fn new_event() {
    let mut state = lock();
    state.events += 1;
    state.fenced = Some(HashMap::new());
}

/// How many events (start and promotions) there have been.
pub fn events() -> u64 {
    lock().events
}

/// Whether the key has not had its fence since the last event. Allocates nothing.
pub fn is_pending(db: i32, key: &[u8]) -> bool {
    lock()
        .fenced
        .as_ref()
        .is_some_and(|fenced| !fenced.get(&db).is_some_and(|keys| keys.contains(key)))
}

/// Records that the key had its fence for this event (after the call that applied it
/// succeeded).
pub fn mark_applied(db: i32, key: &[u8]) {
    if let Some(fenced) = lock().fenced.as_mut() {
        if fenced.entry(db).or_default().insert(key.to_vec()) {
            counters::FENCES_APPLIED.add(1);
        }
    }
}
