//! The module configs (`idgen.*`), given at load and read-only afterwards.
//!
//! Each is registered with Redis as an immutable numeric config, so
//! `--loadmodule libidgen.so step 6 offset 2`, `idgen.step 6` lines in redis.conf and
//! `CONFIG GET idgen.*` all work, and `CONFIG SET` refuses to change identity or layout on
//! a running instance.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use idgen_core::{Config, Identity, Layout, DEFAULT_EPOCH_UNIX_MS, DEFAULT_SEGMENT_FENCE};

/// One config: its name (without the `idgen.` prefix), default, and storage.
pub struct Setting {
    /// The name after `idgen.`.
    pub name: &'static str,
    /// The value when none is given.
    pub default: i64,
    /// Where Redis stores it.
    pub value: AtomicI64,
}

impl Setting {
    const fn new(name: &'static str, default: i64) -> Self {
        Setting {
            name,
            default,
            value: AtomicI64::new(default),
        }
    }

    fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// `idgen.step`: the number of residue classes shared by the whole deployment.
pub static STEP: Setting = Setting::new("step", 1);
/// `idgen.offset`: this instance's residue class, in `[0, step)`.
pub static OFFSET: Setting = Setting::new("offset", 0);
/// `idgen.epoch`: unix ms at which snowflake time is zero.
pub static EPOCH: Setting = Setting::new("epoch", DEFAULT_EPOCH_UNIX_MS as i64);
/// `idgen.time-bits`.
pub static TIME_BITS: Setting = Setting::new("time-bits", 41);
/// `idgen.shard-bits`.
pub static SHARD_BITS: Setting = Setting::new("shard-bits", 10);
/// `idgen.sequence-bits`.
pub static SEQUENCE_BITS: Setting = Setting::new("sequence-bits", 12);
/// `idgen.time-unit-ms`: milliseconds in one unit of the snowflake time field (1, or 10, 1000,
/// any divisor of a second).
pub static TIME_UNIT_MS: Setting = Setting::new("time-unit-ms", 1);
/// `idgen.id-bits`: the width the three fields must add up to (63, or 53 for JavaScript).
pub static ID_BITS: Setting = Setting::new("id-bits", 63);
/// `idgen.default-shard`: the shard used when a call gives no SHARD.
pub static DEFAULT_SHARD: Setting = Setting::new("default-shard", 0);
/// `idgen.max-drift-ms`: how far the snowflake clock may run ahead of the wall clock.
pub static MAX_DRIFT_MS: Setting = Setting::new("max-drift-ms", 2000);
/// `idgen.snowflake-restart-fence` (yes/no): whether snowflakes start `max-drift-ms` ahead
/// after a start, so IDs lost in a crash are not issued again.
pub static RESTART_FENCE: AtomicBool = AtomicBool::new(true);
/// The name of [`RESTART_FENCE`] after `idgen.`.
pub const RESTART_FENCE_NAME: &str = "snowflake-restart-fence";
/// `idgen.segment-fence`: values a segment counter skips once after a start; 0 is the dense
/// mode (safe only with `appendfsync always`).
pub static SEGMENT_FENCE: Setting = Setting::new("segment-fence", DEFAULT_SEGMENT_FENCE as i64);

// Leased worker ids (docs/leases.md).
/// `idgen.lease-workers`: shard values reserved at the top of the shard field for leased
/// worker ids (`LEASE.ACQUIRE`); 0, the default, turns leases off and reserves nothing.
pub static LEASE_WORKERS: Setting = Setting::new("lease-workers", 0);
/// `idgen.lease-max-ms`: the longest lease window a grant or renewal may reach past now.
pub static LEASE_MAX_MS: Setting = Setting::new("lease-max-ms", 10_000);

redis_module::enum_configuration! {
    /// What a node does when the cluster bus shows it is the later node of an identity
    /// conflict (a shared offset, another step or layout): `refuse` to issue (the default)
    /// or `warn` and issue anyway.
    #[allow(non_camel_case_types)]
    #[derive(Debug, PartialEq, Eq)]
    pub enum IdentityConflicts {
        /// Refuse SNOWFLAKE.NEXT and SEGMENT.NEXT with a CONFLICT error until it clears.
        refuse = 0,
        /// Report it in INFO and the log, and keep issuing.
        warn = 1,
    }
}

/// `idgen.identity-conflicts` (refuse/warn).
pub static IDENTITY_CONFLICTS: Mutex<IdentityConflicts> = Mutex::new(IdentityConflicts::refuse);
/// The name of [`IDENTITY_CONFLICTS`] after `idgen.`.
pub const IDENTITY_CONFLICTS_NAME: &str = "identity-conflicts";

/// Whether a node refuses to issue when it is the later node of a conflict.
pub fn refuses_on_conflict() -> bool {
    *IDENTITY_CONFLICTS.lock().unwrap_or_else(|p| p.into_inner()) == IdentityConflicts::refuse
}

/// `idgen.debug-clock-offset-ms`: added to the wall clock the module reads. For tests that
/// need a server whose clock is behind or ahead; hidden from `CONFIG GET idgen.*` and, at
/// runtime, changeable only with `enable-protected-configs yes`.
pub static DEBUG_CLOCK_OFFSET_MS: Setting = Setting::new("debug-clock-offset-ms", 0);

/// `idgen.debug-lease-fence-off` (1 = off): no lease fence at a start or promotion. Only for
/// the fault soak's control run, which must then find duplicates; hidden and protected like
/// `debug-clock-offset-ms`, and given as a configuration-file line (not a module argument).
pub static DEBUG_LEASE_FENCE_OFF: Setting = Setting::new("debug-lease-fence-off", 0);

/// Every config that module arguments may set.
pub static ALL: [&Setting; 14] = [
    &STEP,
    &OFFSET,
    &EPOCH,
    &TIME_UNIT_MS,
    &TIME_BITS,
    &SHARD_BITS,
    &SEQUENCE_BITS,
    &ID_BITS,
    &DEFAULT_SHARD,
    &MAX_DRIFT_MS,
    &SEGMENT_FENCE,
    &LEASE_WORKERS,
    &LEASE_MAX_MS,
    &DEBUG_CLOCK_OFFSET_MS,
];

/// The lease settings: (worker ids reserved, longest lease in ms), or why they cannot be
/// used at all (the band's rules with the layout are `idgen_core::LeaseBand`'s).
pub fn lease_settings() -> Result<(u64, u64), String> {
    let value = |setting: &Setting| {
        u64::try_from(setting.get()).map_err(|_| {
            format!(
                "idgen.{} is {}; it cannot be negative",
                setting.name,
                setting.get()
            )
        })
    };
    let max_ms = value(&LEASE_MAX_MS)?;
    if max_ms == 0 {
        return Err("idgen.lease-max-ms is 0; a lease window needs at least 1 ms".into());
    }
    Ok((value(&LEASE_WORKERS)?, max_ms))
}

/// The debug clock offset in force, in ms.
pub fn clock_offset_ms() -> i64 {
    DEBUG_CLOCK_OFFSET_MS.get()
}

/// The configuration as Redis holds it, or why a value cannot be used at all.
///
/// Negative values and widths above 63 are caught here; the rules between values are
/// [`Config::validate`]'s.
pub fn current() -> Result<Config, String> {
    let non_negative = |setting: &Setting| {
        u64::try_from(setting.get()).map_err(|_| {
            format!(
                "idgen.{} is {}; it cannot be negative",
                setting.name,
                setting.get()
            )
        })
    };
    let width = |setting: &Setting| {
        let value = non_negative(setting)?;
        u32::try_from(value)
            .ok()
            .filter(|&bits| bits <= 63)
            .ok_or_else(|| {
                format!(
                    "idgen.{} is {value}; a width is at most 63 bits",
                    setting.name
                )
            })
    };
    Ok(Config {
        identity: Identity {
            step: non_negative(&STEP)?,
            offset: non_negative(&OFFSET)?,
        },
        layout: Layout {
            time_bits: width(&TIME_BITS)?,
            shard_bits: width(&SHARD_BITS)?,
            sequence_bits: width(&SEQUENCE_BITS)?,
            epoch_unix_ms: non_negative(&EPOCH)?,
            time_unit_ms: non_negative(&TIME_UNIT_MS)?,
        },
        id_bits: width(&ID_BITS)?,
        default_shard: non_negative(&DEFAULT_SHARD)?,
        max_drift_ms: non_negative(&MAX_DRIFT_MS)?,
        restart_fence: RESTART_FENCE.load(Ordering::Relaxed),
        segment_fence: non_negative(&SEGMENT_FENCE)?,
    })
}

/// Applies module arguments (`step 6 offset 2`) on top of the values Redis loaded from its
/// config file. Refuses anything but `name value` pairs of known settings with integer
/// values, so a typo such as `stpe 6` stops the load instead of being ignored.
pub fn apply_module_args(args: &[&[u8]]) -> Result<(), String> {
    if !args.len().is_multiple_of(2) {
        return Err(format!(
            "module arguments must be name/value pairs such as `step 6 offset 2`; got {} words",
            args.len()
        ));
    }
    let mut values = Vec::with_capacity(args.len() / 2);
    let mut restart_fence = None;
    let mut identity_conflicts = None;
    for pair in args.chunks(2) {
        let name = String::from_utf8_lossy(pair[0]);
        let name = name.strip_prefix("idgen.").unwrap_or(&name);
        if name == RESTART_FENCE_NAME {
            restart_fence = Some(match pair[1] {
                b"yes" => true,
                b"no" => false,
                other => {
                    return Err(format!(
                        "{name} must be yes or no, got `{}`",
                        String::from_utf8_lossy(other)
                    ))
                }
            });
            continue;
        }
        if name == IDENTITY_CONFLICTS_NAME {
            identity_conflicts = Some(match pair[1] {
                b"refuse" => IdentityConflicts::refuse,
                b"warn" => IdentityConflicts::warn,
                other => {
                    return Err(format!(
                        "{name} must be refuse or warn, got `{}`",
                        String::from_utf8_lossy(other)
                    ))
                }
            });
            continue;
        }
        let Some(setting) = ALL.iter().find(|setting| setting.name == name) else {
            let mut known: Vec<&str> = ALL[..ALL.len() - 1]
                .iter()
                .map(|setting| setting.name)
                .collect();
            known.push(RESTART_FENCE_NAME);
            known.push(IDENTITY_CONFLICTS_NAME);
            return Err(format!(
                "unknown module argument `{name}`; known settings are: {}",
                known.join(", ")
            ));
        };
        let value = idgen_core::parse_redis_integer(pair[1]).ok_or_else(|| {
            format!(
                "{name} must be an integer, got `{}`",
                String::from_utf8_lossy(pair[1])
            )
        })?;
        values.push((setting, value));
    }
    // Only once every argument is known good, so a refused load changes nothing.
    for (setting, value) in values {
        setting.value.store(value, Ordering::Relaxed);
    }
    if let Some(on) = restart_fence {
        RESTART_FENCE.store(on, Ordering::Relaxed);
    }
    if let Some(policy) = identity_conflicts {
        *IDENTITY_CONFLICTS.lock().unwrap_or_else(|p| p.into_inner()) = policy;
    }
    Ok(())
}
