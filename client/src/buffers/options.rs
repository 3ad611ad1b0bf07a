//! The local buffers' options: how a segment buffer sizes its ranges ([`SegmentOptions`])
//! and how a snowflake cache batches and ages its IDs ([`SnowflakeCacheOptions`]).

use std::time::Duration;

/// How a [`crate::SegmentBuffer`] sizes and refills its ranges (Meituan Leaf's
/// double-buffered segments).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SegmentOptions {
    /// Values in the first range. Defaults to 1000.
    pub initial_size: u64,
    /// The smallest range. Defaults to 100.
    pub min_size: u64,
    /// The largest range (the server takes up to 1,000,000,000). Defaults to 100,000,000:
    /// 3 s at 30 M values/s. Values of a range not used when the process stops are
    /// skipped, so a smaller bound keeps gaps smaller, at the cost of waits at high rates.
    pub max_size: u64,
    /// The latest point, as a fraction of the current range used, at which the next range
    /// is fetched in the background; it is fetched earlier when the values left would last
    /// less than a few measured round trips. Defaults to 0.1, as in Leaf.
    pub prefetch_after: f64,
    /// How long a range should last at the measured rate (and never less than twice the
    /// time the buffer keeps in hand), within `min_size..=max_size`. Defaults to 10 s.
    pub target_duration: Duration,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            initial_size: 1000,
            min_size: 100,
            max_size: 100_000_000,
            prefetch_after: 0.1,
            target_duration: Duration::from_secs(10),
        }
    }
}

/// How a [`crate::SnowflakeCache`] prefetches (Baidu UidGenerator's ring-buffer idea, with
/// a bound on how old a handed-out ID may be).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SnowflakeCacheOptions {
    /// The largest batch (the server takes up to 100,000): a batch holds what callers use
    /// in about one measured round trip, so this bounds the cache's memory (8 bytes an
    /// ID, at most about two batches) and the rate it sustains (`batch` per round trip).
    /// Defaults to 100,000.
    pub batch: u32,
    /// IDs older than this (since they were fetched) are thrown away, never handed out,
    /// so cached IDs stay close to real time. The cache throws away IDs sooner when the
    /// round trip allows, see [`crate::SnowflakeCache`]. Defaults to 1 s.
    pub max_age: Duration,
    /// No longer used: refills follow the measured rate and round trip (see
    /// [`crate::SnowflakeCache`]). Kept so that code setting it still compiles.
    pub refill_below: f64,
}

impl Default for SnowflakeCacheOptions {
    fn default() -> Self {
        SnowflakeCacheOptions {
            batch: 100_000,
            max_age: Duration::from_secs(1),
            refill_below: 0.5,
        }
    }
}

setters!(SegmentOptions {
    /// Sets `initial_size`: values in the first range.
    initial_size: u64,
    /// Sets `min_size`: the smallest range.
    min_size: u64,
    /// Sets `max_size`: the largest range.
    max_size: u64,
    /// Sets `prefetch_after`: the fraction used at which the next range is fetched at the
    /// latest.
    prefetch_after: f64,
    /// Sets `target_duration`: how long a range should last at the measured rate.
    target_duration: Duration,
});

setters!(SnowflakeCacheOptions {
    /// Sets `batch`: the most IDs per fetch.
    batch: u32,
    /// Sets `max_age`: the oldest an ID may be when handed out.
    max_age: Duration,
    /// Sets `refill_below`, which is no longer used (refills follow the measured rate and
    /// round trip).
    refill_below: f64,
});
