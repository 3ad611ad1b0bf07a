//! How often callers of a buffer waited on the server, and for how long: the figure the
//! buffers exist to keep at zero, counted where it happens (the slow path), so that reading
//! it costs the fast path nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The waits of one [`crate::SegmentBuffer`] or [`crate::SnowflakeCache`] (shared by its
/// clones), from [`crate::SegmentBuffer::wait_stats`] or
/// [`crate::SnowflakeCache::wait_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitStats {
    /// Calls that found nothing at hand and waited for a fetch, since the buffer was made.
    pub waits: u64,
    /// The longest of those waits since the previous read of the stats (each read starts a
    /// new period), including waits that ended with an error.
    pub longest: Duration,
}

/// The counters behind [`WaitStats`].
#[derive(Debug, Default)]
pub(crate) struct WaitCounter {
    waits: AtomicU64,
    longest_ns: AtomicU64,
}

impl WaitCounter {
    /// Counts one wait that lasted `waited`.
    pub fn record(&self, waited: Duration) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.longest_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// The counts so far; the longest wait starts over.
    pub fn read(&self) -> WaitStats {
        WaitStats {
            waits: self.waits.load(Ordering::Relaxed),
            longest: Duration::from_nanos(self.longest_ns.swap(0, Ordering::Relaxed)),
        }
    }
}

/// Records one wait when dropped, if [`WaitTimer::waiting`] was called: on every way out of
/// a wait (a value, an error, or the caller's future dropped).
pub(crate) struct WaitTimer<'a> {
    counter: &'a WaitCounter,
    since: Option<tokio::time::Instant>,
}

impl<'a> WaitTimer<'a> {
    pub fn new(counter: &'a WaitCounter) -> Self {
        WaitTimer {
            counter,
            since: None,
        }
    }

    /// The caller is about to wait for a fetch (the first call starts the clock).
    pub fn waiting(&mut self) {
        self.since.get_or_insert_with(tokio::time::Instant::now);
    }
}

impl Drop for WaitTimer<'_> {
    fn drop(&mut self) {
        if let Some(since) = self.since {
            self.counter.record(since.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_waits_and_keeps_the_longest_until_read() {
        let counter = WaitCounter::default();
        counter.record(Duration::from_millis(3));
        counter.record(Duration::from_millis(1));
        assert_eq!(
            counter.read(),
            WaitStats {
                waits: 2,
                longest: Duration::from_millis(3)
            }
        );
        counter.record(Duration::from_millis(2));
        assert_eq!(counter.read().longest, Duration::from_millis(2));
        assert_eq!(counter.read().waits, 3);
    }
}
