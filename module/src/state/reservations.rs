//! What the module holds per segment key, for no longer than the key lives: its reservation
//! (`idgen_core::Reservation`: the top written into the key and the values under it not yet
//! handed out), and — by having an entry at all — that the key had its restart fence.
//!
//! The fence: after this instance starts, each segment key skips `idgen.segment-fence`
//! values on its first use as master, so a tail of values this instance handed out before
//! the start but its persistence lost (a crash before the write reached disk) is never
//! handed out again. Only a start arms it (the table begins empty at load): loading data
//! (`DEBUG RELOAD`, replaying an AOF) does not, and neither does a promotion — what a
//! promoted instance handed out before a full sync erased it is remembered exactly
//! (`state::failback_marks`), and a replica that never issued has no tail of its own.
//!
//! A reservation is voided whenever the key may have changed behind it (a restore, a TTL
//! set, a role change, a flush, `SWAPDB`); a plain write is seen without an event, because
//! the key no longer holds the reservation's top. An entry is removed with its key (delete,
//! expiry, eviction, a slot moved away, a flush that removed it), and follows it to its new
//! name through a rename or a move to another database.
//!
//! One table per database, keyed by the key's bytes hashed with SipHash-1-3 under a random
//! key, as Redis hashes its own keyspace: key names come from clients, and a hash they could
//! make collide would let one client slow the server's main thread. The `siphasher` crate's
//! one-shot hash of a byte string costs what a hand-written one did; the standard library's
//! streaming hasher costs `SEGMENT.NEXT` about 50 instructions more (docs/performance.md).
//! Redis runs all of this on its main thread; the table sits in a `MainThreadCell`.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use idgen_core::{Reservation, SegmentRange};

use idgen_core::key_slot;
use siphasher::sip::SipHasher13;

use crate::ffi::main_thread::MainThreadCell;

/// A SipHash-1-3 of key names under a key drawn at random for each table.
#[derive(Clone, Copy)]
struct NameHasher(SipHasher13);

impl Default for NameHasher {
    fn default() -> Self {
        // Two outputs of the standard library's SipHash under its own random key (seeded
        // from the operating system): unpredictable to clients.
        let state = RandomState::new();
        NameHasher(SipHasher13::new_with_keys(
            state.hash_one(0u64),
            state.hash_one(1u64),
        ))
    }
}

impl NameHasher {
    #[inline]
    fn hash(&self, name: &[u8]) -> u64 {
        self.0.hash(name)
    }
}

/// One database's keys: name and reservation.
#[derive(Default)]
struct Keys {
    entries: HashTable<(Box<[u8]>, Reservation)>,
    hasher: NameHasher,
}

impl Keys {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key)
    }

    fn get(&self, key: &[u8]) -> Option<&Reservation> {
        self.entries
            .find(self.hash(key), |(name, _)| **name == *key)
            .map(|(_, reservation)| reservation)
    }

    fn get_mut(&mut self, key: &[u8]) -> Option<&mut Reservation> {
        let hash = self.hash(key);
        self.entries
            .find_mut(hash, |(name, _)| **name == *key)
            .map(|(_, reservation)| reservation)
    }

    fn insert(&mut self, key: &[u8], reservation: Reservation) {
        if let Some(known) = self.get_mut(key) {
            *known = reservation;
            return;
        }
        let hash = self.hash(key);
        let hasher = &self.hasher;
        self.entries
            .insert_unique(hash, (key.into(), reservation), |(name, _)| {
                hasher.hash(name)
            });
    }

    fn remove(&mut self, key: &[u8]) -> bool {
        let hash = self.hash(key);
        let Ok(entry) = self.entries.find_entry(hash, |(name, _)| **name == *key) else {
            return false;
        };
        entry.remove();
        // Give back the memory of a table that held many more keys (amortized: the table
        // halves at most once per as many removals as it then holds).
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        if capacity > 64 && len < capacity / 4 {
            let hasher = &self.hasher;
            self.entries
                .shrink_to(len * 2, |(name, _)| hasher.hash(name));
        }
        true
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn reservations(&mut self) -> impl Iterator<Item = &mut Reservation> {
        self.entries.iter_mut().map(|(_, reservation)| reservation)
    }
}

/// Per database (indexed by its number), the segment keys used since the start. `None`
/// until the module has loaded.
/// (Every change is a whole insert, remove or field store: after a panic caught inside a
/// use, the table is consistent.)
static TABLE: MainThreadCell<Option<Vec<Keys>>> = MainThreadCell::new(None);

/// Arms the fence for every key: called once, when the module loads (a start).
pub fn arm() {
    TABLE.with(|table| *table = Some(Vec::new()));
}

/// Runs `f` on the keys of `db`, if any were used.
fn in_db<R>(db: i32, f: impl FnOnce(&mut Keys) -> R) -> Option<R> {
    TABLE.with(|table| {
        let keys = table.as_mut()?.get_mut(usize::try_from(db).ok()?)?;
        Some(f(keys))
    })
}

/// Takes `count` values from the key's reservation, if the key `held` its top and enough are
/// left: the call then writes nothing. Allocates nothing.
pub fn take(db: i32, key: &[u8], held: i64, count: u64, step: u64) -> Option<SegmentRange> {
    in_db(db, |keys| keys.get_mut(key)?.take(held, count, step)).flatten()
}

/// The key's last reservation (live or voided); `None` if the key has not been used since
/// the start, which means its fence is still to be applied.
pub fn get(db: i32, key: &[u8]) -> Option<Reservation> {
    in_db(db, |keys| keys.get(key).copied()).flatten()
}

