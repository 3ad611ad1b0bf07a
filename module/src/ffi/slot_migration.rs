//! The raw side of atomic slot migration, on the two servers that have one of their own:
//! Valkey 9's `CLUSTER MIGRATESLOTS` (whether the server offers it, the module option that
//! declares it handled, and its event) and Redis 8.4+'s `CLUSTER MIGRATION` (its migration
//! and trim events). The callbacks decode the slot ranges and hand them, under the panic
//! guard, to a safe handler (`events::slot_migration`, which says what the module does at
//! each step and why).
//!
//! The two servers number their events alike but mean other things by them (Valkey's event
//! 19 is its migration, Redis's is the trim after one), so the server is told apart by
//! `server_name` and by the API functions only one of them has, never by a version number.

use std::ffi::{c_char, c_int, c_void};

use redis_module::{raw, Context};

use crate::ffi::guard;
use crate::ffi::server_events::subscribe_to;

/// `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (Valkey 9).
const EVENT: u64 = 19;
/// `REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION` (Redis 8.4+).
const REDIS_MIGRATION_EVENT: u64 = 18;
/// `REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION_TRIM` (Redis 8.4+).
const REDIS_TRIM_EVENT: u64 = 19;
/// `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (Valkey 9).
const OPTION: c_int = 1 << 5;

/// A step of a slot migration, on the importing (target) or exporting (source) side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationStep {
    /// The target began receiving the slots' keys.
    ImportStarted,
    /// The source began sending them.
    ExportStarted,
    /// The import was cancelled or failed: the target drops what it imported.
    ImportAborted,
    /// The export was cancelled or failed: the keys stay on the source.
    ExportAborted,
    /// The slots now belong to the target.
    ImportCompleted,
    /// The slots no longer belong to the source.
    ExportCompleted,
}

impl MigrationStep {
    /// The step of a Valkey 9 subevent number, if it is one.
    fn of(subevent: u64) -> Option<Self> {
        Some(match subevent {
            0 => MigrationStep::ImportStarted,
            1 => MigrationStep::ExportStarted,
            2 => MigrationStep::ImportAborted,
            3 => MigrationStep::ExportAborted,
            4 => MigrationStep::ImportCompleted,
            5 => MigrationStep::ExportCompleted,
            _ => return None,
        })
    }

    /// The step of a Redis 8.4+ `CLUSTER_SLOT_MIGRATION` subevent, if it is one of these
    /// (subevent 6, "propagate what the module wants sent with the slots", is not: the
    /// module sends nothing of its own, see `events::slot_migration`).
    fn of_redis(subevent: u64) -> Option<Self> {
        Some(match subevent {
            0 => MigrationStep::ImportStarted,
            1 => MigrationStep::ImportAborted,
            2 => MigrationStep::ImportCompleted,
            3 => MigrationStep::ExportStarted,
            4 => MigrationStep::ExportAborted,
            5 => MigrationStep::ExportCompleted,
            _ => return None,
        })
    }
}

/// A step of Redis 8.4+'s trim: the deletion of the keys of slots this node no longer
/// serves (after an export completed, or an import failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStep {
    /// Keys are deleted one by one on the main thread, each with a `key_trimmed` event.
    Started,
    /// That deletion ended.
    Completed,
    /// The slots' keys are handed to a background thread, which frees them (no event per
    /// key; the values' free callback runs on that thread).
    Background,
}

impl TrimStep {
    fn of(subevent: u64) -> Option<Self> {
        Some(match subevent {
            0 => TrimStep::Started,
            1 => TrimStep::Completed,
            2 => TrimStep::Background,
            _ => return None,
        })
    }
}

/// What the module does at each step of a slot migration.
pub trait SlotMigrationHandler {
    /// Handles one step for the slot ranges `slots` (first, last; both included).
    fn handle(ctx: &Context, step: MigrationStep, slots: &[(u16, u16)]);
    /// Handles one step of a trim (Redis 8.4+ only) for the slot ranges `slots`.
    fn trim(ctx: &Context, step: TrimStep, slots: &[(u16, u16)]);
}

/// Which server's atomic slot migration the module follows, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// Valkey 9's `CLUSTER MIGRATESLOTS` (the module declared that it handles it).
    Valkey,
    /// Redis 8.4+'s `CLUSTER MIGRATION` (the module follows its events).
    Redis,
}

/// A slot range as Valkey passes it (`ValkeyModuleSlotRange`).
#[repr(C)]
struct SlotRange {
    start: c_int,
    end: c_int,
}

/// What Valkey passes with each event (`ValkeyModuleAtomicSlotMigrationInfoV1`).
#[repr(C)]
struct MigrationInfo {
    version: u64,
    job_name: [c_char; 41],
    slot_ranges: *const SlotRange,
    num_slot_ranges: u32,
}

/// Subscribes `H` to the server's own atomic slot migration, where it has one:
/// - on a Valkey server (`server_name:valkey`) whose module API has the migration event and
///   option, declares that the module handles it (Valkey refuses `CLUSTER MIGRATESLOTS`
///   otherwise) and subscribes to its event;
/// - on a Redis server whose module API has the functions that came with `CLUSTER
///   MIGRATION` (Redis 8.4: `ClusterPropagateForSlotMigration`, `ClusterDisableTrim`),
///   subscribes to its migration and trim events.
///
/// Elsewhere (Redis before 8.4, Valkey 8) nothing is subscribed. Returns what was.
pub fn declare<H: SlotMigrationHandler>(ctx: &Context) -> Option<Declared> {
    let server = ctx.server_info("server");
    let is_valkey = server
        .field("server_name")
        .is_some_and(|name| name.to_string() == "valkey");
    if !is_valkey {
        return declare_redis::<H>(ctx).then_some(Declared::Redis);
    }
    declare_valkey::<H>(ctx).then_some(Declared::Valkey)
}

