//! Saying so when the snowflake clock runs ahead of the wall clock by more than
//! `max-drift-ms` (the wall clock stepped back, or the instance restarted while ahead): IDs
//! then carry future times and issuing goes on at real-time pace until the wall clock
//! catches up. Logged once when it starts and once when it ends; `INFO idgen` shows it.

use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::logging::RedisLogLevel;
use redis_module::Context;

use crate::state::instance;

static PACING: AtomicBool = AtomicBool::new(false);

/// Whether the clock is running ahead at real-time pace now.
pub fn is_pacing() -> bool {
    PACING.load(Ordering::Relaxed)
}

/// Records what the last issuing call found — how far the clock runs ahead of the wall
/// clock if it is pacing, `None` if not — and logs a change.
#[inline]
pub fn observe(pacing_ahead_ms: Option<u64>) {
    // A load first, inline in the command: a swap is a locked instruction on every call,
    // and the state changes only when the clock starts or stops running ahead.
    if PACING.load(Ordering::Relaxed) != pacing_ahead_ms.is_some() {
        change(pacing_ahead_ms);
    }
}

/// Records a change of state, and logs it (out of line: it happens once per clock step).
#[cold]
#[inline(never)]
fn change(pacing_ahead_ms: Option<u64>) {
    let pacing = pacing_ahead_ms.is_some();
    PACING.store(pacing, Ordering::Relaxed);
    let config = instance::config();
    let message = match pacing_ahead_ms {
        Some(ahead_ms) => format!(
            "the snowflake clock runs {ahead_ms} ms ahead of the wall clock, more than \
             idgen.max-drift-ms ({}): the wall clock stepped back, or this instance restarted \
             while ahead. IDs stay unique and increasing and carry future times; issuing goes \
             on at one time unit's sequence per elapsed unit until the wall clock catches up \
             (bursts beyond that get DRIFT)",
            config.max_drift_ms
        ),
        None => {
            "the snowflake clock is back within idgen.max-drift-ms of the wall clock".to_string()
        }
    };
    let level = if pacing {
        RedisLogLevel::Warning
    } else {
        RedisLogLevel::Notice
    };
    Context::dummy().log(level, &message);
}
