//! How large and how early: the rules that size and time the buffers' fetches from the
//! measured rate of use and the measured round trip. Plain functions of numbers, so that
//! they are tested without a runtime or a server.
//!
//! Segments (values have no age, so fetching early costs nothing but a gap if the process
//! stops):
//! - the next range is fetched once the time left in the current one falls below
//!   [`segment_lead`] (four round trips plus a scheduling allowance), and at the latest at
//!   the `prefetch_after` fraction of it;
//! - a range is sized to last `target_duration` at the measured rate, and never less than
//!   two leads, within `min_size..=max_size`.
//!
//! Snowflake batches (an ID's time is when the server issued it, so every millisecond an ID
//! waits in the cache is staleness):
//! - a refill starts once the cached IDs would last less than [`snowflake_lead`] (one
//!   round trip plus four spreads (at most half a round trip) plus 3 ms, in whole intervals between bursts when callers
//!   take in bursts), so that it lands just before the cache runs dry, or would not cover
//!   the largest burst callers took lately (`demand.rs`);
//! - a batch holds what callers use in one round trip plus 2 ms (plus the time between
//!   bursts), at least one burst, at least twice the last batch when callers had to wait
//!   for it, within `1..=batch`;
//! - an ID more than two round trips plus 10 ms (plus three intervals between bursts) old
//!   is thrown away rather than handed out ([`snowflake_young_limit`]), and the cache
//!   counts such IDs as gone when it times its refills ([`snowflake_time_left`]).
//!
//! An ID taken from a batch is then at most about one and a half round trips plus 5 ms
//! (and four spreads) old at steady rates: half a round trip on its way back, the lead's
//! margin left in the cache when the batch lands, and the batch's own length.

use std::time::Duration;

/// Round trips of lead a segment buffer keeps: the next range is fetched when the current
/// one would last less than this many round trips (plus [`SCHEDULING_ALLOWANCE`]).
pub(crate) const SEGMENT_LEAD_ROUND_TRIPS: u32 = 4;

/// Time a fetch may spend waiting for a busy runtime to run it, beyond its round trip.
pub(crate) const SCHEDULING_ALLOWANCE: Duration = Duration::from_millis(5);

/// A range smaller than this says little about the rate over the part used so far.
pub(crate) const MIN_RATE_SAMPLE: u64 = 64;

/// A shorter span says nothing about a rate.
pub(crate) const MIN_RATE_SPAN: Duration = Duration::from_micros(10);

/// Rates and round trips as the buffers measure them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pace {
    /// Values (or IDs) used per second; 0 before anything was measured.
    pub rate: f64,
    /// How long a fetch took, from its start to its reply; 0 before one was measured.
    pub round_trip: Duration,
    /// How far fetches stray from `round_trip` (a smoothed mean deviation, as TCP's
    /// RTTVAR); 0 before a fetch was measured.
    pub round_trip_spread: Duration,
    /// The most values (IDs) callers lately took at once; 0 when not measured.
    pub burst: u64,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            rate: 0.0,
            round_trip: Duration::ZERO,
            round_trip_spread: Duration::ZERO,
            burst: 0,
        }
    }
}

impl Pace {
    /// Folds in a measured rate: the estimate moves halfway to it, so that one burst (a
    /// task catching up after a wait) does not size the next batches alone.
    pub fn observe_rate(&mut self, sample: f64) {
        if !sample.is_finite() || sample < 0.0 {
            return;
        }
        self.rate = if self.rate == 0.0 {
            sample
        } else {
            (self.rate + sample) / 2.0
        };
    }

    /// The rate of `values` used over `elapsed`, if that span says anything.
    pub fn observe_use(&mut self, values: u64, elapsed: Duration) {
        if elapsed >= MIN_RATE_SPAN {
            self.observe_rate(values as f64 / elapsed.as_secs_f64());
        }
    }

