//! How much a snowflake cache's callers take: their rate, and the largest burst they took
//! at once lately. Plain arithmetic on times handed in, so that it is tested without a
//! runtime.
//!
//! Why this rate: callers that wait for a batch take nothing meanwhile, then catch up at
//! once (a task paced by a timer takes everything that fell due while it waited). Measured
//! per fetch over the time IDs were at hand, that catch-up looked like a rate many times
//! the real one and sized batches of seconds' worth of IDs, stale by the time they were
//! handed out. Two estimates, and the lower one is used (the window's with a quarter more
//! room, since it lags a rise):
//! - IDs taken over the last two seconds of wall time (a sliding window): a backlog built
//!   up while callers waited and taken at once is counted over the time it built up in, so
//!   a catch-up does not inflate it; slow to follow a change.
//! - a time-weighted average with a memory of 200 ms (the plain average over the time
//!   since the first ID until then): every ID adds `1 / RATE_MEMORY` and the estimate
//!   decays while nothing is taken, so it follows a fall in demand quickly (a catch-up
//!   lifts it by at most `backlog / RATE_MEMORY`, which the window's estimate then caps).
//!
//! A rise in demand is followed late by the lower estimate; the cache doubles its batches
//! while callers wait, which covers a rise within a few round trips.
//!
//! Why bursts: callers woken together (many tasks on one timer) take many IDs within a
//! millisecond and then none for a while. A cache that keeps only what the average rate
//! uses in one round trip is empty when the next burst comes; it must hold a burst.

use std::time::Duration;

use tokio::time::Instant;

/// How long the time-weighted rate remembers: a sample `dt` long moves it by
/// `1 − e^(−dt/M)` of the way.
pub(crate) const RATE_MEMORY: Duration = Duration::from_millis(200);

/// The time-weighted rate is folded at most once per this span.
pub(crate) const RATE_SAMPLE_SPAN: Duration = Duration::from_millis(1);

/// How far above the window's rate the time-weighted one may go: the window lags a rise
/// in demand by the time callers spent waiting (callers that do not catch up lose those
/// IDs), so it only caps the time-weighted rate, against a catch-up's backlog.
const WINDOW_SLACK: f64 = 1.25;

/// The sliding window's length, and how many parts it moves by.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(2);
const WINDOW_PARTS: usize = 20;

/// IDs taken within this span of the first count as one burst: shorter than tokio's
/// 1 ms timer tick, so that callers woken on consecutive ticks are separate bursts.
pub(crate) const BURST_SPAN: Duration = Duration::from_micros(500);

/// The largest burst is remembered for between one and two of these (or of two intervals
/// between bursts, when longer).
pub(crate) const BURST_MEMORY: Duration = Duration::from_millis(250);

/// IDs taken over the last `RATE_WINDOW`, in `WINDOW_PARTS` parts.
#[derive(Debug, Clone)]
struct SlidingCount {
    parts: [u64; WINDOW_PARTS],
    /// The part being filled, and when it started.
    current: usize,
    current_started: Instant,
    total: u64,
    /// When the first ID was taken: the window is no longer than the time since.
    first: Option<Instant>,
}

impl SlidingCount {
    fn part_length() -> Duration {
        RATE_WINDOW / WINDOW_PARTS as u32
    }

    fn new(now: Instant) -> Self {
        SlidingCount {
            parts: [0; WINDOW_PARTS],
            current: 0,
            current_started: now,
            total: 0,
            first: None,
        }
    }

    /// Moves the window up to `now`, dropping the parts that fall out of it.
    fn advance(&mut self, now: Instant) {
        let part = Self::part_length();
        if now.saturating_duration_since(self.current_started) >= RATE_WINDOW {
            self.parts = [0; WINDOW_PARTS];
            self.total = 0;
            self.current_started = now;
            return;
        }
        while now.saturating_duration_since(self.current_started) >= part {
            self.current = (self.current + 1) % WINDOW_PARTS;
            self.total -= self.parts[self.current];
            self.parts[self.current] = 0;
            self.current_started += part;
        }
    }

    fn add(&mut self, n: u64, now: Instant) {
        self.advance(now);
        self.first.get_or_insert(now);
        self.parts[self.current] += n;
        self.total += n;
    }

