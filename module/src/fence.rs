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

use crate::{counters, key_slot};

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

/// Forgets the keys of the slots in `ranges` (inclusive), which moved to another node: if
/// one comes back, it is fenced again, which is safe. Returns how many were forgotten.
pub fn forget_slots(ranges: &[(u16, u16)]) -> usize {
    let mut forgotten = 0;
    if let Some(fenced) = lock().as_mut() {
        for keys in fenced.values_mut() {
            let before = keys.len();
            keys.retain(|key| {
                let slot = key_slot::of(key);
                !ranges
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&slot))
            });
            forgotten += before - keys.len();
        }
    }
    forgotten
}

/// The keys remembered as fenced in `db` (`-1`: in every database), copied out so that the
/// caller can look them up without holding the lock (a lookup may expire a key, whose event
/// comes back here).
pub fn remembered(db: i32) -> Vec<(i32, Vec<u8>)> {
    lock().as_ref().map_or_else(Vec::new, |fenced| {
        fenced
            .iter()
            .filter(|(&key_db, _)| db == -1 || key_db == db)
            .flat_map(|(&key_db, keys)| keys.iter().map(move |key| (key_db, key.clone())))
            .collect()
    })
}

/// How many keys are remembered as fenced since the start (`INFO idgen`).
pub fn len() -> usize {
    lock()
        .as_ref()
        .map_or(0, |fenced| fenced.values().map(HashSet::len).sum())
}

/// Forgets `key` in `db` (it was deleted, expired, evicted, renamed or moved away).
pub fn forget(db: i32, key: &[u8]) {
    if let Some(fenced) = lock().as_mut() {
        if let Some(keys) = fenced.get_mut(&db) {
            keys.remove(key);
            if keys.is_empty() {
                fenced.remove(&db);
            }
        }
    }
}
