//! When a segment buffer fetches its next range and how large it is, from what it measured.
//! Values have no age, so fetching early costs nothing but a gap if the process stops:
//! the next range is fetched once the time left in the current one falls below
//! [`lead`], and at the latest at the `prefetch_after` fraction of it; a range is
//! sized to last `target_duration` at the measured rate, and never less than two leads,
//! within `min_size..=max_size`. Plain functions of numbers, tested without a runtime.

use std::time::Duration;

use crate::buffers::measured::Measured;

/// A range smaller than this says little about the rate over the part used so far.
pub(crate) const MIN_RATE_SAMPLE: u64 = 64;

/// Round trips of lead a segment buffer keeps: the next range is fetched when the current
/// one would last less than this many round trips (plus [`SCHEDULING_ALLOWANCE`]).
const LEAD_ROUND_TRIPS: u32 = 4;

/// Time a fetch may spend waiting for a busy runtime to run it, beyond its round trip.
const SCHEDULING_ALLOWANCE: Duration = Duration::from_millis(5);

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

/// How much time a segment buffer keeps in hand: [`LEAD_ROUND_TRIPS`] round trips plus
/// [`SCHEDULING_ALLOWANCE`].
pub(crate) fn lead(measured: &Measured) -> Duration {
    measured.round_trip * LEAD_ROUND_TRIPS + SCHEDULING_ALLOWANCE
}

/// The size of the next range: `target_duration` at the measured rate, at least two leads.
pub(crate) fn range_size(measured: &Measured, bounds: &RangeBounds) -> u64 {
    let last = bounds.target_duration.max(lead(measured) * 2);
    bounds.clamp(measured.values_in(last))
}

/// The index of a range of `count` values whose taker starts the next fetch: where the
/// values left would last less than one lead at the measured rate, and no later than the
/// `prefetch_after` fraction.
pub(crate) fn prefetch_index(count: u64, measured: &Measured, bounds: &RangeBounds) -> u64 {
    if count == 0 {
        return u64::MAX;
    }
    let latest = (count as f64 * bounds.prefetch_after.clamp(0.0, 1.0)) as u64;
    let keep = measured.values_in(lead(measured));
    let by_time = if keep >= count as f64 {
        0
    } else {
        count - keep as u64
    };
    latest.min(by_time).min(count - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::measured::tests::{ms, steady};

    fn bounds() -> RangeBounds {
        RangeBounds {
            min_size: 100,
            max_size: 100_000_000,
            target_duration: Duration::from_secs(10),
            prefetch_after: 0.5,
        }
    }

    #[test]
    fn a_range_lasts_the_target_duration_within_the_bounds() {
        assert_eq!(range_size(&steady(1000.0, ms(1)), &bounds()), 10_000);
        assert_eq!(range_size(&steady(1.0, ms(1)), &bounds()), 100, "min_size");
        assert_eq!(
            range_size(&steady(1e9, ms(1)), &bounds()),
            100_000_000,
            "max_size"
        );
        assert_eq!(range_size(&steady(0.0, ms(1)), &bounds()), 100);
    }

    #[test]
    fn a_range_lasts_at_least_two_leads_when_the_target_is_shorter() {
        let short = RangeBounds {
            target_duration: ms(10),
            ..bounds()
        };
        // Lead at a 50 ms round trip: 4 · 50 + 5 = 205 ms; two leads 410 ms.
        assert_eq!(range_size(&steady(1e6, ms(50)), &short), 410_000);
    }

    #[test]
    fn the_next_fetch_starts_when_the_time_left_falls_below_the_lead() {
        // 1M values/s, 5 ms round trips: lead 25 ms = 25,000 values.
        let p = steady(1e6, ms(5));
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
            prefetch_index(10, &steady(0.0, ms(5)), &late),
            9,
            "the last value"
        );
    }
}
