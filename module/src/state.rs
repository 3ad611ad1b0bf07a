//! The instance-wide state: the validated configuration and the one snowflake sequence
//! shared by every key.
//!
//! Redis runs commands on its main thread, so the mutex is never contended; it is there so
//! that the state is a plain safe static.

use std::sync::{Mutex, MutexGuard, OnceLock};

use idgen_core::{Config, Now, SnowflakeSequence};

static CONFIG: OnceLock<Config> = OnceLock::new();
static SEQUENCE: Mutex<Option<SnowflakeSequence>> = Mutex::new(None);

/// Installs the validated configuration at load, with the snowflake restart fence
/// (see `SnowflakeSequence::apply_restart_fence`); the floor restored from RDB aux data and
/// replayed AOF is raised on top of it while the data loads.
pub fn install(config: Config, now: Now) {
    let _ = CONFIG.set(config);
    let mut sequence = SnowflakeSequence::new(config);
    sequence.apply_restart_fence(now);
    *lock_sequence() = Some(sequence);
}

/// The configuration the module was loaded with.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

/// Runs `f` on the instance's snowflake sequence.
pub fn with_sequence<R>(f: impl FnOnce(&mut SnowflakeSequence) -> R) -> R {
    let mut guard = lock_sequence();
    let sequence = guard.get_or_insert_with(|| SnowflakeSequence::new(*config()));
    f(sequence)
}

fn lock_sequence() -> MutexGuard<'static, Option<SnowflakeSequence>> {
    // A panic while holding the lock is caught before it reaches Redis; the sequence is
    // only ever replaced whole, so the value behind a poisoned lock is still consistent.
    SEQUENCE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