    /// Folds in a measured round trip: the estimate moves halfway to it. A slow fetch (a
    /// busy runtime, a pool connection being opened) must not make every later batch larger
    /// and older for long; the spread (a quarter of the way to each deviation, starting at
    /// half the first round trip, as TCP's RTTVAR) widens the snowflake cache's lead
    /// while fetches vary.
    pub fn observe_round_trip(&mut self, sample: Duration) {
        if self.round_trip.is_zero() {
            self.round_trip = sample;
            self.round_trip_spread = sample / 2;
            return;
        }
        let deviation = self.round_trip.abs_diff(sample);
        self.round_trip_spread = (self.round_trip_spread * 3 + deviation) / 4;
        self.round_trip = (self.round_trip + sample) / 2;
    }

    /// How long callers take, at the measured rate, to use one burst: the time between
    /// bursts when they take in bursts, between IDs when they take one at a time (at most
    /// a second).
    fn between_bursts(&self) -> Duration {
        if self.rate > 0.0 && self.burst > 0 {
            Duration::from_secs_f64((self.burst as f64 / self.rate).min(1.0))
        } else {
            Duration::ZERO
        }
    }

    /// How many values the measured rate uses in `span`, rounded up.
    fn values_in(&self, span: Duration) -> f64 {
        (self.rate * span.as_secs_f64()).ceil()
    }
}

/// The bounds a segment buffer's options state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RangeBounds {
    pub min_size: u64,
    pub max_size: u64,
    pub target_duration: Duration,
    pub prefetch_after: f64,
}

impl RangeBounds {
    fn clamp(&self, size: f64) -> u64 {
        let min = self.min_size.max(1);
        let max = self.max_size.max(min);
        if size.is_nan() {
            return min;
        }
        (size.min(max as f64) as u64).clamp(min, max)
    }
}

/// How much time a segment buffer keeps in hand: four round trips plus the allowance.
pub(crate) fn segment_lead(pace: &Pace) -> Duration {
    pace.round_trip * SEGMENT_LEAD_ROUND_TRIPS + SCHEDULING_ALLOWANCE
}

/// The size of the next range: `target_duration` at the measured rate, at least two leads.
pub(crate) fn range_size(pace: &Pace, bounds: &RangeBounds) -> u64 {
    let last = bounds.target_duration.max(segment_lead(pace) * 2);
    bounds.clamp(pace.values_in(last))
}

/// The index of a range of `count` values whose taker starts the next fetch: where the
/// values left would last less than one lead at the measured rate, and no later than the
/// `prefetch_after` fraction.
pub(crate) fn prefetch_index(count: u64, pace: &Pace, bounds: &RangeBounds) -> u64 {
    if count == 0 {
        return u64::MAX;
    }
    let latest = (count as f64 * bounds.prefetch_after.clamp(0.0, 1.0)) as u64;
    let keep = pace.values_in(segment_lead(pace));
    let by_time = if keep >= count as f64 {
        0
    } else {
        count - keep as u64
    };
    latest.min(by_time).min(count - 1)
}

/// How much time a snowflake cache keeps in hand when it starts a refill: one round trip
/// plus four spreads (as TCP's retransmission timeout), at most half a round trip more,
/// plus 3 ms (callers woken by tokio's 1 ms timer tick start refills up to a tick or two
/// late, and the fetch's task waits its turn on the runtime). Every millisecond of lead is
/// a millisecond of age. Callers that take in larger
/// bursts (or one ID at a time, rarely) can start a refill only when they take, so the
/// cache must then last until the next burst and through every burst that comes before a
/// refill started then lands: the round trip and spreads rounded down to whole intervals
/// between bursts, plus one.
pub(crate) fn snowflake_lead(pace: &Pace) -> Duration {
    let fetch = snowflake_fetch_time(pace);
    let lead = fetch + LEAD_MARGIN;
    let between = pace.between_bursts();
    if between.is_zero() {
        return lead;
    }
    let whole = (fetch.as_secs_f64() / between.as_secs_f64()).floor();
    lead.max(between.mul_f64(whole + 1.0))
}

