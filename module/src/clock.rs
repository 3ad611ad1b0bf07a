//! The wall clock the module reads.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::settings;

/// Milliseconds since the unix epoch, plus the debug clock offset (0 unless a test set
/// `idgen.debug-clock-offset-ms`), or 0 if that is before 1970.
pub fn wall_unix_ms() -> u64 {
    let system = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64);
    u64::try_from(system.saturating_add(settings::clock_offset_ms())).unwrap_or(0)
}
