//! The segment fence: after this instance starts or is promoted, each segment key skips
//! `idgen.segment-fence` values on its first use, so a tail of values this instance handed
//! out but lost (a crash before the write reached disk, or a failover before it reached the
//! replica that took over) is never handed out again.
//!
//! Each start or promotion is an *event*; a key is fenced once per event. Events come from
//! the module loading (a restart) and from the role-changed server event (`REPLICAOF NO
//! ONE`, cluster failover) — never from loading data, so replaying an AOF applies nothing.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use crate::counters;

/// Keys (database, name) already fenced since the last event.
struct FenceState {
    events: u64,
    fenced: Option<HashSet<(i32, Vec<u8>)>>,
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
    state.fenced = Some(HashSet::new());
}

/// How many events (start and promotions) there have been.
pub fn events() -> u64 {
    lock().events
}

/// Whether the key must skip the fence now; if so, it is recorded as fenced for this event.
pub fn take(db: i32, key: &[u8]) -> bool {
    let mut state = lock();
    let Some(fenced) = state.fenced.as_mut() else {
        return false;
    };
    if fenced.contains(&(db, key.to_vec())) {
        return false;
    }
    fenced.insert((db, key.to_vec()));
    counters::FENCES_APPLIED.add(1);
    true
}

/// Undoes [`take`] for a call that was refused, so the fence is applied by the next call
/// that succeeds.
pub fn untake(db: i32, key: &[u8]) {
    if let Some(fenced) = lock().fenced.as_mut() {
        if fenced.remove(&(db, key.to_vec())) {
            counters::FENCES_APPLIED.sub(1);
        }
    }
}
