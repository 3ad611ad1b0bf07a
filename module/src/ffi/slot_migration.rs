//! The raw side of Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): whether the
//! server offers it, the module option that declares it handled, and the event callback,
//! which decodes the slot ranges and hands them, under the panic guard, to a safe handler
//! (`events::slot_migration`, which says why the module can handle it).

use std::ffi::{c_char, c_int, c_void};

use redis_module::{raw, Context};

use crate::ffi::guard;
use crate::ffi::server_events::subscribe_to;

/// `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (Valkey 9).
const EVENT: u64 = 19;
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
    /// The step of a subevent number, if it is one.
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
}

/// What the module does at each step of a slot migration.
pub trait SlotMigrationHandler {
    /// Handles one step for the slot ranges `slots` (first, last; both included).
    fn handle(ctx: &Context, step: MigrationStep, slots: &[(u16, u16)]);
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

/// Declares that the module handles atomic slot migration, and subscribes `H` to its
/// event, where the server offers it: a Valkey server (`server_name:valkey`) whose module
/// API has the migration event and option. Elsewhere nothing is declared (Redis gives these
/// numbers no meaning, or other ones). Returns whether it was declared.
pub fn declare<H: SlotMigrationHandler>(ctx: &Context) -> bool {
    let server = ctx.server_info("server");
    let is_valkey = server
        .field("server_name")
        .is_some_and(|name| name.to_string() == "valkey");
    // SAFETY: reading function pointers the server filled in at load; called with no
    // arguments as the API declares.
    let options_offered = unsafe { raw::RedisModule_GetModuleOptionsAll }
        .is_some_and(|all| unsafe { all() } & OPTION != 0);
    if !is_valkey || !options_offered {
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
