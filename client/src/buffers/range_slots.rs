//! The lock-free half of a segment buffer: the range being handed out, read by any number of
//! callers while one installer at a time replaces it.
//!
//! Taking a value costs one atomic add and a few plain loads, close to a bare
//! `AtomicU64::fetch_add`:
//! - One cursor word packs the range's *epoch* (which range this is) above the *index* of the
//!   next value in it. `fetch_add(1)` hands every (epoch, index) pair to exactly one caller.
//! - The range itself sits in one of two slots, chosen by the epoch's parity, and is
//!   published before the cursor moves to its epoch, so a caller that read epoch `e` from
//!   the cursor finds range `e` in its slot.
//! - A caller that stalled while two more ranges were installed would find its slot reused;
//!   each slot carries the epoch it holds and is written seqlock-style, so that caller sees
//!   the mismatch and takes again. The index it drew is skipped: never handed out twice.
//!
//! Why not a pointer swap (`ArcSwap`): loading and releasing a guard costs two or three
//! atomic read-modify-writes on shared memory per value, a quarter of the bare counter's rate.

use std::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};

use crate::buffers::cooperate::VALUES_PER_UNIT;

/// Bits of the cursor that count values within a range; the epoch is above them. 2^40 is
/// far beyond any range (a segment call returns at most 10^9 values) plus the failed takes
/// of callers waiting for the next range.
const INDEX_BITS: u32 = 40;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// Marks a slot being rewritten; no epoch (24 bits) has this value.
const WRITING: u64 = u64::MAX;

/// A range of segment values as the installer describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RangeSpec {
    /// The first value.
    pub first: i64,
    /// The distance between consecutive values.
    pub step: i64,
    /// How many values the range holds.
    pub count: u64,
    /// The index whose taker is told to start fetching the next range.
    pub prefetch_at: u64,
}

impl RangeSpec {
    /// A range with no values, the state before the first fetch.
    pub const EMPTY: RangeSpec = RangeSpec {
        first: 0,
        step: 1,
        count: 0,
        prefetch_at: u64::MAX,
    };
}

/// Which installed range a value was drawn from; increases by one per install.
pub(crate) type Epoch = u64;

/// What [`RangeSlots::take`] got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A value no other caller gets; `checkpoint` is true for one index in
    /// [`VALUES_PER_UNIT`], where the caller may take a unit of the runtime's cooperative
    /// budget; `prefetch_due` for exactly one caller per range (at a checkpoint).
    Value {
        value: i64,
        prefetch_due: bool,
        checkpoint: bool,
    },
    /// The range of this epoch is used up.
    Exhausted(Epoch),
}

/// Consecutive values of a range: `first`, `first + step`, … (`count` of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub first: i64,
    pub step: i64,
    pub count: u64,
}

/// What [`RangeSlots::take_block`] got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TakenBlock {
    /// Values no other caller gets (at least one, at most the number asked for);
    /// `prefetch_due` is true for exactly one taker per range; `checkpoint` when the block
    /// holds an index that is a multiple of [`VALUES_PER_UNIT`] (see [`Taken::Value`]).
    Values {
        block: Block,
        prefetch_due: bool,
        checkpoint: bool,
    },
    /// The range of this epoch is used up.
    Exhausted(Epoch),
}

/// One range, written only by the installer, read by every taker.
#[derive(Default)]
struct Slot {
    /// The epoch whose range the slot holds, or [`WRITING`] while it is being rewritten.
    epoch: AtomicU64,
    first: AtomicI64,
    step: AtomicI64,
    count: AtomicU64,
    prefetch_at: AtomicU64,
}

/// Keeps the cursor, written by every taker, off the cache line the slots are read from.
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

/// The current range of a segment buffer and the one before it.
pub(crate) struct RangeSlots {
    cursor: Padded<AtomicU64>,
    slots: Padded<[Slot; 2]>,
}

impl RangeSlots {
    /// Slots holding [`RangeSpec::EMPTY`] as epoch 0.
    pub fn new() -> Self {
        let slots = RangeSlots {
            cursor: Padded::default(),
            slots: Padded::default(),
        };
        slots.write_slot(0, RangeSpec::EMPTY);
        slots
    }

