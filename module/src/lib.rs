//! The `idgen` Redis module: `SNOWFLAKE.NEXT`, `SEGMENT.NEXT`, `SNOWFLAKE.DECODE` (plus
//! `SNOWFLAKE.BOUND`, `SNOWFLAKE.SETBOUND` and `IDGEN.IDENTITY`), generated inside Redis
//! from per-instance step-offset sequences.
//!
//! The arithmetic lives in `idgen-core`; this crate binds it to Redis: configs, commands,
//! the `snowflake` key type, replication of effects and `INFO idgen`.

// `unsafe` only in `ffi/`, the binding to the module API: the compiler holds every other
// layer to safe code (the `command_table!` macro allows it on the entry points it expands).
#![deny(unsafe_code)]

mod commands;
mod datatype;
mod events;
#[allow(unsafe_code)]
mod ffi;
mod state;

use redis_module::{redis_module, Context, ContextFlags, RedisString, Status};

use datatype::lease_pool::LEASE_POOL_TYPE;
use datatype::snowflake_key::SNOWFLAKE_TYPE;
use ffi::guard;
use state::{
    clock, instance, leases, peer_identities, replica_role, reservations, settings, version,
};

/// Registers the settings (Redis applies config-file values), applies the module
/// arguments, checks the result, then registers the commands.
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
    settings::register(ctx)?;
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
}