/// Stores the key's new reservation, after its top was written into the key.
pub fn store(db: i32, key: &[u8], reservation: Reservation) {
    let Ok(index) = usize::try_from(db) else {
        return;
    };
    TABLE.with(|table| {
        let Some(table) = table.as_mut() else { return };
        if table.len() <= index {
            table.resize_with(index + 1, Keys::default);
        }
        table[index].insert(key, reservation);
    });
}

/// Voids the reservation of `key` in `db`: its next call continues above what it holds.
/// Returns whether the module held the key (it is a segment counter).
pub fn void(db: i32, key: &[u8]) -> bool {
    in_db(db, |keys| keys.get_mut(key).map(Reservation::void))
        .flatten()
        .is_some()
}

/// Voids every reservation in `db` (`-1`: in every database).
pub fn void_all(db: i32) {
    TABLE.with(|table| {
        for (index, keys) in table.iter_mut().flatten().enumerate() {
            if db == -1 || usize::try_from(db) == Ok(index) {
                keys.reservations().for_each(Reservation::void);
            }
        }
    });
}

/// `SWAPDB first second`: the keys' records follow their data, and every reservation in
/// both is voided.
pub fn swap_dbs(first: i32, second: i32) {
    let (Ok(first), Ok(second)) = (usize::try_from(first), usize::try_from(second)) else {
        return;
    };
    TABLE.with(|table| {
        let Some(table) = table.as_mut() else { return };
        let needed = first.max(second) + 1;
        if table.len() < needed {
            table.resize_with(needed, Keys::default);
        }
        table.swap(first, second);
        for index in [first, second] {
            table[index].reservations().for_each(Reservation::void);
        }
    });
}

/// Forgets the keys of the slots in `ranges` (inclusive), which moved to another node: if
/// one comes back, it is fenced again, which is safe. Returns how many were forgotten.
pub fn forget_slots(ranges: &[(u16, u16)]) -> usize {
    TABLE.with(|table| {
        let mut forgotten = 0;
        for keys in table.iter_mut().flatten() {
            let before = keys.len();
            keys.entries.retain(|(key, _)| {
                let slot = key_slot::of(key);
                !ranges
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&slot))
            });
            forgotten += before - keys.len();
        }
        forgotten
    })
}

/// The keys held in `db` (`-1`: in every database) with their reservation's top, copied
/// out so that the caller can look them up outside the table's use (a lookup may expire a
/// key, whose event comes back here).
pub fn held(db: i32) -> Vec<(i32, Vec<u8>, i64)> {
    TABLE.with(|table| {
        table
            .iter()
            .flatten()
            .enumerate()
            .filter(|&(index, _)| db == -1 || usize::try_from(db) == Ok(index))
            .flat_map(|(index, keys)| {
                keys.entries
                    .iter()
                    .map(move |(key, reservation)| (index as i32, key.to_vec(), reservation.top()))
            })
            .collect()
    })
}

/// The keys held in the slots of `ranges` (inclusive), in any database, with their
/// reservation's top (at or above every value handed out for the key here).
pub fn held_in_slots(ranges: &[(u16, u16)]) -> Vec<(i32, Vec<u8>, i64)> {
    let mut keys = held(-1);
    keys.retain(|(_, key, _)| {
        let slot = key_slot::of(key);
        ranges
            .iter()
            .any(|&(first, last)| (first..=last).contains(&slot))
    });
    keys
}

/// How many keys are held (`INFO idgen`).
pub fn len() -> usize {
    TABLE.with(|table| table.iter().flatten().map(Keys::len).sum())
}

/// The record of a key being renamed or moved, between its `rename_from`/`move_from` event
/// and the `rename_to`/`move_to` event that the same command fires right after: `Some(None)`
/// for a key the module did not hold.
static CARRIED: MainThreadCell<Option<Option<Reservation>>> = MainThreadCell::new(None);

/// `key` in `db` leaves under this name (`RENAME`, `MOVE`): its record is taken out, to be
/// given to the name it arrives under ([`carry_to`]), so that what it handed out — and
/// a lowering `SET` before the move — follows the counter.
pub fn carry_from(db: i32, key: &[u8]) {
    let record = in_db(db, |keys| {
        let record = keys.get(key).copied();
        keys.remove(key);
        record
    })
    .flatten();
    CARRIED.with(|carried| *carried = Some(record));
}

/// `key` in `db` arrives under this name (`RENAME`, `MOVE`): it takes the record carried
/// from its old name, merged with what this name's record (a key the command replaced)
/// handed out. Without a carried record (another command), the name's record is voided.
/// Returns whether a record was carried.
pub fn carry_to(db: i32, key: &[u8], step: u64) -> bool {
    let Some(carried) = CARRIED.with(Option::take) else {
        void(db, key);
        return false;
    };
    match (carried, get(db, key)) {
        (Some(mut record), Some(replaced)) => {
            record.absorb(&replaced, step);
            store(db, key, record);
        }
        (Some(record), None) => store(db, key, record),
        // A key the module did not hold replaced one it did: continue above both.
        (None, Some(_)) => {
            void(db, key);
        }
        (None, None) => {}
    }
    true
}

/// Forgets `key` in `db` (it was deleted, expired, evicted, renamed or moved away).
/// Returns its reservation's top if the module held the key (it is a segment counter).
pub fn forget(db: i32, key: &[u8]) -> Option<i64> {
    in_db(db, |keys| {
        let top = keys.get(key).map(Reservation::top);
        keys.remove(key);
        top
    })
    .flatten()
}
