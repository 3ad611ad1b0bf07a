//! What the buffers measure and plan their fetches from: the rate of use, the round trip
//! and how far it strays, and the largest burst callers take ([`Measured`]). How the
//! segment buffer and the snowflake cache turn these into when and how much to fetch is in
//! `segment_plan.rs` and `snowflake_plan.rs`.

use std::time::Duration;

/// A shorter span says nothing about a rate.
pub(crate) const MIN_RATE_SPAN: Duration = Duration::from_micros(10);

/// Rates and round trips as the buffers measure them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Measured {
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

impl Measured {
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
    pub(crate) fn between_bursts(&self) -> Duration {
        if self.rate > 0.0 && self.burst > 0 {
            Duration::from_secs_f64((self.burst as f64 / self.rate).min(1.0))
        } else {
            Duration::ZERO
        }
    }

    /// How many values the measured rate uses in `span`, rounded up.
    pub(crate) fn values_in(&self, span: Duration) -> f64 {
        (self.rate * span.as_secs_f64()).ceil()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Measurements with a steady round trip (no spread).
    pub(crate) fn steady(rate: f64, round_trip: Duration) -> Measured {
        Measured {
            rate,
            round_trip,
            round_trip_spread: Duration::ZERO,
            burst: 0,
        }
    }

    #[test]
    fn rates_and_round_trips_move_halfway_to_each_measurement() {
        let mut p = Measured::default();
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
}
