//! The system's clocks and the server's cached command time, read without allocating.
//!
//! Read with `clock_gettime` directly and converted with 64-bit arithmetic: they are read
//! on every `SNOWFLAKE.NEXT`, and `SystemTime`/`Instant` conversions (128-bit durations,
//! an origin to subtract) cost about as much again as the reads.

use redis_module::raw;

/// A clock of the system.
#[derive(Debug, Clone, Copy)]
pub enum SystemClock {
    /// The wall clock (`CLOCK_REALTIME`): milliseconds since the unix epoch; it may step.
    Realtime,
    /// A monotonic clock (`CLOCK_MONOTONIC`): from an arbitrary origin, never stepping.
    Monotonic,
}

/// `clock`'s reading in whole milliseconds, or 0 if it cannot be read (it always can on
/// Linux for these two clocks) or is before its origin.
#[inline]
pub fn read_ms(clock: SystemClock) -> u64 {
    let id = match clock {
        SystemClock::Realtime => libc::CLOCK_REALTIME,
        SystemClock::Monotonic => libc::CLOCK_MONOTONIC,
    };
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable timespec for the call's duration.
    if unsafe { libc::clock_gettime(id, &mut time) } != 0 {
        return 0;
    }
    let seconds = u64::try_from(time.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(time.tv_nsec).unwrap_or(0);
    seconds * 1000 + nanos / 1_000_000
}

/// `RedisModule_CachedMicroseconds` (Redis 7.2+ and Valkey): the wall clock as the server
/// read it before running the current command, in microseconds; `None` where the server
/// lacks the function (Redis 7.0).
#[inline]
pub fn server_cached_micros() -> Option<i64> {
    // SAFETY: the pointer is set once, when the module loads (null where the server lacks
    // the function), and only read afterwards.
    let cached = unsafe { raw::RedisModule_CachedMicroseconds }?;
    // SAFETY: as above: a function of the server's module API taking no arguments and
    // needing no context.
    Some(unsafe { cached() })
}
