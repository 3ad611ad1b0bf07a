//! Segment reservations: a segment key's value written ahead of use, and the values under it
//! handed out from memory.
//!
//! A call that cannot be served from memory takes its range as before and writes into the
//! key not the range's last value but a *top* some values higher: every value handed out is
//! at most what the key holds, so whatever continues from the key (a replica promoted, a
//! restart, another instance after a slot moved) continues above them. While the key still
//! holds that top, the following calls take the values between from memory and write
//! nothing. How far ahead the top goes adapts to demand: it doubles when a reservation was
//! used up within [`GROW_WITHIN_MS`], halves when it lasted longer than [`SHRINK_AFTER_MS`],
//! and never passes the policy's bound.

use crate::{continue_above, next_range, IdError, Identity, SegmentRange};

/// A reservation used up faster than this doubles the next one.
pub const GROW_WITHIN_MS: u64 = 1_000;

/// A reservation that lasted longer than this halves the next one.
pub const SHRINK_AFTER_MS: u64 = 10_000;

/// The most values reserved ahead of a call, whatever the fence.
pub const MAX_AHEAD: u64 = 32_768;

/// How far ahead of use a segment key's value may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationPolicy {
    /// The most values reserved past a call's own range.
    pub max_ahead: u64,
}

impl ReservationPolicy {
    /// The policy for a segment fence of `fence` values: nothing ahead in dense mode (fence
    /// 0, where the next value after a restart must be the last one plus `step`), and at
    /// most an eighth of the fence otherwise, so that the values a crash can lose — those
    /// handed out in the persistence's window plus one reservation — stay below the fence
    /// a counter skips after the restart.
    pub fn for_fence(fence: u64) -> Self {
        ReservationPolicy {
            max_ahead: (fence / 8).min(MAX_AHEAD),
        }
    }
}

/// One key's reservation: the top written into the key and the values below it not yet
/// handed out. 16 bytes: the module keeps one per segment key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The value written into the key; every value handed out is at most this.
    top: i64,
    /// When `top` was written: the low 32 bits of a monotonic clock's milliseconds (compared
    /// with wrapping arithmetic; a key idle for 49 days may once grow too soon).
    written_at_ms: u32,
    /// Values below `top` (in the instance's class, ending at `top`) not yet handed out;
    /// [`VOID`] once something else may have changed the key (see [`Reservation::void`]).
    left: u16,
    /// Values reserved past the range of the call that wrote `top`, at most [`MAX_AHEAD`].
    ahead: u16,
}

/// `left` of a voided reservation (above [`MAX_AHEAD`]).
const VOID: u16 = u16::MAX;

impl Reservation {
    /// The reservation made by a call that took `range` and could not be served from
    /// memory; `previous` is the key's last reservation (live or not), whose duration sets
    /// how far ahead this one goes. The key must then be written the returned [`top`](Self::top)
    /// before any value of `range` is answered.
    pub fn after(
        previous: Option<&Reservation>,
        range: SegmentRange,
        now_ms: u64,
        policy: ReservationPolicy,
    ) -> Reservation {
        let wanted = match previous {
            None => 0,
            Some(previous) => {
                let lasted = u64::from((now_ms as u32).wrapping_sub(previous.written_at_ms));
                if lasted < GROW_WITHIN_MS {
                    (u64::from(previous.ahead) * 2).max(range.count)
                } else if lasted > SHRINK_AFTER_MS {
                    u64::from(previous.ahead) / 2
                } else {
                    u64::from(previous.ahead)
                }
            }
        };
        // The top must stay a signed 64-bit integer: near the end, reserve what still fits.
        let room = (i64::MAX - range.last) as u64 / range.step;
        let ahead = wanted.min(policy.max_ahead).min(room).min(MAX_AHEAD);
        Reservation {
            top: range.last + (ahead * range.step) as i64,
            written_at_ms: now_ms as u32,
            // At most MAX_AHEAD, so both fit and `left` is never VOID.
            left: ahead as u16,
            ahead: ahead as u16,
        }
    }

    /// The value to write into the key.
    pub fn top(&self) -> i64 {
        self.top
    }

    /// Values still to hand out from memory (0 once voided).
    pub fn left(&self) -> u64 {
        if self.left == VOID {
            0
        } else {
            u64::from(self.left)
        }
    }

