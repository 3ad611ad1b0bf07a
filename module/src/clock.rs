//! The wall clock the module reads.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the unix epoch, or 0 if the system clock is before 1970.
pub fn wall_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
