//! The counters deleted on this instance lately (`DEL`, `UNLINK`, and `MIGRATE`, which
//! deletes the key here once the other node has it), each with its reservation's top: at or
//! above every value handed out for it here. Expired and evicted counters are not kept:
//! eviction frees memory under pressure, which these records would take back.
//!
//! Why: `MIGRATE` carries only a key's value. A counter that a `SET` lowered and that then
//! moved away and back (a slot resharded key by key, there and back again) would come back
//! under what it handed out here, and its next calls would repeat those values. A key's
//! event does not say which command deleted it, so every deleted counter is kept here,
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
    /// Each kept counter's top, and the number of its entry in `order`.
    tops: HashMap<Name, (i64, u64)>,
    /// The entries recorded, oldest first; an entry whose counter was taken since (its
    /// number no longer in `tops`) is skipped, and dropped when the queue is compacted, so
    /// that a take costs one lookup rather than a scan of the queue.
    order: VecDeque<(u64, Name)>,
    /// The number of the next entry.
    next: u64,
}

impl Departed {
    /// Whether `entry` of `order` is still its counter's.
    fn live(&self, (number, name): &(u64, Name)) -> bool {
        self.tops.get(name).is_some_and(|(_, kept)| kept == number)
    }
}

/// (Every change is a whole insert or remove: after a panic caught inside a use, `order`
/// may hold an entry too many, which is skipped like a taken one.)
static DEPARTED: MainThreadCell<Option<Departed>> = MainThreadCell::new(None);

/// `key` in `db` left this instance with its reservation's top at `top`.
pub fn record(db: i32, key: &[u8], top: i64) {
    DEPARTED.with(|departed| {
        let departed = departed.get_or_insert_with(Departed::default);
        let name: Name = (db, key.into());
        if let Some((known, _)) = departed.tops.get_mut(&name) {
            *known = (*known).max(top);
            return;
        }
        let number = departed.next;
        departed.next += 1;
        departed.tops.insert(name.clone(), (top, number));
        departed.order.push_back((number, name));
        while departed.tops.len() > CAPACITY {
            let Some(oldest) = departed.order.pop_front() else {
                break;
            };
            if departed.live(&oldest) {
                departed.tops.remove(&oldest.1);
            }
        }
        if departed.order.len() > 2 * CAPACITY {
            let order = std::mem::take(&mut departed.order);
            let live = order
                .into_iter()
                .filter(|entry| departed.live(entry))
                .collect();
            departed.order = live;
        }
    });
}

/// The top `key` in `db` left with, if it left lately; forgotten here (a key that comes
/// back takes it along).
pub fn take(db: i32, key: &[u8]) -> Option<i64> {
    DEPARTED.with(|departed| {
        let name: Name = (db, key.into());
        let (top, _) = departed.as_mut()?.tops.remove(&name)?;
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
            // Taken counters leave nothing that pushes a kept one out, however many.
            record(2, b"kept", 5);
            for round in 0..3 * CAPACITY {
                record(3, b"taken", round as i64);
                assert_eq!(take(3, b"taken"), Some(round as i64));
            }
            assert_eq!(take(2, b"kept"), Some(5));
        }
    }
}
