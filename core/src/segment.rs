//! Segment ranges: the n smallest values above a counter that belong to this instance's
//! residue class (`≡ offset (mod step)`), as a compact `first, last, step` range.

use crate::{IdError, Identity};

/// The largest COUNT one segment call may ask for. The reply stays three integers whatever
/// the count; the bound keeps a single call from consuming a counter's whole range by a slip
/// of the keyboard.
pub const MAX_SEGMENT_COUNT: u64 = 1_000_000_000;

/// A run of `count` values `first, first + step, …, last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRange {
    /// The smallest value handed out.
    pub first: i64,
    /// The largest value handed out; the counter's new value.
    pub last: i64,
    /// Distance between consecutive values (the deployment's step).
    pub step: u64,
    /// Number of values.
    pub count: u64,
}

impl SegmentRange {
    /// The values of the range, increasing.
    pub fn values(&self) -> impl Iterator<Item = i64> {
        let (first, step) = (self.first, self.step as i64);
        (0..self.count as i64).map(move |i| first + i * step)
    }

    /// Whether `value` is one of the range's values.
    pub fn contains(&self, value: i64) -> bool {
        value >= self.first
            && value <= self.last
            && ((value - self.first) as u64).is_multiple_of(self.step)
    }
}

/// Where a counter continues: above what the key holds and above a value this instance
/// `remembered` handing out for it (which a full sync from another master may have erased
/// from the key).
pub fn continue_above(current: i64, remembered: Option<i64>) -> i64 {
    remembered.map_or(current, |remembered| current.max(remembered))
}

/// The `count` smallest values above `current + fence` that are `≡ offset (mod step)`.
///
/// `current` is what the counter holds (0 for a missing key); `fence` is added once after a
/// start so that a tail of values the persistence lost in a crash is skipped.
pub fn next_range(
    current: i64,
    identity: Identity,
    count: u64,
    fence: u64,
) -> Result<SegmentRange, IdError> {
    if count == 0 || count > MAX_SEGMENT_COUNT {
        return Err(IdError::CountOutOfRange {
            count,
            max: MAX_SEGMENT_COUNT,
        });
    }
    if current < 0 {
        return Err(IdError::NegativeSeed { value: current });
    }
    let step = i128::from(identity.step);
    let base = i128::from(current) + i128::from(fence);
    let to_next = match (i128::from(identity.offset) - base).rem_euclid(step) {
        0 => step,
        gap => gap,
    };
    let first = base + to_next;
    let last = first + (i128::from(count) - 1) * step;
    match (i64::try_from(first), i64::try_from(last)) {
        (Ok(first), Ok(last)) => Ok(SegmentRange {
            first,
            last,
            step: identity.step,
            count,
        }),
        _ => Err(IdError::Overflow {
            current,
            count,
            fence,
            room: room_above(i128::from(current) + i128::from(fence), identity),
            room_without_fence: room_above(i128::from(current), identity),
        }),
    }
}

/// How many values `≡ offset (mod step)` lie above `base` and at most 2^63 − 1.
fn room_above(base: i128, identity: Identity) -> u64 {
    let step = i128::from(identity.step);
    let to_next = match (i128::from(identity.offset) - base).rem_euclid(step) {
        0 => step,
        gap => gap,
    };
    let first = base + to_next;
    let max = i128::from(i64::MAX);
    if first > max {
        0
    } else {
        ((max - first) / step + 1) as u64
    }
}
