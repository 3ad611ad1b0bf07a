//! When a snowflake cache refills, how large a batch is, and how long an ID stays young,
//! from what the cache measured. An ID's time is when the server issued it, so every
//! millisecond an ID waits in the cache is staleness:
//! - a refill starts once the cached IDs would last less than [`lead`], so that
//!   it lands just before the cache runs dry, or would not cover the largest burst callers
//!   took lately (`demand.rs`);
//! - a batch holds what callers use in a fetch ([`batch`]), at least one burst,
//!   at least twice the last batch when callers had to wait for it, within `1..=batch`;
//! - an ID older than [`young_limit`] is thrown away rather than handed out, and
//!   the cache counts such IDs as gone when it times its refills ([`time_left`]).
//!
//! An ID taken from a batch is then, at steady rates, about half a round trip (on its way back)
//! plus the lead's margin left in the cache when the batch lands plus the batch's own
//! length old. Plain functions of numbers, tested without a runtime.

use std::time::Duration;

use crate::buffers::measured::Measured;

/// Spreads a fetch may stray beyond its round trip, as in TCP's retransmission timeout
/// (round trip plus four times its mean deviation).
const FETCH_SPREADS: u32 = 4;

/// The most a fetch's expected time adds to its round trip for spreads: half a round trip
/// (as a divisor), so that one slow fetch does not age the cache for long.
const FETCH_SPREAD_CAP: u32 = 2;

/// What a snowflake cache's lead adds to a fetch's expected time: callers woken by tokio's
/// 1 ms timer tick start refills up to a tick or two late, and the fetch's task waits its
/// turn on the runtime.
const LEAD_MARGIN: Duration = Duration::from_millis(3);

/// What a batch covers beyond one round trip of use: a refill started as the lead runs
/// out lands a fetch later, and a batch of exactly one round trip would leave the callers
/// short by the runtime's delays.
const BATCH_MARGIN: Duration = Duration::from_millis(2);

/// Round trips an ID stays young once its batch arrived: the lead and the batch each hold
/// about one.
const YOUNG_ROUND_TRIPS: u32 = 2;

/// What an ID's young span adds to its round trips: the lead's and the batch's margins,
/// and the runtime's delays, with room to spare.
const YOUNG_MARGIN: Duration = Duration::from_millis(10);

/// Intervals between bursts an ID's young span adds when callers take in bursts: the lead
/// and the batch each hold one more, and an ID waits for the next burst.
const YOUNG_BURST_INTERVALS: u32 = 3;

/// How long a fetch is expected to take: one round trip plus [`FETCH_SPREADS`] spreads,
/// at most half a round trip more ([`FETCH_SPREAD_CAP`]).
fn fetch_time(measured: &Measured) -> Duration {
    let spreads = measured.round_trip_spread * FETCH_SPREADS;
    measured.round_trip + spreads.min(measured.round_trip / FETCH_SPREAD_CAP)
}

/// How much time a snowflake cache keeps in hand when it starts a refill: a fetch's
/// expected time ([`fetch_time`]) plus [`LEAD_MARGIN`]. Every millisecond of lead is a
/// millisecond of age. Callers that take in larger bursts (or one ID at a time, rarely)
/// can start a refill only when they take, so the cache must then last until the next
/// burst and through every burst that comes before a refill started then lands: the
/// fetch's time rounded down to whole intervals between bursts, plus one.
pub(crate) fn lead(measured: &Measured) -> Duration {
    let fetch = fetch_time(measured);
    let lead = fetch + LEAD_MARGIN;
    let between = measured.between_bursts();
    if between.is_zero() {
        return lead;
    }
    let whole = (fetch.as_secs_f64() / between.as_secs_f64()).floor();
    lead.max(between.mul_f64(whole + 1.0))
}

/// What callers take, at the average rate, in a round trip plus [`BATCH_MARGIN`]: a
/// batch's size before bursts and growth. Rounded, not up: at a few IDs a second, one more
/// ID a batch than callers take in a round trip would pile up in the cache and be thrown
/// away old.
fn ids_in_a_fetch(measured: &Measured) -> f64 {
    let span = measured.round_trip + BATCH_MARGIN;
    (measured.rate * span.as_secs_f64()).round()
}

