//! The clocks the module reads: the wall clock (the time IDs carry) and a monotonic clock
//! (how much time really passed, which the wall clock cannot tell when it steps).
//!
//! Both are read through `ffi::clock_source` (`clock_gettime`, in whole milliseconds).

use crate::ffi::clock_source::{self, SystemClock};
use crate::state::settings;
use idgen_core::{Clocks, Now};

/// Milliseconds since the unix epoch, plus the debug clock offset (0 unless a test set
/// `idgen.debug-clock-offset-ms`), or 0 if that is before 1970.
pub fn wall_unix_ms() -> u64 {
    with_debug_offset(clock_source::read_ms(SystemClock::Realtime))
}

/// `unix_ms` moved by the debug clock offset (saturating at 0 and at the top).
#[inline(always)]
fn with_debug_offset(unix_ms: u64) -> u64 {
    match settings::get(idgen_core::SettingId::DebugClockOffsetMs) {
        // Outside tests: one load and one branch, where the saturating add takes ten.
        0 => unix_ms,
        offset => unix_ms.saturating_add_signed(offset),
    }
}

/// The wall clock as the server read it just before running the current command
/// (`RedisModule_CachedMicroseconds`, Redis 7.2+ and Valkey), plus the debug clock offset;
/// `None` where the server lacks it (Redis 7.0). It costs a load where a clock read costs
/// 25–35 ns, and it is the time the server itself uses for the command (key expiry).
///
/// Inside `MULTI` or a script the server keeps one time for the whole transaction or
/// script, so callers there read the clock instead.
pub fn server_wall_unix_ms() -> Option<u64> {
    let micros = clock_source::server_cached_micros()?;
    let ms = u64::try_from(micros).unwrap_or(0) / 1000;
    Some(with_debug_offset(ms))
}

/// Milliseconds of a monotonic clock (from an arbitrary origin: the machine's boot). The
/// debug clock offset does not move it: a test that shifts the wall clock shifts only the
/// wall clock, as a real clock step would.
pub fn monotonic_ms() -> u64 {
    clock_source::read_ms(SystemClock::Monotonic)
}

/// The clocks of one command call: the wall clock read once, when the call starts; the
/// monotonic clock read only if the sequence asks (see `idgen_core::Clocks`: at most once
/// per wall millisecond in steady use, which saves a clock read on nearly every call).
pub struct CallClocks {
    wall_unix_ms: u64,
}

impl CallClocks {
    /// Reads the wall clock itself, never the server's reading for the command: that
    /// reading stands still inside `MULTI` and scripts, and telling those apart takes the
    /// context flags, which cost more than a clock read (docs/performance.md).
    /// The clock read here is never behind the server's reading for a later command, which
    /// the server takes when that command starts.
    pub fn read() -> Self {
        CallClocks {
            wall_unix_ms: wall_unix_ms(),
        }
    }
}

/// The server's wall-clock reading for the running command where it keeps one
/// ([`server_wall_unix_ms`]), or the clock. Inside a transaction or script that reading
/// stands still for all their commands; use it only where a time that stands still is
/// harmless.
pub fn command_wall_unix_ms() -> u64 {
    server_wall_unix_ms().unwrap_or_else(wall_unix_ms)
}

impl Clocks for CallClocks {
    fn wall_unix_ms(&self) -> u64 {
        self.wall_unix_ms
    }

    fn monotonic_ms(&self) -> u64 {
        monotonic_ms()
    }
}

/// Both clocks, read now.
pub fn now() -> Now {
    Now {
        wall_unix_ms: wall_unix_ms(),
        monotonic_ms: monotonic_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn the_wall_clock_reads_unix_milliseconds() {
        let expected = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let read = wall_unix_ms();
        assert!(read.abs_diff(expected) < 1000, "{read} vs {expected}");
    }

    #[test]
    fn the_monotonic_clock_does_not_go_back() {
        let first = monotonic_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = monotonic_ms();
        assert!(second >= first + 4, "{first} then {second}");
    }
}