    /// The epoch of the current range.
    pub fn epoch(&self) -> Epoch {
        self.cursor.0.load(Ordering::Acquire) >> INDEX_BITS
    }

    /// The current range (empty if an install replaced it while it was being read).
    pub fn current(&self) -> RangeSpec {
        self.read_slot(self.epoch()).unwrap_or(RangeSpec::EMPTY)
    }

    /// Takes the next value of the current range.
    #[inline(always)]
    pub fn take(&self) -> Taken {
        loop {
            // Acquire: pairs with the Release store in `install`, so the slot of the epoch
            // read here is already written.
            let drawn = self.cursor.0.fetch_add(1, Ordering::Acquire);
            let epoch = drawn >> INDEX_BITS;
            let index = drawn & INDEX_MASK;
            let Some(range) = self.read_slot(epoch) else {
                continue; // the slot was reused while this caller stalled: draw again
            };
            if index >= range.count {
                return Taken::Exhausted(epoch);
            }
            // The prefetch index is a checkpoint (see `install`): one test on the fast path.
            let checkpoint = index & (VALUES_PER_UNIT - 1) == 0;
            return Taken::Value {
                value: range.first + index as i64 * range.step,
                prefetch_due: checkpoint && index == range.prefetch_at,
                checkpoint,
            };
        }
    }

    /// Takes up to `wanted` consecutive values of the current range with one atomic add
    /// (fewer at the end of the range). The caller whose block holds the prefetch index is
    /// told to prefetch, as [`take`](Self::take)'s is: indexes go to one caller each, in
    /// blocks or one at a time.
    pub fn take_block(&self, wanted: u64) -> TakenBlock {
        debug_assert!(wanted >= 1);
        loop {
            // As in `take`. A range holds at most 10^9 values and a caller draws past its end
            // once before it waits, so the index never carries into the epoch.
            let drawn = self.cursor.0.fetch_add(wanted, Ordering::Acquire);
            let epoch = drawn >> INDEX_BITS;
            let index = drawn & INDEX_MASK;
            let Some(range) = self.read_slot(epoch) else {
                continue;
            };
            if index >= range.count {
                return TakenBlock::Exhausted(epoch);
            }
            let count = wanted.min(range.count - index);
            // The first checkpoint at or after `index`.
            let next_checkpoint = (index + VALUES_PER_UNIT - 1) & !(VALUES_PER_UNIT - 1);
            return TakenBlock::Values {
                block: Block {
                    first: range.first + index as i64 * range.step,
                    step: range.step,
                    count,
                },
                prefetch_due: (index..index + count).contains(&range.prefetch_at),
                checkpoint: next_checkpoint < index + count,
            };
        }
    }

    /// Makes `range` current and returns the one it replaces. Its prefetch index is moved
    /// down to a checkpoint (at most `VALUES_PER_UNIT - 1` values earlier). Installs must
    /// not run concurrently with each other (takes may).
    pub fn install(&self, mut range: RangeSpec) -> RangeSpec {
        range.prefetch_at &= !(VALUES_PER_UNIT - 1);
        let epoch = self.epoch();
        let replaced = self.current();
        let next = (epoch + 1) & (u64::MAX >> INDEX_BITS);
        self.write_slot(next, range);
        // Release: a taker that draws the new epoch sees the slot written above. Draws from
        // the old epoch made before this store keep their (unique) indexes.
        self.cursor.0.store(next << INDEX_BITS, Ordering::Release);
        replaced
    }

    /// The range of `epoch`, or `None` if its slot now holds another epoch (or is being
    /// rewritten).
    #[inline(always)]
    fn read_slot(&self, epoch: Epoch) -> Option<RangeSpec> {
        let slot = &self.slots.0[(epoch & 1) as usize];
        if slot.epoch.load(Ordering::Acquire) != epoch {
            return None;
        }
        let range = RangeSpec {
            first: slot.first.load(Ordering::Relaxed),
            step: slot.step.load(Ordering::Relaxed),
            count: slot.count.load(Ordering::Relaxed),
            prefetch_at: slot.prefetch_at.load(Ordering::Relaxed),
        };
        // Seqlock validation: the fields read above belong to `epoch` only if the slot
        // still holds it after they were read.
        fence(Ordering::Acquire);
        (slot.epoch.load(Ordering::Relaxed) == epoch).then_some(range)
    }

