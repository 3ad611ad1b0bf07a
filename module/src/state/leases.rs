//! The instance's side of leased worker ids: the band of worker ids, the lease rules, and
//! the fences under every window this instance granted or learned of, in any pool
//! (`idgen_core::LeaseFences`), kept in memory and raised past any lost write at each start
//! and promotion.

use std::collections::HashMap;
use std::sync::OnceLock;

use idgen_core::{Config, Identity, LeaseBand, LeaseFences, LeaseRules};

use crate::ffi::main_thread::MainThreadCell;
use crate::state::clock;
use crate::state::instance;

/// What the lease settings resolved to at load.
#[derive(Debug, Clone, Copy)]
pub struct LeaseSetup {
    /// The reserved shard values.
    pub band: LeaseBand,
    /// The longest lease, in ms as configured.
    pub max_ms: u64,
    /// The rules in time units.
    pub rules: LeaseRules,
}

static SETUP: OnceLock<LeaseSetup> = OnceLock::new();
static FENCES: MainThreadCell<Option<LeaseFences>> = MainThreadCell::new(None);
/// Per pool (database, key name): the time unit of its last grant or renewal here.
static POOLS_USED: MainThreadCell<Option<PoolUses>> = MainThreadCell::new(None);

/// Time unit of the last grant or renewal per pool (database, key name).
type PoolUses = HashMap<(i32, Vec<u8>), u64>;

/// Notes that pool `name` of database `db` granted or renewed at time unit `now`.
pub fn note_pool_use(db: i32, name: &[u8], now: u64) {
    POOLS_USED.with(|pools| {
        let pools = pools.get_or_insert_with(HashMap::new);
        let max = setup().rules.max_units;
        // Forget pools idle for longer than a lease, so the map follows the live pools.
        if pools.len() > 64 {
            pools.retain(|_, used| used.saturating_add(max) >= now);
        }
        pools.insert((db, name.to_vec()), now);
    });
}

/// Pools that granted or renewed within the longest lease: the pools in use.
pub fn pools_in_use() -> u64 {
    let now = now_units();
    let max = setup().rules.max_units;
    POOLS_USED.with(|pools| {
        pools.as_ref().map_or(0, |pools| {
            pools
                .values()
                .filter(|&&used| used.saturating_add(max) >= now)
                .count() as u64
        })
    })
}

/// Checks the lease settings against `config` and installs them, fencing every worker id
/// (a start may have lost grants and renewals the persistence had not written).
pub fn install(config: Config, (workers, max_ms): (u64, u64)) -> Result<(), String> {
    let band = LeaseBand::new(&config.layout, workers).map_err(|e| e.to_string())?;
    band.check(&config).map_err(|e| e.to_string())?;
    let rules = LeaseRules::new(&config.layout, max_ms, config.max_drift_ms);
    let _ = SETUP.set(LeaseSetup {
        band,
        max_ms,
        rules,
    });
    FENCES.with(|fences| *fences = Some(LeaseFences::new()));
    fence_all();
    Ok(())
}

/// The lease setup (installed at load).
pub fn setup() -> &'static LeaseSetup {
    SETUP
        .get()
        .expect("the lease setup is read before the module installed it")
}

/// Whether `shard` is a leased worker id (reserved from `SNOWFLAKE.NEXT`).
#[inline]
pub fn reserved(shard: u64) -> bool {
    SETUP.get().is_some_and(|setup| setup.band.contains(shard))
}

/// The error for a `SHARD` inside the band.
pub fn reserved_shard_refusal(shard: u64) -> crate::ffi::refusal::Refusal {
    let band = setup().band;
    crate::ffi::refusal::Refusal::new(
        "ERR",
        format!(
            "shard {shard} is a leased worker id: shard values {} to {} are reserved by \
             idgen.lease-workers for LEASE.ACQUIRE holders; use a shard below {}",
            band.first,
            band.first + band.count - 1,
            band.first
        ),
    )
}

/// The worker ids this instance may grant.
pub fn workers_of(identity: Identity) -> impl Iterator<Item = u64> + Clone {
    setup().band.workers_of(identity)
}

/// The current time unit of the layout (the wall clock, with the debug offset).
pub fn now_units() -> u64 {
    let layout = instance::config().layout;
    layout.units_of_ms(clock::wall_unix_ms().saturating_sub(layout.epoch_unix_ms))
}

/// After a start or a promotion: no window this instance knows of is renewed, and no new
/// one starts before any window the lost writes could have granted has ended.
pub fn fence_all() {
    if crate::state::settings::get(idgen_core::SettingId::DebugLeaseFenceOff) != 0 {
        return;
    }
    let rules = setup().rules;
    let now = now_units();
    with_fences(|fences| fences.fence_all(rules, now));
}

/// Runs `f` on the instance's fences.
pub fn with_fences<R>(f: impl FnOnce(&mut LeaseFences) -> R) -> R {
    FENCES.with(|fences| f(fences.get_or_insert_with(LeaseFences::new)))
}