/// A planned batch less what the cache holds beyond the rest of the burst under way
/// (`burst_left`), when bursts come farther apart than a fetch takes (by more than the
/// lead's margin, in the last interval measured between their starts, `last_interval`,
/// and in the largest burst at the average rate): a refill started at
/// one burst then lands before the next and need only make up what the cache lacks for
/// it. A batch of whole bursts on top of a surplus (a burst smaller than the largest, a
/// batch that grew while callers waited) would keep that surplus for good, handed out
/// first at every burst, an interval older than the rest. Never below [`ids_in_a_fetch`]
/// (the largest burst can overstate the
/// interval between bursts). When bursts are closer, the planned batch: the lead, counted
/// in time, lets a surplus delay the next refill instead.
pub(crate) fn trimmed_batch(
    measured: &Measured,
    planned: u32,
    cached: usize,
    burst_left: u64,
    last_interval: Duration,
) -> u32 {
    // With the lead's margin: a refill must land before the next burst for sure.
    let fetch = fetch_time(measured) + LEAD_MARGIN;
    if measured.between_bursts().min(last_interval) <= fetch {
        return planned;
    }
    let surplus = (cached as u64).saturating_sub(burst_left);
    let floor = ids_in_a_fetch(measured).max(1.0) as u64;
    let trimmed = u64::from(planned).saturating_sub(surplus).max(floor);
    trimmed.min(u64::from(planned)) as u32
}

/// How long IDs stay young once their batch arrived, for callers that take steadily:
/// [`YOUNG_ROUND_TRIPS`] round trips plus [`YOUNG_MARGIN`]. Callers that waited for a batch
/// are taken to be catching up on their backlog for as long (the cache does not size
/// batches from their catch-up rate meanwhile).
pub(crate) fn young_span(measured: &Measured) -> Duration {
    measured.round_trip * YOUNG_ROUND_TRIPS + YOUNG_MARGIN
}

/// How long since its batch arrived an ID may be handed out: [`young_span`], plus
/// [`YOUNG_BURST_INTERVALS`] intervals between bursts when callers take in bursts, and
/// never above `max_age`. In steady use IDs are handed out well before this (see the
/// module's note on an ID's age); what it throws away is the surplus of a batch that grew
/// past demand (batches double while callers wait, so one may hold up to twice what they
/// needed).
pub(crate) fn young_limit(measured: &Measured, max_age: Duration) -> Duration {
    let limit = young_span(measured) + measured.between_bursts() * YOUNG_BURST_INTERVALS;
    limit.min(max_age)
}

/// How long cached batches last at the measured rate, taken front to back: each until it
/// is used up, or until it grows too old (its rest is then thrown away and the next batch
/// taken). Each batch is given as its number of IDs and how long it stays young.
pub(crate) fn time_left(
    batches: impl IntoIterator<Item = (usize, Duration)>,
    measured: &Measured,
) -> Duration {
    let mut left = Duration::ZERO;
    for (ids, young_for) in batches {
        if young_for <= left {
            continue;
        }
        if measured.rate <= 0.0 {
            return young_for.max(left);
        }
        let lasts = Duration::from_secs_f64(ids as f64 / measured.rate);
        left = (left + lasts).min(young_for);
    }
    left
}

/// Whether a cache should start a refill: when its `cached` IDs would last less than the
/// lead (`time_left`, see [`time_left`]), or would not cover the largest recent
/// burst.
pub(crate) fn refill_due(cached: usize, time_left: Duration, measured: &Measured) -> bool {
    cached == 0 || time_left < lead(measured) || (cached as u64) < measured.burst
}

/// Bursts at least this far apart get refills started on a timer (see
/// [`refill_delay`]); closer, waiting for the next burst costs little age.
pub(crate) const TIMED_REFILLS_FROM: Duration = Duration::from_millis(8);

