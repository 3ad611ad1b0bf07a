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
//! - a refill starts once the cached IDs would last less than [`snowflake_lead`] (one and a
//!   half round trips plus 3 ms), so that it lands just before the cache runs dry;
//! - a batch holds what callers use in one round trip plus 2 ms, at least twice the last
//!   batch when callers had to wait for it, within `1..=batch`.
//!
//! An ID taken from a batch is then at most about two round trips plus 5 ms old at steady
//! rates: half a round trip on its way back, half a round trip of lead left in the cache
//! when the batch lands, and the batch's own length.

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

/// A snowflake cache measures its rate over at least this span: callers that come in
/// bursts (a task woken every millisecond) would otherwise look many times faster.
pub(crate) const MIN_SNOWFLAKE_RATE_SPAN: Duration = Duration::from_millis(5);

/// Rates and round trips as the buffers measure them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pace {
    /// Values (or IDs) used per second; 0 before anything was measured.
    pub rate: f64,
    /// How long a fetch took, from its start to its reply; 0 before one was measured.
    pub round_trip: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            rate: 0.0,
            round_trip: Duration::ZERO,
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
    /// and older for long; the leads' margins cover single slow fetches.
    pub fn observe_round_trip(&mut self, sample: Duration) {
        self.round_trip = if self.round_trip.is_zero() {
            sample
        } else {
            (self.round_trip + sample) / 2
        };
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

/// How much time a snowflake cache keeps in hand when it starts a refill.
pub(crate) fn snowflake_lead(pace: &Pace) -> Duration {
    pace.round_trip * 3 / 2 + Duration::from_millis(3)
}

/// Whether a cache holding `cached` IDs should start a refill.
pub(crate) fn snowflake_refill_due(cached: usize, pace: &Pace) -> bool {
    cached == 0 || (cached as f64) < pace.values_in(snowflake_lead(pace))
}

/// The size of the next snowflake batch: one round trip plus 2 ms of use, at least twice
/// `last` when callers waited for the last batch, within `1..=max_batch`.
pub(crate) fn snowflake_batch(pace: &Pace, last: u32, callers_waited: bool, max: u32) -> u32 {
    let by_rate = pace.values_in(pace.round_trip + Duration::from_millis(2));
    let grown = if callers_waited {
        f64::from(last) * 2.0
    } else {
        0.0
    };
    (by_rate.max(grown).min(f64::from(max.max(1))) as u32).max(1)
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

    fn pace(rate: f64, round_trip: Duration) -> Pace {
        Pace { rate, round_trip }
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
        p.observe_round_trip(ms(1));
        assert_eq!(p.round_trip, ms(21));
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
    fn a_cache_refills_when_its_ids_would_last_less_than_one_and_a_half_round_trips() {
        // 50k IDs/s, 50 ms: lead 78 ms = 3,900 IDs.
        let p = pace(50_000.0, ms(50));
        assert!(snowflake_refill_due(3_899, &p));
        assert!(!snowflake_refill_due(3_900, &p));
        assert!(snowflake_refill_due(0, &pace(0.0, ms(50))), "empty");
        assert!(!snowflake_refill_due(1, &pace(0.0, ms(50))));
    }

    #[test]
    fn a_batch_covers_one_round_trip_and_doubles_after_callers_waited() {
        let p = pace(50_000.0, ms(50));
        assert_eq!(snowflake_batch(&p, 10, false, 100_000), 2_600);
        assert_eq!(snowflake_batch(&p, 2_000, true, 100_000), 4_000);
        assert_eq!(
            snowflake_batch(&p, 10, false, 1_000),
            1_000,
            "the largest batch"
        );
        assert_eq!(snowflake_batch(&pace(0.0, ms(1)), 0, false, 1000), 1);
        assert_eq!(snowflake_batch(&pace(1000.0, ms(1)), 1, false, 1000), 3);
    }
}
