//! Segment values this instance handed out that a full sync from another master erased.
//!
//! When an instance that was a master becomes a replica (a failback, a cluster failover, a
//! `REPLICAOF`, Sentinel re-attaching an old master), the full sync replaces its data with
//! the new master's. Values this instance handed out that never reached the new master are
//! then gone from the data, and if the instance is promoted again its counters would
//! continue below them. So, just before a sync discards the data (the flush that starts
//! it), every string key holding an integer of this instance's residue class is remembered
//! here — only this instance can have handed out such a value — and `SEGMENT.NEXT`
//! continues above the remembered value on the key's next use as master, then forgets it
//! (the key's data holds it from then on). Failback thus skips nothing.
//!
//! The marks are saved with the RDB aux data (and so in an AOF's RDB preamble), so a
//! replica that restarts from its own files keeps them. What a crash loses of them, or of
//! the keys, the segment fence covers.

use crate::ffi::main_thread::MainThreadCell;
use crate::state::stats;
use std::collections::HashMap;

type Marks = HashMap<i32, HashMap<Vec<u8>, i64>>;

/// (Every update is a whole insert or remove: after a panic caught inside a use, the marks
/// are consistent.)
static MARKS: MainThreadCell<Option<Marks>> = MainThreadCell::new(None);

/// Remembers that `value` may have been handed out for `key` in `db` (keeps the larger of
/// this and what was remembered before).
pub fn remember(db: i32, key: &[u8], value: i64) {
    MARKS.with(|marks| {
        let keys = marks
            .get_or_insert_with(HashMap::new)
            .entry(db)
            .or_default();
        match keys.get_mut(key) {
            Some(known) => *known = (*known).max(value),
            None => {
                keys.insert(key.to_vec(), value);
            }
        }
    });
}

/// The value remembered for `key` in `db`, if any.
pub fn get(db: i32, key: &[u8]) -> Option<i64> {
    MARKS.with(|marks| marks.as_ref()?.get(&db)?.get(key).copied())
}

/// Forgets `key` in `db` once its data holds a value at or above the remembered one.
pub fn forget(db: i32, key: &[u8]) {
    MARKS.with(|marks| {
        let Some(marks) = marks.as_mut() else { return };
        if let Some(keys) = marks.get_mut(&db) {
            if keys.remove(key).is_some() {
                stats::SEGMENT_MARKS_APPLIED.add(1);
            }
            if keys.is_empty() {
                marks.remove(&db);
            }
        }
    });
}

/// Every remembered value, for the RDB aux data.
pub fn snapshot() -> Vec<(i32, Vec<u8>, i64)> {
    MARKS.with(|marks| {
        marks
            .iter()
            .flatten()
            .flat_map(|(&db, keys)| {
                keys.iter()
                    .map(move |(key, &value)| (db, key.clone(), value))
            })
            .collect()
    })
}

/// How many keys have a remembered value.
pub fn len() -> usize {
    MARKS.with(|marks| marks.iter().flatten().map(|(_, keys)| keys.len()).sum())
}