/// What a refill started on a timer adds to the lead's margin: tokio's timer fires up to a
/// 1 ms tick late, and the fetch's task then waits its turn (at 3 ms round trips, without
/// it, a tenth of the bursts found the cache empty).
const TIMER_SLACK: Duration = Duration::from_millis(4);

/// The shortest wait worth a timer: a tick or two saves little age and leaves the refill no
/// room for a late timer (at a 7 ms round trip with 16 ms between bursts, callers waited).
const SHORTEST_TIMED_WAIT: Duration = Duration::from_millis(2);

/// When callers take in bursts at least [`TIMED_REFILLS_FROM`] apart, how long after now (a
/// burst under way) a due refill should start, so that it lands a fetch's expected time
/// plus the lead's margin before the first burst the cache cannot serve: the cache holds
/// `beyond` IDs beyond what the burst under way still takes, that is so many whole bursts,
/// and the next burst after those finds it short (sooner if the IDs grow too old first:
/// `time_left`, see [`time_left`]). A refill can otherwise start only when
/// callers take, at a burst, and its IDs wait in the cache up to one interval more; at
/// short round trips the next burst's IDs wait a whole interval (16 tasks at 1,000 IDs a
/// second: 16 ms). `None` when the refill should start at once: steadier callers, no time
/// to spare, or callers that take one ID at a time (a caller at a few IDs a second calls
/// when it likes; timed to its average interval, the refill would land after half its
/// calls, which would then wait a round trip instead of finding the ID kept for them).
pub(crate) fn refill_delay(
    beyond: u64,
    time_left: Duration,
    measured: &Measured,
) -> Option<Duration> {
    let between = measured.between_bursts();
    if between < TIMED_REFILLS_FROM || measured.burst < 2 {
        return None;
    }
    let whole_bursts = beyond / measured.burst;
    let dry_in = between
        .mul_f64(whole_bursts as f64 + 1.0)
        .min(time_left + between);
    let needed = fetch_time(measured) + LEAD_MARGIN + TIMER_SLACK;
    dry_in
        .checked_sub(needed)
        .filter(|delay| *delay >= SHORTEST_TIMED_WAIT)
}

/// Whether a batch planned after callers waited for `waits_in_a_row` batches in a row grows
/// fourfold (see [`batch`]): demand far above the batches, as at a cold start.
pub(crate) fn grows_fourfold(waits_in_a_row: u32) -> bool {
    waits_in_a_row >= 2
}

