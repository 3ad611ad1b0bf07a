//! The values of the module configs (`idgen.*`), declared in `idgen_core::SETTINGS`.
//!
//! Each is registered with Redis (`ffi::config`), so `--loadmodule libidgen.so step 6
//! offset 2`, `idgen.step 6` lines in redis.conf and `CONFIG GET idgen.*` all work, and
//! `CONFIG SET` refuses to change identity or layout on a running instance.

use std::sync::atomic::{AtomicI64, Ordering};

use idgen_core::{listed_names, Config, SettingId, SETTINGS};
use redis_module::Context;

use crate::ffi::config;

/// Where Redis stores each setting, in `SETTINGS`' order.
static VALUES: [AtomicI64; SETTINGS.len()] = [const { AtomicI64::new(0) }; SETTINGS.len()];

/// The setting's value in force.
pub fn get(id: SettingId) -> i64 {
    get_at(id as usize)
}

/// The value in force of `SETTINGS[index]`.
pub fn get_at(index: usize) -> i64 {
    VALUES[index].load(Ordering::Relaxed)
}

/// Registers every setting with Redis, which then applies the config file's values.
pub fn register(ctx: &Context) -> Result<(), String> {
    config::register(ctx, SETTINGS, &VALUES)
}

/// Whether a node refuses to issue when it is the later node of a conflict.
pub fn refuses_on_conflict() -> bool {
    get(SettingId::IdentityConflicts) == 0
}

/// The lease settings: (worker ids reserved, longest lease in ms), or why they cannot be
/// used at all (the band's rules with the layout are `idgen_core::LeaseBand`'s).
pub fn lease_settings() -> Result<(u64, u64), String> {
    let value = |id| idgen_core::non_negative(id, get(id));
    let max_ms = value(SettingId::LeaseMaxMs)?;
    if max_ms == 0 {
        return Err("idgen.lease-max-ms is 0; a lease window needs at least 1 ms".into());
    }
    Ok((value(SettingId::LeaseWorkers)?, max_ms))
}

/// The configuration as Redis holds it, or why a value cannot be used at all.
pub fn current() -> Result<Config, String> {
    Config::from_settings(get)
}

/// Applies module arguments (`step 6 offset 2`) on top of the values Redis loaded from its
/// config file. Refuses anything but `name value` pairs of known settings with values of
/// their kind, so a typo such as `stpe 6` stops the load instead of being ignored.
pub fn apply_module_args(args: &[&[u8]]) -> Result<(), String> {
    if !args.len().is_multiple_of(2) {
        return Err(format!(
            "module arguments must be name/value pairs such as `step 6 offset 2`; got {} words",
            args.len()
        ));
    }
    let mut values = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        let name = String::from_utf8_lossy(pair[0]);
        let name = name.strip_prefix("idgen.").unwrap_or(&name);
        let Some(index) = SETTINGS.iter().position(|setting| setting.name == name) else {
            return Err(format!(
                "unknown module argument `{name}`; known settings are: {}",
                listed_names().join(", ")
            ));
        };
        values.push((index, SETTINGS[index].parse(pair[1])?));
    }
    // Only once every argument is known good, so a refused load changes nothing.
    for (index, value) in values {
        VALUES[index].store(value, Ordering::Relaxed);
    }
    Ok(())
}