    /// Takes the next `count` values from memory, if the key still `held` the top this
    /// reservation wrote and that many are left; `step` is the instance's step.
    pub fn take(&mut self, held: i64, count: u64, step: u64) -> Option<SegmentRange> {
        let left = self.left();
        if held != self.top || count == 0 || count > left {
            return None;
        }
        let first = self.top - ((left - 1) * step) as i64;
        self.left -= count as u16;
        Some(SegmentRange {
            first,
            last: first + ((count - 1) * step) as i64,
            step,
            count,
        })
    }

    /// The last value handed out under this reservation, if the key still holds its top:
    /// a call that needs more than is left continues from there, so no value is skipped.
    pub fn last_taken(&self, held: i64, step: u64) -> Option<i64> {
        (self.left != VOID && held == self.top).then(|| self.top - (self.left() * step) as i64)
    }

    /// The highest value this instance may have handed out under this reservation (with
    /// `step`, the instance's step): exactly the last one taken while the reservation is
    /// live, its top once voided (how many were left is then forgotten).
    pub fn handed_out_up_to(&self, step: u64) -> i64 {
        if self.left == VOID {
            self.top
        } else {
            self.top - (u64::from(self.left) * step) as i64
        }
    }

    /// Whether the key holds less than the last value handed out under this reservation
    /// although nothing voided it: a plain write (`SET`) lowered the counter below values
    /// this instance handed out. (A voided reservation's key may hold less for reasons of
    /// its own — a restore, a sync from another master — which are not an operator lowering
    /// the counter.)
    pub fn lowered_by(&self, held: i64, step: u64) -> bool {
        self.left != VOID && held < self.handed_out_up_to(step)
    }

    /// Takes in what `other` — the record of a key that was moved onto this one (a `RENAME`
    /// onto an existing key) — says was handed out: if it is higher than what this
    /// reservation has handed out, the reservation is voided with that as its top, so the
    /// next call continues above both; otherwise nothing changes.
    pub fn absorb(&mut self, other: &Reservation, step: u64) {
        let theirs = other.handed_out_up_to(step);
        if theirs > self.handed_out_up_to(step) {
            self.top = theirs;
            self.left = VOID;
        }
    }

    /// Forgets the values left: the key was, or may have been, changed by something other
    /// than this reservation (a write, a restore, a sync, a role change), so the next call
    /// continues above what the key then holds.
    pub fn void(&mut self) {
        self.left = VOID;
    }
}

/// What one `SEGMENT.NEXT` call needs besides the key's value and reservation.
#[derive(Debug, Clone, Copy)]
pub struct SegmentRequest {
    /// The instance's step and offset.
    pub identity: Identity,
    /// How many values the call asks for.
    pub count: u64,
    /// Values to skip when the call continues from the key's value (the restart fence on
    /// a key's first use after a start; 0 otherwise).
    pub fence: u64,
    /// A value this instance handed out for the key before a full sync erased it.
    pub remembered: Option<i64>,
    /// Now, in milliseconds of a monotonic clock.
    pub now_ms: u64,
    /// How far ahead the key may be written.
    pub policy: ReservationPolicy,
}

/// How a call was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// From the key's reservation: nothing to write.
    FromMemory(SegmentRange),
    /// From a new reservation, whose top must be written into the key (and reach the AOF
    /// and the replicas) before the range is answered.
    Written {
        /// The values handed out.
        range: SegmentRange,
        /// The key's new reservation.
        reservation: Reservation,
    },
}

/// One `SEGMENT.NEXT` on a key holding `held` (0 when missing) with the key's last
/// `reservation`, if the instance has one: from memory when the key still holds its top and
/// enough is left; otherwise continuing from the last value taken under it (no gap), or,
/// when the key changed behind it or there is none, from above the key's value (plus the
/// fence and any remembered value).
pub fn serve(
    held: i64,
    reservation: Option<&mut Reservation>,
    request: SegmentRequest,
) -> Result<Served, IdError> {
    let mut previous = None;
    if let Some(reservation) = reservation {
        if let Some(range) = reservation.take(held, request.count, request.identity.step) {
            return Ok(Served::FromMemory(range));
        }
        previous = Some(*reservation);
    }
    let (range, reservation) = reserve(held, previous.as_ref(), request)?;
    Ok(Served::Written { range, reservation })
}