    /// IDs per second over the window, or `None` before anything was taken.
    fn rate(&mut self, now: Instant) -> Option<f64> {
        let first = self.first?;
        self.advance(now);
        let window = Self::part_length() * (WINDOW_PARTS as u32 - 1)
            + now.saturating_duration_since(self.current_started);
        let span = window.min(now.saturating_duration_since(first));
        (span >= RATE_SAMPLE_SPAN).then(|| self.total as f64 / span.as_secs_f64())
    }
}

/// The rate and bursts of one cache's callers.
#[derive(Debug, Clone)]
pub(crate) struct DemandMeter {
    /// IDs per second, time-weighted.
    weighted: f64,
    /// IDs taken since `sampled_at`, not yet folded into `weighted`.
    pending: u64,
    sampled_at: Instant,
    window: SlidingCount,
    /// The lower of the two estimates when last computed.
    estimate: f64,
    /// The burst under way: when its first ID was taken, and how many so far.
    burst_started: Instant,
    burst: u64,
    /// The time between the starts of the last two bursts.
    between_bursts: Duration,
    /// The largest burst in this memory period and in the one before.
    largest: [u64; 2],
    period_started: Instant,
}

impl DemandMeter {
    /// A meter that has seen nothing yet, as of `now`.
    pub fn new(now: Instant) -> Self {
        DemandMeter {
            weighted: 0.0,
            pending: 0,
            sampled_at: now,
            window: SlidingCount::new(now),
            estimate: 0.0,
            burst_started: now,
            burst: 0,
            between_bursts: Duration::ZERO,
            largest: [0, 0],
            period_started: now,
        }
    }

    /// Records `n` IDs taken at `now`.
    pub fn took(&mut self, n: u64, now: Instant) {
        self.took_catching_up(n, now);
        let since_burst = now.saturating_duration_since(self.burst_started);
        if since_burst >= BURST_SPAN {
            self.between_bursts = since_burst;
            self.burst_started = now;
            self.burst = 0;
        }
        self.burst += n;
        self.roll_period(now);
        self.largest[0] = self.largest[0].max(self.burst);
    }

    /// Records `n` IDs taken at `now` by callers catching up after a wait: they count for
    /// the rate, not as a burst (the burst was the cache's doing, not the callers' habit).
    pub fn took_catching_up(&mut self, n: u64, now: Instant) {
        self.pending += n;
        self.window.add(n, now);
        self.fold(now);
    }

    /// The rate in IDs per second, as last computed (at most `RATE_SAMPLE_SPAN` behind).
    pub fn rate(&self) -> f64 {
        self.estimate
    }

    /// The largest burst taken at once in the last one to two `BURST_MEMORY` periods.
    pub fn largest_burst(&mut self, now: Instant) -> u64 {
        self.roll_period(now);
        self.largest[0].max(self.largest[1])
    }

    /// How many IDs the burst under way at `now` may still take: the largest burst less
    /// what it took so far, while it is under way (its first ID within `BURST_SPAN`);
    /// none between bursts.
    pub fn burst_left(&mut self, now: Instant) -> u64 {
        if now.saturating_duration_since(self.burst_started) >= BURST_SPAN {
            return 0;
        }
        self.largest_burst(now).saturating_sub(self.burst)
    }

    /// The time between the starts of the last two bursts.
    pub fn last_interval(&self) -> Duration {
        self.between_bursts
    }

    /// Starts a new memory period when the current one is over: `BURST_MEMORY` long, or
    /// two intervals between bursts when those are longer (at a few IDs a second, the
    /// last burst is remembered until the next).
    fn roll_period(&mut self, now: Instant) {
        let age = now.saturating_duration_since(self.period_started);
        let period = BURST_MEMORY.max(self.between_bursts * 2);
        if age >= period {
            // A period with nothing taken forgets the one before it too.
            self.largest = if age >= period * 2 {
                [0, 0]
            } else {
                [0, self.largest[0]]
            };
            self.period_started = now;
        }
    }

