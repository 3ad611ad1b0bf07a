//! The instance-wide state: the validated configuration and the one snowflake sequence
//! shared by every key.
//!
//! Redis runs commands on its main thread, so the sequence sits in a [`MainThreadCell`]
//! rather than behind a lock.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use idgen_core::{Config, Now, SnowflakeSequence};

use crate::ffi::main_thread::MainThreadCell;

static CONFIG: OnceLock<Config> = OnceLock::new();
static SEQUENCE: MainThreadCell<Option<SnowflakeSequence>> = MainThreadCell::new(None);
static INCARNATION: AtomicU64 = AtomicU64::new(0);

/// This instance's current incarnation: the token that owns the snowflake keys it issues
/// for (see `idgen_core::KeyRecord`). 0 until the module has loaded.
pub fn incarnation() -> u64 {
    INCARNATION.load(Ordering::Relaxed)
}

/// Starts a new incarnation (at load and at each promotion): keys recorded under any
/// earlier one, by this process or another, are continued above their bound.
pub fn new_incarnation() {
    // A random nonzero token (RandomState is seeded from the OS's random source).
    let token = RandomState::new().hash_one(INCARNATION.load(Ordering::Relaxed)) | 1;
    INCARNATION.store(token, Ordering::Relaxed);
}

/// Installs the validated configuration at load, with the snowflake restart fence
/// (see `SnowflakeSequence::apply_restart_fence`); the floor restored from RDB aux data and
/// replayed AOF is raised on top of it while the data loads.
pub fn install(config: Config, now: Now) {
    let _ = CONFIG.set(config);
    new_incarnation();
    let mut sequence = SnowflakeSequence::new(config);
    sequence.apply_restart_fence(now);
    // Installed once per process (the module cannot be unloaded); a second install would
    // start afresh, as the first did.
    SEQUENCE.with(|installed| *installed = Some(sequence));
}

/// The configuration the module was loaded with.
///
/// There is no default identity: asking before `install` is a bug, and panics (every entry
/// point from Redis catches it and answers or logs an internal error) rather than issue
/// IDs as step 1, offset 0.
pub fn config() -> &'static Config {
    CONFIG
        .get()
        .expect("the idgen configuration is read before the module installed it")
}

/// Runs `f` on the instance's snowflake sequence (installed at load; see `config` for
/// what happens before).
pub fn with_sequence<R>(f: impl FnOnce(&mut SnowflakeSequence) -> R) -> R {
    SEQUENCE.with(|sequence| {
        f(sequence
            .as_mut()
            .expect("the snowflake sequence is used before the module installed it"))
    })
}