/// What a snowflake cache's lead adds to a fetch's expected time: callers woken by tokio's
/// 1 ms timer tick start refills up to a tick or two late, and the fetch's task waits its
/// turn on the runtime.
const LEAD_MARGIN: Duration = Duration::from_millis(3);

/// How long a fetch is expected to take: one round trip plus four spreads, at most half a
/// round trip more.
fn snowflake_fetch_time(pace: &Pace) -> Duration {
    pace.round_trip + (pace.round_trip_spread * 4).min(pace.round_trip / 2)
}

/// What callers take, at the average rate, in a round trip plus 2 ms: a batch's size
/// before bursts and growth. Rounded, not up: at a few IDs a second, one more ID a batch
/// than callers take in a round trip would pile up in the cache and be thrown away old.
fn ids_in_a_fetch(pace: &Pace) -> f64 {
    let span = pace.round_trip + Duration::from_millis(2);
    (pace.rate * span.as_secs_f64()).round()
}

/// A planned batch less what the cache holds beyond the rest of the burst under way
/// (`burst_left`), when bursts come farther apart than a fetch takes (by more than the
/// lead's margin, in the last interval measured between their starts, `last_interval`,
/// and in the largest burst at the average rate): a refill started at
/// one burst then lands before the next and need only make up what the cache lacks for
/// it. A batch of whole bursts on top of a surplus (a burst smaller than the largest, a
/// batch that grew while callers waited) would keep that surplus for good, handed out
/// first at every burst, an interval older than the rest. Never below what callers take
/// in a round trip plus 2 ms at the average rate (the largest burst can overstate the
/// interval between bursts). When bursts are closer, the planned batch: the lead, counted
/// in time, lets a surplus delay the next refill instead.
pub(crate) fn snowflake_trimmed_batch(
    pace: &Pace,
    planned: u32,
    cached: usize,
    burst_left: u64,
    last_interval: Duration,
) -> u32 {
    // With the lead's margin: a refill must land before the next burst for sure.
    let fetch = snowflake_fetch_time(pace) + LEAD_MARGIN;
    if pace.between_bursts().min(last_interval) <= fetch {
        return planned;
    }
    let surplus = (cached as u64).saturating_sub(burst_left);
    let floor = ids_in_a_fetch(pace).max(1.0) as u64;
    let trimmed = u64::from(planned).saturating_sub(surplus).max(floor);
    trimmed.min(u64::from(planned)) as u32
}

/// How long since its batch arrived an ID may be handed out: two round trips plus 10 ms,
/// plus three intervals between bursts when callers take in bursts (the lead and the
/// batch each hold one more, and an ID waits for the next burst), and never above
/// `max_age`. In steady use IDs are handed out well before
/// this (about one and a half round trips plus 5 ms after they arrive); what it throws
/// away is the surplus of a batch that grew past demand (batches double while callers
/// wait, so one may hold up to twice what they needed).
pub(crate) fn snowflake_young_limit(pace: &Pace, max_age: Duration) -> Duration {
    let limit = pace.round_trip * 2 + Duration::from_millis(10) + pace.between_bursts() * 3;
    limit.min(max_age)
}

/// How long cached batches last at the measured rate, taken front to back: each until it
/// is used up, or until it grows too old (its rest is then thrown away and the next batch
/// taken). Each batch is given as its number of IDs and how long it stays young.
pub(crate) fn snowflake_time_left(
    batches: impl IntoIterator<Item = (usize, Duration)>,
    pace: &Pace,
) -> Duration {
    let mut left = Duration::ZERO;
    for (ids, young_for) in batches {
        if young_for <= left {
            continue;
        }
        if pace.rate <= 0.0 {
            return young_for.max(left);
        }
        let lasts = Duration::from_secs_f64(ids as f64 / pace.rate);
        left = (left + lasts).min(young_for);
    }
    left
}

/// Whether a cache should start a refill: when its `cached` IDs would last less than the
/// lead (`time_left`, see [`snowflake_time_left`]), or would not cover the largest recent
/// burst.
pub(crate) fn snowflake_refill_due(cached: usize, time_left: Duration, pace: &Pace) -> bool {
    cached == 0 || time_left < snowflake_lead(pace) || (cached as u64) < pace.burst
}