/// Subscribes `H` to Redis 8.4+'s migration and trim events, if the server has them.
fn declare_redis<H: SlotMigrationHandler>(ctx: &Context) -> bool {
    // SAFETY: reading function pointers the server filled in at load (null where it lacks
    // the function); none is called.
    let has_redis_migration = unsafe { raw::RedisModule_ClusterPropagateForSlotMigration }
        .is_some()
        && unsafe { raw::RedisModule_ClusterDisableTrim }.is_some();
    has_redis_migration
        && subscribe_to(
            ctx,
            REDIS_MIGRATION_EVENT,
            "cluster slot migration",
            on_redis_migration::<H>,
        )
        .is_ok()
        && subscribe_to(
            ctx,
            REDIS_TRIM_EVENT,
            "cluster slot migration trim",
            on_redis_trim::<H>,
        )
        .is_ok()
}

/// Declares Valkey 9's atomic slot migration handled, and subscribes `H` to its event.
fn declare_valkey<H: SlotMigrationHandler>(ctx: &Context) -> bool {
    // SAFETY: reading function pointers the server filled in at load; called with no
    // arguments as the API declares.
    let options_offered = unsafe { raw::RedisModule_GetModuleOptionsAll }
        .is_some_and(|all| unsafe { all() } & OPTION != 0);
    if !options_offered {
        return false;
    }
    if subscribe_to(ctx, EVENT, "atomic slot migration", on_migration::<H>).is_err() {
        return false;
    }
    // SAFETY: ctx is the loading context.
    unsafe { raw::RedisModule_SetModuleOptions.unwrap()(ctx.ctx, OPTION) };
    true
}

/// The slot ranges of a migration event.
///
/// # Safety
/// `info` must be the event data Valkey passed, alive for the callback.
unsafe fn ranges(info: *const MigrationInfo) -> Vec<(u16, u16)> {
    // SAFETY: the caller's contract; Valkey passes version 1 of the structure.
    let info = unsafe { &*info };
    if info.version < 1 || info.slot_ranges.is_null() {
        return Vec::new();
    }
    // SAFETY: Valkey passes an array of `num_slot_ranges` ranges.
    let ranges =
        unsafe { std::slice::from_raw_parts(info.slot_ranges, info.num_slot_ranges as usize) };
    ranges
        .iter()
        .filter_map(|range| {
            Some((
                u16::try_from(range.start).ok()?,
                u16::try_from(range.end).ok()?,
            ))
        })
        .collect()
}

/// # Safety
/// Called by Valkey only, for the atomic slot migration event, with its event context and
/// a `ValkeyModuleAtomicSlotMigrationInfoV1`.
unsafe extern "C" fn on_migration<H: SlotMigrationHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling a slot migration", (), || {
        let Some(step) = MigrationStep::of(subevent) else {
            return;
        };
        // SAFETY: data is the event's info, alive for the callback.
        let slots = unsafe { ranges(data.cast()) };
        H::handle(&Context::new(ctx), step, &slots);
    });
}

/// The slot ranges of a Redis `RedisModuleSlotRangeArray`.
///
/// # Safety
/// `slots` must be null or the array Redis passed with an event, alive for the callback.
unsafe fn redis_ranges(slots: *const raw::RedisModuleSlotRangeArray) -> Vec<(u16, u16)> {
    if slots.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's contract: a live array of `num_ranges` ranges.
    let ranges = unsafe {
        let count = usize::try_from((*slots).num_ranges).unwrap_or(0);
        (*slots).ranges.as_slice(count)
    };
    ranges
        .iter()
        .map(|range| (range.start, range.end))
        .collect()
}

/// # Safety
/// Called by Redis only, for the `CLUSTER_SLOT_MIGRATION` event, with its event context and
/// a `RedisModuleClusterSlotMigrationInfoV1`.
unsafe extern "C" fn on_redis_migration<H: SlotMigrationHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling a slot migration", (), || {
        let Some(step) = MigrationStep::of_redis(subevent) else {
            return;
        };
        let info = data.cast::<raw::RedisModuleClusterSlotMigrationInfo>();
        // SAFETY: data is the event's info (or null), alive for the callback; its `slots`
        // is the task's range array.
        let slots = if info.is_null() {
            Vec::new()
        } else {
            unsafe { redis_ranges((*info).slots) }
        };
        H::handle(&Context::new(ctx), step, &slots);
    });
}

/// # Safety
/// Called by Redis only, for the `CLUSTER_SLOT_MIGRATION_TRIM` event, with its event
/// context and a `RedisModuleClusterSlotMigrationTrimInfoV1`.
unsafe extern "C" fn on_redis_trim<H: SlotMigrationHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling a slot trim", (), || {
        let Some(step) = TrimStep::of(subevent) else {
            return;
        };
        let info = data.cast::<raw::RedisModuleClusterSlotMigrationTrimInfo>();
        // SAFETY: as in `on_redis_migration`.
        let slots = if info.is_null() {
            Vec::new()
        } else {
            unsafe { redis_ranges((*info).slots) }
        };
        H::trim(&Context::new(ctx), step, &slots);
    });
}