/// The part of [`serve`] for a call its reservation could not serve from memory: the range
/// and the new reservation, whose top must be written into the key before the range is
/// answered.
///
/// It never continues below the last value handed out under the previous reservation (its
/// top, once voided), so a key lowered behind the module (a `SET` to a smaller number, a
/// restore of an older value) cannot make it hand them out again. To start
/// a counter lower on purpose, delete the key first: the module then forgets its reservation.
pub fn reserve(
    held: i64,
    previous: Option<&Reservation>,
    request: SegmentRequest,
) -> Result<(SegmentRange, Reservation), IdError> {
    let step = request.identity.step;
    let (base, fence) = match previous.and_then(|r| r.last_taken(held, step)) {
        Some(last) => (last, 0),
        None => {
            let above = continue_above(held, request.remembered);
            // A negative value stays refused (`next_range`) whatever was handed out before.
            let base = match previous {
                Some(previous) if above >= 0 => above.max(previous.handed_out_up_to(step)),
                _ => above,
            };
            (base, request.fence)
        }
    };
    let range = next_range(base, request.identity, request.count, fence)?;
    let reservation = Reservation::after(previous, range, request.now_ms, request.policy);
    Ok((range, reservation))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: i64, count: u64, step: u64) -> SegmentRange {
        SegmentRange {
            first,
            last: first + ((count - 1) * step) as i64,
            step,
            count,
        }
    }

    const POLICY: ReservationPolicy = ReservationPolicy { max_ahead: 1_000 };

    #[test]
    fn a_reservation_takes_16_bytes() {
        assert_eq!(std::mem::size_of::<Reservation>(), 16);
        const { assert!(MAX_AHEAD < VOID as u64) };
    }

    #[test]
    fn absorbing_a_record_that_handed_out_more_continues_above_it() {
        let policy = POLICY;
        let first = Reservation::after(None, range(1, 1, 1), 0, policy);
        let mut mine = Reservation::after(Some(&first), range(2, 1, 1), 10, policy);
        assert_eq!((mine.top(), mine.left()), (3, 1));
        let lower = Reservation::after(None, range(1, 1, 1), 0, policy);
        mine.absorb(&lower, 1);
        assert_eq!(
            (mine.top(), mine.left()),
            (3, 1),
            "a lower record changes nothing"
        );
        let higher = Reservation::after(None, range(100, 1, 1), 0, policy);
        mine.absorb(&higher, 1);
        assert_eq!(mine.left(), 0);
        assert_eq!(mine.handed_out_up_to(1), 100);
        assert_eq!(
            mine.last_taken(100, 1),
            None,
            "voided: continued above, not from memory"
        );
    }

    #[test]
    fn a_first_call_reserves_nothing_ahead() {
        let reservation = Reservation::after(None, range(5, 1, 4), 0, POLICY);
        assert_eq!(reservation.top(), 5);
        assert_eq!(reservation.left(), 0);
    }

    #[test]
    fn a_reservation_used_up_fast_doubles_and_one_that_lasted_halves() {
        let first = Reservation::after(None, range(1, 1, 1), 0, POLICY);
        let second = Reservation::after(Some(&first), range(2, 1, 1), 10, POLICY);
        assert_eq!((second.top(), second.left()), (3, 1));
        let third = Reservation::after(Some(&second), range(4, 1, 1), 20, POLICY);
        assert_eq!((third.top(), third.left()), (6, 2));
        let steady = Reservation::after(Some(&third), range(7, 1, 1), 5_000, POLICY);
        assert_eq!(steady.left(), 2);
        let slow = Reservation::after(Some(&steady), range(10, 1, 1), 20_000, POLICY);
        assert_eq!(slow.left(), 1);
    }

    #[test]
    fn a_batch_asked_fast_reserves_at_least_its_own_size_ahead() {
        let first = Reservation::after(None, range(1, 100, 1), 0, POLICY);
        let second = Reservation::after(Some(&first), range(101, 100, 1), 5, POLICY);
        assert_eq!(second.left(), 100);
    }

    #[test]
    fn the_policy_bounds_how_far_ahead() {
        let mut reservation = Reservation::after(None, range(1, 1, 1), 0, POLICY);
        for now in 1..40 {
            reservation = Reservation::after(Some(&reservation), range(1, 1, 1), now, POLICY);
        }
        assert_eq!(reservation.left(), POLICY.max_ahead);
        assert_eq!(ReservationPolicy::for_fence(0).max_ahead, 0);
        assert_eq!(ReservationPolicy::for_fence(800).max_ahead, 100);
        assert_eq!(
            ReservationPolicy::for_fence(1_000_000_000).max_ahead,
            MAX_AHEAD
        );
    }

    #[test]
    fn values_come_from_memory_in_class_while_the_key_holds_the_top() {
        let first = Reservation::after(None, range(3, 1, 4), 0, POLICY);
        let mut reservation = Reservation::after(Some(&first), range(7, 1, 4), 1, POLICY);
        // 7 handed out by the call, 11 reserved ahead.
        assert_eq!(reservation.top(), 11);
        assert_eq!(reservation.take(11, 1, 4), Some(range(11, 1, 4)));
        assert_eq!(reservation.take(11, 1, 4), None, "nothing left");
        assert_eq!(reservation.last_taken(11, 4), Some(11));
    }

    #[test]
    fn a_key_holding_anything_else_or_a_void_serves_nothing_from_memory() {
        let first = Reservation::after(None, range(1, 1, 1), 0, POLICY);
        let mut reservation = Reservation::after(Some(&first), range(2, 1, 1), 1, POLICY);
        assert_eq!(reservation.take(99, 1, 1), None);
        assert_eq!(reservation.last_taken(99, 1), None);
        reservation.void();
        assert_eq!(reservation.take(3, 1, 1), None);
        assert_eq!(reservation.left(), 0);
    }

    fn request(count: u64) -> SegmentRequest {
        SegmentRequest {
            identity: Identity { step: 1, offset: 0 },
            count,
            fence: 0,
            remembered: None,
            now_ms: 0,
            policy: POLICY,
        }
    }

    #[test]
    fn a_key_lowered_behind_the_module_continues_above_what_was_handed_out() {
        let (first, reservation) = reserve(1_000_000_000, None, request(5)).unwrap();
        assert_eq!((first.first, first.last), (1_000_000_001, 1_000_000_005));
        assert!(reservation.lowered_by(5, 1));
        assert!(!reservation.lowered_by(reservation.top(), 1));
        assert!(
            !reservation.lowered_by(reservation.top() + 10, 1),
            "raising is seeding"
        );
        let (next, _) = reserve(5, Some(&reservation), request(1)).unwrap();
        assert_eq!(next.first, reservation.top() + 1);
        // Voided (restored, synced): not counted as lowered, and still continues above.
        let mut voided = reservation;
        voided.void();
        assert!(!voided.lowered_by(5, 1));
        let (after_void, _) = reserve(5, Some(&voided), request(1)).unwrap();
        assert_eq!(after_void.first, reservation.top() + 1);
        // A raise continues above the new value.
        let (raised, _) = reserve(2_000_000_000, Some(&reservation), request(1)).unwrap();
        assert_eq!(raised.first, 2_000_000_001);
        // Below the top but above the last value handed out: values reserved ahead and not
        // handed out are free, so the seed is followed exactly.
        let ahead = Reservation::after(Some(&reservation), range(1_000_000_006, 5, 1), 1, POLICY);
        assert_eq!(ahead.handed_out_up_to(1), 1_000_000_010);
        assert_eq!(ahead.top(), 1_000_000_015);
        assert!(!ahead.lowered_by(1_000_000_012, 1));
        assert!(ahead.lowered_by(1_000_000_009, 1));
        let (seeded, _) = reserve(1_000_000_012, Some(&ahead), request(1)).unwrap();
        assert_eq!(seeded.first, 1_000_000_013);
        // A negative value is refused, used before or not.
        assert!(reserve(-5, Some(&ahead), request(1)).is_err());
        assert!(reserve(-5, None, request(1)).is_err());
    }

    #[test]
    fn near_the_end_of_i64_the_top_reserves_only_what_fits() {
        let mut grown = Reservation::after(None, range(1, 1, 10), 0, POLICY);
        for now in 1..5 {
            grown = Reservation::after(Some(&grown), range(1, 1, 10), now, POLICY);
        }
        assert_eq!(grown.left(), 8);
        let last = i64::MAX - 25;
        let reservation = Reservation::after(Some(&grown), range(last, 1, 10), 5, POLICY);
        assert_eq!(reservation.top(), last + 20);
        assert_eq!(reservation.left(), 2);
    }
}