/// Bursts at least this far apart get refills started on a timer (see
/// [`snowflake_refill_delay`]); closer, waiting for the next burst costs little age.
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
/// `time_left`, see [`snowflake_time_left`]). A refill can otherwise start only when
/// callers take, at a burst, and its IDs wait in the cache up to one interval more; at
/// short round trips the next burst's IDs wait a whole interval (16 tasks at 1,000 IDs a
/// second: 16 ms). `None` when the refill should start at once: steadier callers, no time
/// to spare, or callers that take one ID at a time (a caller at a few IDs a second calls
/// when it likes; timed to its average interval, the refill would land after half its
/// calls, which would then wait a round trip instead of finding the ID kept for them).
pub(crate) fn snowflake_refill_delay(
    beyond: u64,
    time_left: Duration,
    pace: &Pace,
) -> Option<Duration> {
    let between = pace.between_bursts();
    if between < TIMED_REFILLS_FROM || pace.burst < 2 {
        return None;
    }
    let whole_bursts = beyond / pace.burst;
    let dry_in = between
        .mul_f64(whole_bursts as f64 + 1.0)
        .min(time_left + between);
    let needed = snowflake_fetch_time(pace) + LEAD_MARGIN + TIMER_SLACK;
    dry_in
        .checked_sub(needed)
        .filter(|delay| *delay >= SHORTEST_TIMED_WAIT)
}

/// Whether a batch planned after callers waited for `waits_in_a_row` batches in a row grows
/// fourfold (see [`snowflake_batch`]): demand far above the batches, as at a cold start.
pub(crate) fn grows_fourfold(waits_in_a_row: u32) -> bool {
    waits_in_a_row >= 2
}