    /// Folds the IDs taken since the last sample into the time-weighted rate once the
    /// sample spans at least `RATE_SAMPLE_SPAN`, and takes the lower of the two estimates.
    fn fold(&mut self, now: Instant) {
        let span = now.saturating_duration_since(self.sampled_at);
        if span < RATE_SAMPLE_SPAN {
            return;
        }
        let seconds = span.as_secs_f64();
        // Until the memory is filled, the average over the time since the first ID (an
        // estimate that starts at zero would take a second to find a steady rate).
        let since_first = self
            .window
            .first
            .map_or(span, |first| now.saturating_duration_since(first))
            .max(span);
        let weight = (1.0 - (-seconds / RATE_MEMORY.as_secs_f64()).exp())
            .max(seconds / since_first.as_secs_f64());
        let sample = self.pending as f64 / seconds;
        self.weighted += weight * (sample - self.weighted);
        self.pending = 0;
        self.sampled_at = now;
        self.estimate = match self.window.rate(now) {
            Some(windowed) => self.weighted.min(windowed * WINDOW_SLACK),
            None => self.weighted,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Takes `per_ms` IDs every millisecond for `span`, from `from`; returns the end.
    fn steady(meter: &mut DemandMeter, from: Instant, per_ms: u64, span: Duration) -> Instant {
        let mut now = from;
        for _ in 0..span.as_millis() {
            now += ms(1);
            meter.took(per_ms, now);
        }
        now
    }

    #[test]
    fn a_steady_load_is_measured_within_a_percent_from_the_start() {
        let start = Instant::now();
        let mut meter = DemandMeter::new(start);
        let now = steady(&mut meter, start, 50, ms(20));
        let early = meter.rate();
        assert!((49_500.0..=50_500.0).contains(&early), "{early}");
        steady(&mut meter, now, 50, Duration::from_secs(1));
        let rate = meter.rate();
        assert!((49_500.0..=50_500.0).contains(&rate), "{rate}");
    }

    #[test]
    fn a_backlog_taken_at_once_after_a_wait_leaves_the_rate_about_as_it_was() {
        let start = Instant::now();
        let mut meter = DemandMeter::new(start);
        let now = steady(&mut meter, start, 50, Duration::from_secs(2));
        // Callers wait 52 ms for a batch, then take the 2,600 IDs they fell behind by.
        let now = now + ms(52);
        meter.took_catching_up(2_600, now);
        steady(&mut meter, now, 50, ms(10));
        let rate = meter.rate();
        assert!((49_000.0..=52_000.0).contains(&rate), "{rate}");
    }

    #[test]
    fn a_ramp_that_starts_from_nothing_is_followed_from_its_first_milliseconds() {
        let start = Instant::now();
        let mut meter = DemandMeter::new(start + ms(500));
        steady(&mut meter, start + ms(500), 50, ms(5));
        let rate = meter.rate();
        assert!((45_000.0..=55_000.0).contains(&rate), "{rate}");
    }

    #[test]
    fn the_rate_follows_a_fall_in_demand_within_a_second() {
        let start = Instant::now();
        let mut meter = DemandMeter::new(start);
        let now = steady(&mut meter, start, 50, Duration::from_secs(1));
        steady(&mut meter, now, 1, Duration::from_secs(1));
        // What is left of the old load after a second: 49,000 · e^(−1 s / 200 ms) ≈ 330.
        let rate = meter.rate();
        assert!((1_000.0..1_400.0).contains(&rate), "{rate}");
    }

    #[test]
    fn ids_taken_within_half_a_millisecond_are_one_burst_remembered_for_a_while() {
        let start = Instant::now();
        let mut meter = DemandMeter::new(start);
        // 16 tasks woken by one timer every 16 ms.
        let mut now = start;
        for _ in 0..20 {
            now += ms(16);
            for i in 0..16 {
                meter.took(1, now + Duration::from_micros(i * 20));
            }
        }
        assert_eq!(meter.largest_burst(now), 16);
        assert_eq!(meter.last_interval(), ms(16));
        assert!((900.0..1_100.0).contains(&meter.rate()), "{}", meter.rate());
        // What the burst under way may still take: 4 taken of 16; none between bursts.
        let (mut mid, next) = (meter.clone(), now + ms(16));
        for i in 0..4 {
            mid.took(1, next + Duration::from_micros(i * 20));
        }
        assert_eq!(mid.burst_left(next + Duration::from_micros(100)), 12);
        assert_eq!(mid.burst_left(next + ms(1)), 0);
        // Callers woken on consecutive 1 ms ticks make separate bursts.
        let mut ticks = DemandMeter::new(start);
        steady(&mut ticks, start, 50, ms(100));
        assert_eq!(ticks.largest_burst(start + ms(100)), 50);
        // A single larger burst is remembered for at least one period, at most two.
        meter.took(100, now + ms(2));
        assert_eq!(meter.largest_burst(now + ms(2) + BURST_MEMORY / 2), 100);
        let later = now + ms(2) + BURST_MEMORY * 2;
        assert_eq!(meter.largest_burst(later), 0, "nothing taken meanwhile");
    }
}