    fn write_slot(&self, epoch: Epoch, range: RangeSpec) {
        let slot = &self.slots.0[(epoch & 1) as usize];
        slot.epoch.store(WRITING, Ordering::Relaxed);
        // Release: a reader that sees any field below also sees WRITING (or a later epoch).
        fence(Ordering::Release);
        slot.first.store(range.first, Ordering::Relaxed);
        slot.step.store(range.step, Ordering::Relaxed);
        slot.count.store(range.count, Ordering::Relaxed);
        slot.prefetch_at.store(range.prefetch_at, Ordering::Relaxed);
        slot.epoch.store(epoch, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};

    /// A range whose prefetch index is the checkpoint at or before its middle.
    fn range(first: i64, step: i64, count: u64) -> RangeSpec {
        RangeSpec {
            first,
            step,
            count,
            prefetch_at: (count / 2) & !(VALUES_PER_UNIT - 1),
        }
    }

    #[test]
    fn empty_until_the_first_install() {
        let slots = RangeSlots::new();
        assert_eq!(slots.take(), Taken::Exhausted(0));
        assert_eq!(slots.install(range(10, 3, 2)), RangeSpec::EMPTY);
        assert_eq!(slots.epoch(), 1);
    }

    #[test]
    fn hands_out_the_range_in_order_then_reports_it_used_up() {
        let slots = RangeSlots::new();
        slots.install(range(10, 3, 4));
        let taken: Vec<Taken> = (0..5).map(|_| slots.take()).collect();
        let value = |value, prefetch_due, checkpoint| Taken::Value {
            value,
            prefetch_due,
            checkpoint,
        };
        assert_eq!(
            taken,
            vec![
                value(10, true, true),
                value(13, false, false),
                value(16, false, false),
                value(19, false, false),
                Taken::Exhausted(1),
            ]
        );
        assert_eq!(slots.install(range(100, 1, 1)), range(10, 3, 4));
        // A one-value range: its only taker is the one told to prefetch.
        assert_eq!(slots.take(), value(100, true, true));
    }

    /// [`VALUES_PER_UNIT`], as a value and as an index.
    const N: u64 = VALUES_PER_UNIT;
    const N_VALUE: i64 = VALUES_PER_UNIT as i64;

    #[test]
    fn the_one_caller_told_to_prefetch_takes_the_checkpoint_at_or_before_the_prefetch_index() {
        let slots = RangeSlots::new();
        let asked = RangeSpec {
            prefetch_at: 2 * N + 3,
            ..range(0, 1, 3 * N)
        };
        slots.install(asked); // moved down to the checkpoint at 2N
        let due: Vec<i64> = (0..3 * N)
            .filter_map(|_| match slots.take() {
                Taken::Value {
                    value,
                    prefetch_due: true,
                    ..
                } => Some(value),
                _ => None,
            })
            .collect();
        assert_eq!(due, [2 * N_VALUE]);
    }

    #[test]
    fn blocks_and_single_values_share_the_range_and_its_prefetch_index_and_checkpoints() {
        let slots = RangeSlots::new();
        slots.install(RangeSpec {
            prefetch_at: N,
            ..range(100, 2, 3 * N)
        });
        let block = |index: u64, count, prefetch_due, checkpoint| TakenBlock::Values {
            block: Block {
                first: 100 + 2 * index as i64,
                step: 2,
                count,
            },
            prefetch_due,
            checkpoint,
        };
        assert_eq!(slots.take_block(N - 5), block(0, N - 5, false, true)); // holds 0
        let value = 100 + 2 * (N_VALUE - 5);
        assert!(
            matches!(slots.take(), Taken::Value { value: v, checkpoint: false, .. } if v == value)
        );
        // N-4..N+6 holds the prefetch index N, a checkpoint.
        assert_eq!(slots.take_block(10), block(N - 4, 10, true, true));
        assert_eq!(slots.take_block(N), block(N + 6, N, false, true)); // holds 2N
        assert_eq!(
            slots.take_block(N - 10),
            block(2 * N + 6, N - 10, false, false)
        );
        assert_eq!(slots.take_block(10), block(3 * N - 4, 4, false, false)); // the rest
        assert_eq!(slots.take_block(10), TakenBlock::Exhausted(1));
        assert_eq!(slots.take(), Taken::Exhausted(1));
    }

    #[test]
    fn one_value_in_values_per_unit_is_a_checkpoint() {
        let slots = RangeSlots::new();
        slots.install(range(0, 1, 2 * N + 10));
        let checkpoints: Vec<i64> = (0..2 * N + 10)
            .filter_map(|_| match slots.take() {
                Taken::Value {
                    value,
                    checkpoint: true,
                    ..
                } => Some(value),
                _ => None,
            })
            .collect();
        assert_eq!(checkpoints, [0, N_VALUE, 2 * N_VALUE]);
    }

    #[test]
    fn a_stale_epoch_is_never_read_as_another_range() {
        let slots = RangeSlots::new();
        slots.install(range(0, 1, 5)); // epoch 1, slot 1
        slots.install(range(100, 1, 5)); // epoch 2, slot 0
        slots.install(range(200, 1, 5)); // epoch 3, slot 1 again
        assert_eq!(slots.read_slot(1), None);
        assert_eq!(slots.read_slot(3), Some(range(200, 1, 5)));
    }

    /// Four threads take while one installs small ranges: every other range only once the
    /// takers have used it up, the others at once (so takers race installs and slot reuse).
    /// Every value is taken at most once and lies in an installed range; the waited-for
    /// ranges are handed out nearly whole.
    #[test]
    fn concurrent_takes_and_installs_hand_out_each_value_once() {
        const RANGES: i64 = 20_000;
        const PER_RANGE: u64 = 50;
        let slots = Arc::new(RangeSlots::new());
        let taken = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Takers 0 and 2 take one value at a time, 1 and 3 blocks of 4 and 8.
        let block_of = |taker: u64| if taker % 2 == 1 { taker * 2 + 2 } else { 1 };
        let takers: Vec<_> = (0..4u64)
            .map(|taker| {
                let (slots, taken, done) = (slots.clone(), taken.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    while !done.load(Ordering::Acquire) {
                        if block_of(taker) == 1 {
                            if let Taken::Value { value, .. } = slots.take() {
                                mine.push(value);
                            }
                        } else if let TakenBlock::Values {
                            block: Block { first, step, count },
                            ..
                        } = slots.take_block(block_of(taker))
                        {
                            mine.extend((0..count as i64).map(|i| first + i * step));
                        }
                    }
                    taken.lock().unwrap().extend(mine);
                })
            })
            .collect();
        for n in 0..RANGES {
            // Range n holds n·1000 .. n·1000 + 49: disjoint, as the server's are.
            slots.install(range(n * 1000, 1, PER_RANGE));
            while n % 2 == 0 && slots.cursor.0.load(Ordering::Relaxed) & INDEX_MASK < PER_RANGE {
                std::hint::spin_loop();
            }
        }
        done.store(true, Ordering::Release);
        for taker in takers {
            taker.join().unwrap();
        }
        let taken = taken.lock().unwrap();
        let distinct: HashSet<i64> = taken.iter().copied().collect();
        assert_eq!(distinct.len(), taken.len(), "a value was handed out twice");
        assert!(taken
            .iter()
            .all(|v| v % 1000 < PER_RANGE as i64 && v / 1000 < RANGES));
        // A waited-for range loses values only to a taker whose slot was reused between
        // its draw and its read: at most one draw per taker, 1 + 4 + 1 + 8 values.
        let most_lost = (0..4).map(block_of).sum::<u64>() as usize;
        for n in (0..RANGES).step_by(2) {
            let got = (0..PER_RANGE as i64)
                .filter(|i| distinct.contains(&(n * 1000 + i)))
                .count();
            assert!(
                got >= PER_RANGE as usize - most_lost,
                "range {n}: {got} values"
            );
        }
    }
}