/// The size of the next snowflake batch: what callers use in one round trip plus 2 ms,
/// rounded up to whole bursts when they take in bursts (the next refill starts at the
/// burst after this one lands, so a batch need only last until then: any part of a burst
/// more piles up, batch after batch, and grows old), within `1..=max`; when callers waited for the last batch, at least twice it, and four
/// times it when they waited for the one before too (demand far above the batches: reach
/// it in half the round trips; the surplus is thrown away before it grows old).
pub(crate) fn snowflake_batch(pace: &Pace, last: u32, waits_in_a_row: u32, max: u32) -> u32 {
    let mut by_rate = ids_in_a_fetch(pace);
    if pace.burst > 1 {
        let burst = pace.burst as f64;
        by_rate = (by_rate / burst).ceil() * burst;
    }
    let growth = match waits_in_a_row {
        0 => 0.0,
        _ if grows_fourfold(waits_in_a_row) => 4.0,
        _ => 2.0,
    };
    let wanted = by_rate.max(f64::from(last) * growth).max(pace.burst as f64);
    (wanted.min(f64::from(max.max(1))) as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn bounds() -> RangeBounds {
        RangeBounds {
            min_size: 100,
            max_size: 100_000_000,
            target_duration: Duration::from_secs(10),
            prefetch_after: 0.5,
        }
    }

    /// A pace with a steady round trip (no spread).
    fn pace(rate: f64, round_trip: Duration) -> Pace {
        Pace {
            rate,
            round_trip,
            round_trip_spread: Duration::ZERO,
            burst: 0,
        }
    }

    #[test]
    fn rates_and_round_trips_move_halfway_to_each_measurement() {
        let mut p = Pace::default();
        p.observe_rate(1000.0);
        assert_eq!(p.rate, 1000.0, "the first measurement is taken as it is");
        p.observe_rate(0.0);
        assert_eq!(p.rate, 500.0);
        p.observe_rate(1500.0);
        assert_eq!(p.rate, 1000.0);
        p.observe_round_trip(ms(41));
        assert_eq!(
            p.round_trip,
            ms(41),
            "the first measurement is taken as it is"
        );
        assert_eq!(
            p.round_trip_spread,
            Duration::from_micros(20_500),
            "half at first"
        );
        p.observe_round_trip(ms(1));
        assert_eq!(p.round_trip, ms(21));
        // A quarter of the way from 20.5 ms to the deviation of 40 ms.
        assert_eq!(p.round_trip_spread, Duration::from_micros(25_375));
        p.observe_use(5, Duration::from_micros(1));
        assert_eq!(p.rate, 1000.0, "a span too short to say anything");
        p.observe_use(5, ms(1));
        assert_eq!(p.rate, 3000.0);
    }

    #[test]
    fn a_range_lasts_the_target_duration_within_the_bounds() {
        assert_eq!(range_size(&pace(1000.0, ms(1)), &bounds()), 10_000);
        assert_eq!(range_size(&pace(1.0, ms(1)), &bounds()), 100, "min_size");
        assert_eq!(
            range_size(&pace(1e9, ms(1)), &bounds()),
            100_000_000,
            "max_size"
        );
        assert_eq!(range_size(&pace(0.0, ms(1)), &bounds()), 100);
    }

    #[test]
    fn a_range_lasts_at_least_two_leads_when_the_target_is_shorter() {
        let short = RangeBounds {
            target_duration: ms(10),
            ..bounds()
        };
        // Lead at a 50 ms round trip: 4 · 50 + 5 = 205 ms; two leads 410 ms.
        assert_eq!(range_size(&pace(1e6, ms(50)), &short), 410_000);
    }

    #[test]
    fn the_next_fetch_starts_when_the_time_left_falls_below_the_lead() {
        // 1M values/s, 5 ms round trips: lead 25 ms = 25,000 values.
        let p = pace(1e6, ms(5));
        assert_eq!(prefetch_index(1_000_000, &p, &bounds()), 500_000, "at half");
        assert_eq!(prefetch_index(40_000, &p, &bounds()), 15_000);
        assert_eq!(
            prefetch_index(20_000, &p, &bounds()),
            0,
            "a range shorter than the lead"
        );
        assert_eq!(prefetch_index(1, &p, &bounds()), 0);
        assert_eq!(prefetch_index(0, &p, &bounds()), u64::MAX);
        let late = RangeBounds {
            prefetch_after: 1.0,
            ..bounds()
        };
        assert_eq!(
            prefetch_index(10, &pace(0.0, ms(5)), &late),
            9,
            "the last value"
        );
    }

    #[test]
    fn a_cache_refills_when_its_ids_would_last_less_than_a_round_trip_and_four_spreads() {
        // 50k IDs/s, 50 ms, no spread: lead 53 ms = 2,650 IDs.
        let p = pace(50_000.0, ms(50));
        let due = |ids: usize| {
            let left = snowflake_time_left([(ids, ms(1_000))], &p);
            snowflake_refill_due(ids, left, &p)
        };
        assert!(due(2_649));
        assert!(!due(2_650));
        let varying = Pace {
            round_trip_spread: ms(5),
            ..p
        };
        assert_eq!(snowflake_lead(&varying), ms(73));
        let wild = Pace {
            round_trip_spread: ms(40),
            ..p
        };
        assert_eq!(
            snowflake_lead(&wild),
            ms(78),
            "at most half a round trip more"
        );
        let idle = pace(0.0, ms(50));
        assert!(snowflake_refill_due(0, ms(1_000), &idle), "empty");
        let left = snowflake_time_left([(1, ms(1_000))], &idle);
        assert!(!snowflake_refill_due(1, left, &idle));
    }

    #[test]
    fn cached_ids_last_until_used_up_or_until_the_batch_in_use_grows_too_old() {
        let p = pace(1_000.0, ms(1));
        assert_eq!(
            snowflake_time_left([(10, ms(100)), (20, ms(200))], &p),
            ms(30)
        );
        assert_eq!(
            snowflake_time_left([(10, ms(100)), (200, ms(150))], &p),
            ms(150),
            "the second batch's rest is too old from 150 ms on"
        );
        assert_eq!(
            snowflake_time_left([(10, ms(5)), (20, ms(200))], &p),
            ms(25),
            "the first batch's rest is thrown away at 5 ms, then the second lasts 20"
        );
        assert_eq!(
            snowflake_time_left([(10, ms(50)), (20, ms(5))], &p),
            ms(10),
            "the second batch is too old by the time the first is used up"
        );
        assert_eq!(snowflake_time_left([], &p), Duration::ZERO);
    }

    #[test]
    fn ids_stay_young_for_two_round_trips_and_10_ms_and_three_burst_intervals() {
        let p = pace(50_000.0, ms(50));
        assert_eq!(snowflake_young_limit(&p, ms(1_000)), ms(110));
        // 16 IDs at once every 16 ms.
        let bursts = Pace {
            burst: 16,
            ..pace(1_000.0, ms(2))
        };
        assert_eq!(snowflake_young_limit(&bursts, ms(1_000)), ms(62));
        assert_eq!(snowflake_young_limit(&p, ms(20)), ms(20), "max_age");
        assert_eq!(
            snowflake_young_limit(&pace(0.0, ms(1)), ms(1_000)),
            ms(12),
            "nothing measured"
        );
    }

    #[test]
    fn a_batch_for_bursts_far_apart_leaves_out_what_the_cache_holds_beyond_the_burst_under_way() {
        // 16 IDs every 16 ms at a 4 ms round trip: a refill lands before the next burst.
        let p = Pace {
            burst: 16,
            ..pace(1_000.0, ms(4))
        };
        assert_eq!(snowflake_batch(&p, 16, 0, 100_000), 16);
        // 2 IDs left over after the burst: the next batch makes up the other 14.
        assert_eq!(snowflake_trimmed_batch(&p, 16, 2, 0, ms(16)), 14);
        // Mid-burst, 10 of those 12 cached are the burst's own: the same 14.
        assert_eq!(snowflake_trimmed_batch(&p, 16, 12, 10, ms(16)), 14);
        // Never below a round trip plus 2 ms at the average rate (6 IDs).
        assert_eq!(snowflake_trimmed_batch(&p, 16, 15, 0, ms(16)), 6);
        // Bursts closer than a fetch plus the lead's margin (7 ms), by either measure: as
        // planned.
        assert_eq!(snowflake_trimmed_batch(&p, 16, 2, 0, ms(5)), 16);
        let close = Pace {
            burst: 4,
            ..pace(1_000.0, ms(4))
        };
        assert_eq!(snowflake_trimmed_batch(&close, 8, 4, 0, ms(16)), 8);
    }

    #[test]
    fn a_cache_keeps_a_burst_and_a_batch_holds_whole_bursts() {
        // 1,000 IDs/s taken 16 at once, every 16 ms: at 1 ms one and a half round trips
        // hold no whole interval, so the cache need only last until the next burst; a
        // batch is one burst (a round trip plus 2 ms of use, 3 IDs, rounded up to whole
        // bursts: a part of a burst more would pile up and grow old).
        let p = Pace {
            burst: 16,
            ..pace(1_000.0, ms(1))
        };
        assert_eq!(snowflake_lead(&p), ms(16));
        assert!(snowflake_refill_due(15, ms(40), &p), "less than a burst");
        assert!(snowflake_refill_due(16, ms(15), &p), "less than the lead");
        assert!(!snowflake_refill_due(16, ms(16), &p));
        // At 26 ms: the round trip holds one whole interval, plus one.
        let slower = Pace {
            round_trip: ms(26),
            ..p
        };
        assert_eq!(snowflake_lead(&slower), ms(32));
        assert_eq!(
            snowflake_batch(&slower, 10, 0, 100_000),
            32,
            "28 IDs: two bursts"
        );
        // 50,000 IDs/s taken by callers woken every 2 ms: within the margin.
        let ticks = Pace {
            burst: 100,
            ..pace(50_000.0, ms(3))
        };
        assert_eq!(snowflake_lead(&ticks), ms(6));
        // Two IDs a second, one at a time: the ID in hand lasts until the next call, when
        // a refill still lands long before the call after.
        let rare = Pace {
            burst: 1,
            ..pace(2.0, ms(5))
        };
        assert_eq!(snowflake_lead(&rare), ms(500));
        assert!(!snowflake_refill_due(1, ms(500), &rare));
        assert_eq!(snowflake_batch(&rare, 1, 0, 100_000), 1);
        assert_eq!(snowflake_batch(&p, 10, 0, 100_000), 16);
        assert_eq!(snowflake_batch(&p, 10, 0, 8), 8, "the largest batch");
        let one_at_a_time = pace(1_000.0, ms(1));
        assert_eq!(snowflake_batch(&one_at_a_time, 10, 0, 100_000), 3);
        let few_but_large = Pace {
            burst: 500,
            ..pace(10.0, ms(1))
        };
        assert_eq!(
            snowflake_batch(&few_but_large, 10, 0, 100_000),
            500,
            "at least one burst"
        );
    }

    #[test]
    fn a_batch_covers_one_round_trip_and_grows_after_callers_waited() {
        let p = pace(50_000.0, ms(50));
        assert_eq!(snowflake_batch(&p, 10, 0, 100_000), 2_600);
        assert_eq!(snowflake_batch(&p, 2_000, 1, 100_000), 4_000);
        assert_eq!(
            snowflake_batch(&p, 2_000, 2, 100_000),
            8_000,
            "twice in a row"
        );
        assert_eq!(
            snowflake_batch(&p, 10, 0, 1_000),
            1_000,
            "the largest batch"
        );
        assert_eq!(snowflake_batch(&pace(0.0, ms(1)), 0, 0, 1000), 1);
        assert_eq!(snowflake_batch(&pace(1000.0, ms(1)), 1, 0, 1000), 3);
    }

    /// 16 tasks at 1,000 IDs/s woken together: 16 IDs every 16 ms.
    fn bursts_every_16_ms(round_trip: Duration) -> Pace {
        Pace {
            burst: 16,
            ..pace(1000.0, round_trip)
        }
    }

    #[test]
    fn a_refill_for_bursts_far_apart_starts_to_land_just_before_the_burst_that_needs_it() {
        let pace = bursts_every_16_ms(ms(3));
        // Needed: the 3 ms fetch, the 3 ms margin and the timer's 4 ms.
        // Nothing beyond the burst under way: the next burst needs the refill, in 16 ms.
        assert_eq!(snowflake_refill_delay(0, ms(100), &pace), Some(ms(6)));
        // A whole burst beyond it (and part of another): the burst after next.
        assert_eq!(snowflake_refill_delay(20, ms(100), &pace), Some(ms(22)));
        // Unless those IDs grow too old first.
        assert_eq!(snowflake_refill_delay(20, ms(5), &pace), Some(ms(11)));
    }

    #[test]
    fn a_refill_starts_at_once_for_steady_callers_or_without_time_to_spare() {
        // Bursts 1 ms apart (50 IDs every 1 ms at 50,000/s): no timer.
        let steady = Pace {
            burst: 50,
            ..pace(50_000.0, ms(3))
        };
        assert_eq!(snowflake_refill_delay(0, ms(100), &steady), None);
        // 16 ms between bursts, but an 8 ms fetch leaves 1 ms to wait: not worth a timer.
        assert_eq!(
            snowflake_refill_delay(0, ms(100), &bursts_every_16_ms(ms(8))),
            None
        );
        assert_eq!(
            snowflake_refill_delay(0, ms(100), &bursts_every_16_ms(ms(20))),
            None
        );
        // One ID at a time, twice a second: the next call may come any time.
        let one_at_a_time = Pace {
            burst: 1,
            ..pace(2.0, ms(3))
        };
        assert_eq!(snowflake_refill_delay(0, ms(100), &one_at_a_time), None);
    }
}
