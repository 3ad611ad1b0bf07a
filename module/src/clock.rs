//! The clocks the module reads: the wall clock (the time IDs carry) and a monotonic clock
//! (how much time really passed, which the wall clock cannot tell when it steps).

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use idgen_core::Now;

use crate::settings;

/// Milliseconds since the unix epoch, plus the debug clock offset (0 unless a test set
/// `idgen.debug-clock-offset-ms`), or 0 if that is before 1970.
pub fn wall_unix_ms() -> u64 {
    let system = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64);
    u64::try_from(system.saturating_add(settings::clock_offset_ms())).unwrap_or(0)
}

/// Milliseconds of a monotonic clock since the module first read it. The debug clock
/// offset does not move it: a test that shifts the wall clock shifts only the wall clock,
/// as a real clock step would.
pub fn monotonic_ms() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Both clocks, read now.
pub fn now() -> Now {
    Now {
        wall_unix_ms: wall_unix_ms(),
        monotonic_ms: monotonic_ms(),
    }
}
