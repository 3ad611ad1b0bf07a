//! The counters deleted on this instance lately (`DEL`, `UNLINK`, and `MIGRATE`, which
//! deletes the key here once the other node has it), each with its reservation's top: at or
//! above every value handed out for it here. Expired and evicted counters are not kept:
//! eviction frees memory under pressure, which these records would take back.
//!
//! Why: `MIGRATE` carries only a key's value. A counter that a `SET` lowered and that then
//! moved away and back (a slot resharded key by key, there and back again) would come back
//! under what it handed out here, and its next calls would repeat those values. A key's
//! event does not say which command deleted it, so every counter that leaves is kept here,
//! and only a key that comes back through `RESTORE` (the other half of `MIGRATE`) consults
//! it: it is then remembered as a failover's erased values are (`state::failback_marks`),
//! so its next call continues above the top if the key holds less. A deliberate reset
//! (`DEL`, then `SET`) never restores, so it still restarts the counter lower.
//!
//! At most [`CAPACITY`] counters are kept, the oldest dropped first, so that a service that
//! deletes many counters (per-day keys) keeps a bounded table (about 1 MB at most with short
//! names); the entries go with a restart, as the rest of what the module holds per key.

use std::collections::{HashMap, VecDeque};

use crate::ffi::main_thread::MainThreadCell;

/// How many departed counters are kept.
pub const CAPACITY: usize = 10_000;

/// A counter by database and name.
type Name = (i32, Box<[u8]>);

#[derive(Default)]
struct Departed {
    tops: HashMap<Name, i64>,
    /// The names in `tops`, oldest first.
    order: VecDeque<Name>,
}

/// (Every change is a whole insert or remove of both: after a panic caught inside a use, the
/// two agree.)
static DEPARTED: MainThreadCell<Option<Departed>> = MainThreadCell::new(None);

/// `key` in `db` left this instance with its reservation's top at `top`.
pub fn record(db: i32, key: &[u8], top: i64) {
    DEPARTED.with(|departed| {
        let departed = departed.get_or_insert_with(Departed::default);
        let name: Name = (db, key.into());
        if let Some(known) = departed.tops.get_mut(&name) {
            *known = (*known).max(top);
            return;
        }
        if departed.order.len() >= CAPACITY {
            if let Some(oldest) = departed.order.pop_front() {
                departed.tops.remove(&oldest);
            }
        }
        departed.tops.insert(name.clone(), top);
        departed.order.push_back(name);
    });
}

/// The top `key` in `db` left with, if it left lately; forgotten here (a key that comes
/// back takes it along).
pub fn take(db: i32, key: &[u8]) -> Option<i64> {
    DEPARTED.with(|departed| {
        let departed = departed.as_mut()?;
        let name: Name = (db, key.into());
        let top = departed.tops.remove(&name)?;
        departed.order.retain(|kept| *kept != name);
        Some(top)
    })
}

/// How many departed counters are kept.
#[cfg(test)]
fn len() -> usize {
    DEPARTED.with(|departed| departed.as_ref().map_or(0, |departed| departed.tops.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_highest_top_until_taken_and_the_newest_capacity_names() {
        let _main = crate::ffi::main_thread::test_main::become_main();
        {
            record(0, b"inv", 10);
            record(0, b"inv", 7);
            assert_eq!(take(0, b"inv"), Some(10));
            assert_eq!(take(0, b"inv"), None, "taken once");
            for index in 0..=CAPACITY {
                record(1, index.to_string().as_bytes(), index as i64);
            }
            assert_eq!(len(), CAPACITY);
            assert_eq!(take(1, b"0"), None, "the oldest was dropped");
            assert_eq!(take(1, b"1"), Some(1));
            assert_eq!(take(0, b"1"), None, "another database");
        }
    }
}
