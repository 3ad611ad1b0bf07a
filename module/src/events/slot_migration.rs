//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): the source sends the slots'
//! keys to the target as AOF commands (a snowflake key as `SNOWFLAKE.SETBOUND key bound
//! owner`, a counter as `SET`), then the stream of their writes, and hands the slots over
//! at once. Valkey refuses the command while a loaded module has not declared that it
//! handles it; this module declares it, on Valkey servers that offer it, because:
//!
//! - a moved snowflake key arrives with its bound and owner, which no ID issued for it on
//!   the source passes (the source extends a bound, and replicates it, before issuing under
//!   it); the target owns the key under another incarnation, so it continues above the
//!   bound, as after any failover;
//! - a moved counter arrives with its value, above every value handed out for it; the
//!   target fences the key on its first use there, as any key first used since its start;
//! - the slot import client's commands reach modules flagged as replicated, so its
//!   `SNOWFLAKE.SETBOUND` records the owner and is not held to a client's drift rule
//!   (seen on Valkey 9.1.2: the bound arrives whole; `tests/tests/cluster.rs`);
//! - when an export completes, the source drops what it kept for the keys of those slots
//!   (which keys it has fenced since its start); the values it remembers from before a full
//!   sync are kept (`segment_marks`): they stay true if a key comes back;
//! - a cancelled or failed migration leaves the source's keys as they were, and the target
//!   deletes what it imported; the module keeps nothing for imported keys until they are
//!   used, which they cannot be before the slots are handed over.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::{raw, Context};

use crate::ffi::guard;
use crate::state::reservations;
use crate::state::stats;

/// `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (Valkey 9).
const EVENT: u64 = 19;
/// `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (Valkey 9).
const OPTION: c_int = 1 << 5;

const IMPORT_STARTED: u64 = 0;
const EXPORT_STARTED: u64 = 1;
const IMPORT_ABORTED: u64 = 2;
const EXPORT_ABORTED: u64 = 3;
const IMPORT_COMPLETED: u64 = 4;
const EXPORT_COMPLETED: u64 = 5;

/// Whether this server migrates slots atomically and the module declared that it handles it.
static HANDLED: AtomicBool = AtomicBool::new(false);

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

/// Whether atomic slot migration is handled here (`INFO idgen`).
pub fn handled() -> bool {
    HANDLED.load(Ordering::Relaxed)
}

/// Declares support for atomic slot migration where the server offers it: a Valkey server
/// (`server_name:valkey`) whose module API has the migration event and option. Elsewhere
/// nothing is declared (Redis gives these numbers no meaning, or other ones).
pub fn declare(ctx: &Context) {
    let server = ctx.server_info("server");
    let is_valkey = server
        .field("server_name")
        .is_some_and(|name| name.to_string() == "valkey");
    // SAFETY: reading function pointers the server filled in at load; called with no
    // arguments as the API declares.
    let options_offered = unsafe { raw::RedisModule_GetModuleOptionsAll }
        .is_some_and(|all| unsafe { all() } & OPTION != 0);
    if !is_valkey || !options_offered {
        return;
    }
    let event = raw::RedisModuleEvent {
        id: EVENT,
        dataver: 1,
    };
    // SAFETY: ctx is the loading context; the callback has the signature the server expects.
    let subscribed = unsafe {
        raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, event, Some(on_migration))
    } == raw::REDISMODULE_OK as c_int;
    if !subscribed {
        return;
    }
    // SAFETY: ctx is the loading context.
    unsafe { raw::RedisModule_SetModuleOptions.unwrap()(ctx.ctx, OPTION) };
    HANDLED.store(true, Ordering::Relaxed);
    ctx.log_notice("atomic slot migration (CLUSTER MIGRATESLOTS) is handled");
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
unsafe extern "C" fn on_migration(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling a slot migration", (), || {
        // SAFETY: data is the event's info, alive for the callback.
        let slots = unsafe { ranges(data.cast()) };
        let context = Context::new(ctx);
        let what = match subevent {
            IMPORT_STARTED => "import started",
            EXPORT_STARTED => "export started",
            IMPORT_ABORTED => "import cancelled or failed: the imported keys are dropped",
            EXPORT_ABORTED => "export cancelled or failed: the keys stay here",
            IMPORT_COMPLETED => {
                stats::SLOT_IMPORTS.add(1);
                "import completed: these slots' keys continue here above their records"
            }
            EXPORT_COMPLETED => {
                stats::SLOT_EXPORTS.add(1);
                let forgotten = reservations::forget_slots(&slots);
                context.log_notice(&format!(
                    "slot migration: forgot the fence of {forgotten} keys that moved away"
                ));
                "export completed: these slots' keys now live on the target"
            }
            _ => return,
        };
        context.log_notice(&format!("slot migration of slots {slots:?}: {what}"));
    });
}