/// The size of the next snowflake batch: what callers use in a fetch ([`ids_in_a_fetch`]),
/// rounded up to whole bursts when they take in bursts (the next refill starts at the
/// burst after this one lands, so a batch need only last until then: any part of a burst
/// more piles up, batch after batch, and grows old), within `1..=max`; when callers waited for the last batch, at least twice it, and four
/// times it when they waited for the one before too (demand far above the batches: reach
/// it in half the round trips; the surplus is thrown away before it grows old).
pub(crate) fn batch(measured: &Measured, last: u32, waits_in_a_row: u32, max: u32) -> u32 {
    let mut by_rate = ids_in_a_fetch(measured);
    if measured.burst > 1 {
        let burst = measured.burst as f64;
        by_rate = (by_rate / burst).ceil() * burst;
    }
    let growth = match waits_in_a_row {
        0 => 0.0,
        _ if grows_fourfold(waits_in_a_row) => 4.0,
        _ => 2.0,
    };
    let wanted = by_rate
        .max(f64::from(last) * growth)
        .max(measured.burst as f64);
    (wanted.min(f64::from(max.max(1))) as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::measured::tests::{ms, steady};

    #[test]
    fn a_cache_refills_when_its_ids_would_last_less_than_a_round_trip_and_four_spreads() {
        // 50k IDs/s, 50 ms, no spread: lead 53 ms = 2,650 IDs.
        let p = steady(50_000.0, ms(50));
        let due = |ids: usize| {
            let left = time_left([(ids, ms(1_000))], &p);
            refill_due(ids, left, &p)
        };
        assert!(due(2_649));
        assert!(!due(2_650));
        let varying = Measured {
            round_trip_spread: ms(5),
            ..p
        };
        assert_eq!(lead(&varying), ms(73));
        let wild = Measured {
            round_trip_spread: ms(40),
            ..p
        };
        assert_eq!(lead(&wild), ms(78), "at most half a round trip more");
        let idle = steady(0.0, ms(50));
        assert!(refill_due(0, ms(1_000), &idle), "empty");
        let left = time_left([(1, ms(1_000))], &idle);
        assert!(!refill_due(1, left, &idle));
    }

    #[test]
    fn cached_ids_last_until_used_up_or_until_the_batch_in_use_grows_too_old() {
        let p = steady(1_000.0, ms(1));
        assert_eq!(time_left([(10, ms(100)), (20, ms(200))], &p), ms(30));
        assert_eq!(
            time_left([(10, ms(100)), (200, ms(150))], &p),
            ms(150),
            "the second batch's rest is too old from 150 ms on"
        );
        assert_eq!(
            time_left([(10, ms(5)), (20, ms(200))], &p),
            ms(25),
            "the first batch's rest is thrown away at 5 ms, then the second lasts 20"
        );
        assert_eq!(
            time_left([(10, ms(50)), (20, ms(5))], &p),
            ms(10),
            "the second batch is too old by the time the first is used up"
        );
        assert_eq!(time_left([], &p), Duration::ZERO);
    }

    #[test]
    fn ids_stay_young_for_two_round_trips_and_10_ms_and_three_burst_intervals() {
        let p = steady(50_000.0, ms(50));
        assert_eq!(young_limit(&p, ms(1_000)), ms(110));
        // 16 IDs at once every 16 ms.
        let bursts = Measured {
            burst: 16,
            ..steady(1_000.0, ms(2))
        };
        assert_eq!(young_limit(&bursts, ms(1_000)), ms(62));
        assert_eq!(young_limit(&p, ms(20)), ms(20), "max_age");
        assert_eq!(
            young_limit(&steady(0.0, ms(1)), ms(1_000)),
            ms(12),
            "nothing measured"
        );
    }

    #[test]
    fn a_batch_for_bursts_far_apart_leaves_out_what_the_cache_holds_beyond_the_burst_under_way() {
        // 16 IDs every 16 ms at a 4 ms round trip: a refill lands before the next burst.
        let p = Measured {
            burst: 16,
            ..steady(1_000.0, ms(4))
        };
        assert_eq!(batch(&p, 16, 0, 100_000), 16);
        // 2 IDs left over after the burst: the next batch makes up the other 14.
        assert_eq!(trimmed_batch(&p, 16, 2, 0, ms(16)), 14);
        // Mid-burst, 10 of those 12 cached are the burst's own: the same 14.
        assert_eq!(trimmed_batch(&p, 16, 12, 10, ms(16)), 14);
        // Never below a round trip plus 2 ms at the average rate (6 IDs).
        assert_eq!(trimmed_batch(&p, 16, 15, 0, ms(16)), 6);
        // Bursts closer than a fetch plus the lead's margin (7 ms), by either measure: as
        // planned.
        assert_eq!(trimmed_batch(&p, 16, 2, 0, ms(5)), 16);
        let close = Measured {
            burst: 4,
            ..steady(1_000.0, ms(4))
        };
        assert_eq!(trimmed_batch(&close, 8, 4, 0, ms(16)), 8);
    }

    #[test]
    fn a_cache_keeps_a_burst_and_a_batch_holds_whole_bursts() {
        // 1,000 IDs/s taken 16 at once, every 16 ms: at 1 ms one and a half round trips
        // hold no whole interval, so the cache need only last until the next burst; a
        // batch is one burst (a round trip plus 2 ms of use, 3 IDs, rounded up to whole
        // bursts: a part of a burst more would pile up and grow old).
        let p = Measured {
            burst: 16,
            ..steady(1_000.0, ms(1))
        };
        assert_eq!(lead(&p), ms(16));
        assert!(refill_due(15, ms(40), &p), "less than a burst");
        assert!(refill_due(16, ms(15), &p), "less than the lead");
        assert!(!refill_due(16, ms(16), &p));
        // At 26 ms: the round trip holds one whole interval, plus one.
        let slower = Measured {
            round_trip: ms(26),
            ..p
        };
        assert_eq!(lead(&slower), ms(32));
        assert_eq!(batch(&slower, 10, 0, 100_000), 32, "28 IDs: two bursts");
        // 50,000 IDs/s taken by callers woken every 2 ms: within the margin.
        let ticks = Measured {
            burst: 100,
            ..steady(50_000.0, ms(3))
        };
        assert_eq!(lead(&ticks), ms(6));
        // Two IDs a second, one at a time: the ID in hand lasts until the next call, when
        // a refill still lands long before the call after.
        let rare = Measured {
            burst: 1,
            ..steady(2.0, ms(5))
        };
        assert_eq!(lead(&rare), ms(500));
        assert!(!refill_due(1, ms(500), &rare));
        assert_eq!(batch(&rare, 1, 0, 100_000), 1);
        assert_eq!(batch(&p, 10, 0, 100_000), 16);
        assert_eq!(batch(&p, 10, 0, 8), 8, "the largest batch");
        let one_at_a_time = steady(1_000.0, ms(1));
        assert_eq!(batch(&one_at_a_time, 10, 0, 100_000), 3);
        let few_but_large = Measured {
            burst: 500,
            ..steady(10.0, ms(1))
        };
        assert_eq!(
            batch(&few_but_large, 10, 0, 100_000),
            500,
            "at least one burst"
        );
    }

    #[test]
    fn a_batch_covers_one_round_trip_and_grows_after_callers_waited() {
        let p = steady(50_000.0, ms(50));
        assert_eq!(batch(&p, 10, 0, 100_000), 2_600);
        assert_eq!(batch(&p, 2_000, 1, 100_000), 4_000);
        assert_eq!(batch(&p, 2_000, 2, 100_000), 8_000, "twice in a row");
        assert_eq!(batch(&p, 10, 0, 1_000), 1_000, "the largest batch");
        assert_eq!(batch(&steady(0.0, ms(1)), 0, 0, 1000), 1);
        assert_eq!(batch(&steady(1000.0, ms(1)), 1, 0, 1000), 3);
    }

    /// 16 tasks at 1,000 IDs/s woken together: 16 IDs every 16 ms.
    fn bursts_every_16_ms(round_trip: Duration) -> Measured {
        Measured {
            burst: 16,
            ..steady(1000.0, round_trip)
        }
    }

    #[test]
    fn a_refill_for_bursts_far_apart_starts_to_land_just_before_the_burst_that_needs_it() {
        let measured = bursts_every_16_ms(ms(3));
        // Needed: the 3 ms fetch, the 3 ms margin and the timer's 4 ms.
        // Nothing beyond the burst under way: the next burst needs the refill, in 16 ms.
        assert_eq!(refill_delay(0, ms(100), &measured), Some(ms(6)));
        // A whole burst beyond it (and part of another): the burst after next.
        assert_eq!(refill_delay(20, ms(100), &measured), Some(ms(22)));
        // Unless those IDs grow too old first.
        assert_eq!(refill_delay(20, ms(5), &measured), Some(ms(11)));
    }

    #[test]
    fn a_refill_starts_at_once_for_steady_callers_or_without_time_to_spare() {
        // Bursts 1 ms apart (50 IDs every 1 ms at 50,000/s): no timer.
        let close_bursts = Measured {
            burst: 50,
            ..steady(50_000.0, ms(3))
        };
        assert_eq!(refill_delay(0, ms(100), &close_bursts), None);
        // 16 ms between bursts, but an 8 ms fetch leaves 1 ms to wait: not worth a timer.
        assert_eq!(refill_delay(0, ms(100), &bursts_every_16_ms(ms(8))), None);
        assert_eq!(refill_delay(0, ms(100), &bursts_every_16_ms(ms(20))), None);
        // One ID at a time, twice a second: the next call may come any time.
        let one_at_a_time = Measured {
            burst: 1,
            ..steady(2.0, ms(3))
        };
        assert_eq!(refill_delay(0, ms(100), &one_at_a_time), None);
    }
}
