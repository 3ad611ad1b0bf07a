//! The segment fence: after this instance starts, each segment key skips
//! `idgen.segment-fence` values on its first use as master, so a tail of values this
//! instance handed out before the start but its persistence lost (a crash before the write
//! reached disk) is never handed out again.
//!
//! Only a start arms the fence: loading data (`DEBUG RELOAD`, replaying an AOF) does not,
//! and neither does a promotion — what a promoted instance handed out before a full sync
//! erased it is remembered exactly (`segment_marks`), and a replica that never issued has
//! no tail of its own.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use crate::counters;

/// Keys fenced since the start, by database. `None` until the module has loaded.
static FENCED: Mutex<Option<HashMap<i32, HashSet<Vec<u8>>>>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<HashMap<i32, HashSet<Vec<u8>>>>> {
    FENCED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Arms the fence for every key: called once, when the module loads (a start).
pub fn arm() {
    *lock() = Some(HashMap::new());
}

/// Whether the key has not had its fence since the start. Allocates nothing.
pub fn is_pending(db: i32, key: &[u8]) -> bool {
    lock()
        .as_ref()
        .is_some_and(|fenced| !fenced.get(&db).is_some_and(|keys| keys.contains(key)))
}

/// Records that the key had its fence (after the call that applied it succeeded).
pub fn mark_applied(db: i32, key: &[u8]) {
    if let Some(fenced) = lock().as_mut() {
        if fenced.entry(db).or_default().insert(key.to_vec()) {
            counters::FENCES_APPLIED.add(1);
        }
    }
}
