//! The `idgen` Redis module: `SNOWFLAKE.NEXT`, `SEGMENT.NEXT`, `SNOWFLAKE.DECODE` (plus
//! `SNOWFLAKE.BOUND`, `SNOWFLAKE.SETBOUND` and `IDGEN.IDENTITY`), generated inside Redis
//! from per-instance step-offset sequences.
//!
//! The arithmetic lives in `idgen-core`; this crate binds it to Redis: configs, commands,
//! the `snowflake` key type, replication of effects and `INFO idgen`.

mod commands;
mod datatype;
mod events;
mod ffi;
mod state;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, ContextFlags, RedisString, Status};

use datatype::lease_pool::LEASE_POOL_TYPE;
use datatype::snowflake_key::SNOWFLAKE_TYPE;
use ffi::guard;
use state::{
    clock, instance, leases, peer_identities, replica_role, reservations, settings, version,
};

/// Runs after Redis has applied config-file values: applies the module arguments, checks
/// the result, then registers the commands.
fn on_load(ctx: &Context, args: &[RedisString]) -> Status {
    // Called from the macro's `RedisModule_OnLoad`: a panic must not unwind into Redis.
    guard::or_log("loading", Status::Err, || match load(ctx, args) {
        Ok(()) => Status::Ok,
        Err(reason) => {
            ctx.log_warning(&format!("refusing to load: {reason}"));
            Status::Err
        }
    })
}

fn load(ctx: &Context, args: &[RedisString]) -> Result<(), String> {
    let words: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    settings::apply_module_args(&words)?;
    let config = settings::current()?;
    config
        .validate(clock::wall_unix_ms())
        .map_err(|e| e.to_string())?;
    instance::install(config, clock::now());
    leases::install(config, settings::lease_settings()?)?;
    peer_identities::set_started(clock::wall_unix_ms());
    replica_role::set_replica(ctx.get_flags().contains(ContextFlags::SLAVE));
    // A start arms the segment fence: every key skips it on its first use as master.
    reservations::arm();
    commands::table::register_all(ctx)?;
    events::server_events::subscribe(ctx)?;
    events::key_events::subscribe(ctx)?;
    events::slot_migration::declare(ctx);
    events::config_warnings::start(ctx);
    events::identity_exchange::start(ctx);
    ffi::info::register::<commands::info::IdgenSection>(ctx)?;
    ctx.log_notice(&format!(
        "step {} offset {}; snowflake layout {}|{}|{} bits from epoch {} ms in units of {} ms, \
         {} IDs per unit",
        config.identity.step,
        config.identity.offset,
        config.layout.time_bits,
        config.layout.shard_bits,
        config.layout.sequence_bits,
        config.layout.epoch_unix_ms,
        config.layout.time_unit_ms,
        config.ids_per_unit()
    ));
    Ok(())
}

/// The allocator: Redis's in the server, the system's under `cargo test`, where no Redis
/// allocator exists (unit tests of the module's pure helpers would abort without this).
#[cfg(not(test))]
type ModuleAllocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const MODULE_ALLOCATOR: ModuleAllocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type ModuleAllocator = std::alloc::System;
#[cfg(test)]
const MODULE_ALLOCATOR: ModuleAllocator = std::alloc::System;

redis_module! {
    name: "idgen",
    version: version::NUMBER,
    allocator: (ModuleAllocator, MODULE_ALLOCATOR),
    data_types: [SNOWFLAKE_TYPE, LEASE_POOL_TYPE],
    init: on_load,
    configurations: [
        i64: [
            ["step", &settings::STEP.value, settings::STEP.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["offset", &settings::OFFSET.value, settings::OFFSET.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["epoch", &settings::EPOCH.value, settings::EPOCH.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["time-unit-ms", &settings::TIME_UNIT_MS.value, settings::TIME_UNIT_MS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["time-bits", &settings::TIME_BITS.value, settings::TIME_BITS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["shard-bits", &settings::SHARD_BITS.value, settings::SHARD_BITS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["sequence-bits", &settings::SEQUENCE_BITS.value, settings::SEQUENCE_BITS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["id-bits", &settings::ID_BITS.value, settings::ID_BITS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["default-shard", &settings::DEFAULT_SHARD.value, settings::DEFAULT_SHARD.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["max-drift-ms", &settings::MAX_DRIFT_MS.value, settings::MAX_DRIFT_MS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["segment-fence", &settings::SEGMENT_FENCE.value, settings::SEGMENT_FENCE.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["lease-workers", &settings::LEASE_WORKERS.value, settings::LEASE_WORKERS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["lease-max-ms", &settings::LEASE_MAX_MS.value, settings::LEASE_MAX_MS.default, i64::MIN, i64::MAX, ConfigurationFlags::IMMUTABLE, None],
            ["debug-clock-offset-ms", &settings::DEBUG_CLOCK_OFFSET_MS.value, 0, -86_400_000_000, 86_400_000_000, ConfigurationFlags::PROTECTED | ConfigurationFlags::HIDDEN, None],
            ["debug-lease-fence-off", &settings::DEBUG_LEASE_FENCE_OFF.value, 0, 0, 1, ConfigurationFlags::PROTECTED | ConfigurationFlags::HIDDEN, None],
        ],
        string: [],
        bool: [
            [settings::RESTART_FENCE_NAME, &settings::RESTART_FENCE, true, ConfigurationFlags::IMMUTABLE, None],
        ],
        enum: [
            [settings::IDENTITY_CONFLICTS_NAME, &settings::IDENTITY_CONFLICTS, settings::IdentityConflicts::refuse, ConfigurationFlags::IMMUTABLE, None],
        ],
        // Module arguments are applied by `on_load`, which names the setting in every error.
        module_args_as_configuration: false,
    ]
}
