//! The monotonic clock a leased generator stops by: the process's own, or one injected.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// A monotonic clock in milliseconds (injected in tests).
pub trait MonotonicClock: Send + Sync + 'static {
    /// Milliseconds since some fixed point; never decreases.
    fn now_ms(&self) -> u64;
}

/// The process's monotonic clock ([`Instant`]).
#[derive(Debug, Clone, Copy)]
pub struct SystemMonotonic {
    origin: Instant,
}

impl Default for SystemMonotonic {
    fn default() -> Self {
        SystemMonotonic {
            origin: Instant::now(),
        }
    }
}

impl MonotonicClock for SystemMonotonic {
    #[inline]
    fn now_ms(&self) -> u64 {
        // 1 ms in, so that 0 never means "now". Seconds and sub-second milliseconds rather
        // than `as_millis` (a 128-bit division, on every ID).
        let elapsed = self.origin.elapsed();
        elapsed.as_secs() * 1000 + u64::from(elapsed.subsec_millis()) + 1
    }
}

/// The generator's clock: the process's own (no dynamic call on the fast path) or one
/// injected.
#[derive(Debug, Clone)]
pub(crate) enum Clock {
    System(SystemMonotonic),
    Injected(Arc<dyn MonotonicClock>),
}

impl Clock {
    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        match self {
            Clock::System(clock) => clock.now_ms(),
            Clock::Injected(clock) => clock.now_ms(),
        }
    }
}

impl fmt::Debug for dyn MonotonicClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MonotonicClock")
    }
}
