//! The raw side of the server events the module follows (role changes, flushes, `SWAPDB`):
//! the callbacks Redis calls, which decode the event's data and hand it, under the panic
//! guard, to safe handlers (`events::server_events`).

use std::ffi::{c_int, c_void};

use redis_module::{raw, Context};

use crate::ffi::guard;
use crate::ffi::key_scan::EventContext;

/// The role-changed subevent meaning "this instance is now a master".
const NOW_MASTER: u64 = 0;

/// When a flush event fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPhase {
    /// Before the data is erased.
    Start,
    /// After it is erased.
    End,
}

/// What the module does on each server event it follows.
pub trait ServerEventHandlers {
    /// The instance became a master (`now_master`) or a replica.
    fn role_changed(ctx: &Context, now_master: bool);
    /// Database `db` (`-1`: every database) is about to be flushed, or was flushed.
    fn flush(ctx: &Context, event: &EventContext, phase: FlushPhase, db: i32);
    /// `SWAPDB first second` ran.
    fn swapdb(first: i32, second: i32);
}

/// # Safety
/// Called by Redis only, for the role-changed event, with its own event context.
unsafe extern "C" fn on_role_changed<H: ServerEventHandlers>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    guard::or_log("handling a role change", (), || {
        H::role_changed(&Context::new(ctx), subevent == NOW_MASTER);
    });
}

/// # Safety
/// Called by Redis only, for the flush event, with its own event context (which has a
/// temporary client, so keys can be scanned).
unsafe extern "C" fn on_flush<H: ServerEventHandlers>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling a flush", (), || {
        // SAFETY: for the flush event Redis passes a RedisModuleFlushInfo, alive for the call.
        let db = unsafe { &*data.cast::<raw::RedisModuleFlushInfo>() }.dbnum;
        let phase = if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
            FlushPhase::End
        } else {
            FlushPhase::Start
        };
        // SAFETY: ctx is this flush event's context.
        let event = unsafe { EventContext::new(ctx) };
        H::flush(&Context::new(ctx), &event, phase, db);
    });
}

/// What Redis passes with the `SWAPDB` event (`RedisModuleSwapDbInfoV1`).
#[repr(C)]
struct SwapDbInfo {
    version: u64,
    first: i32,
    second: i32,
}

/// # Safety
/// Called by Redis only, for the swapdb event, with its data.
unsafe extern "C" fn on_swapdb<H: ServerEventHandlers>(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling SWAPDB", (), || {
        // SAFETY: for the swapdb event Redis passes a RedisModuleSwapDbInfoV1, alive for the
        // call, whose layout `SwapDbInfo` repeats.
        let info = unsafe { &*data.cast::<SwapDbInfo>() };
        H::swapdb(info.first, info.second);
    });
}

/// A server-event callback as Redis calls it.
pub type EventCallback =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);

/// Subscribes to one server event; fails with a message naming it.
pub fn subscribe_to(
    ctx: &Context,
    id: u64,
    name: &str,
    callback: EventCallback,
) -> Result<(), String> {
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    // SAFETY: ctx is the loading context; the callback has the signature Redis expects.
    let status =
        unsafe { raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, event, Some(callback)) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not subscribe to the {name} server event"));
    }
    Ok(())
}

/// Subscribes `H` to role changes, flushes and `SWAPDB`.
pub fn subscribe<H: ServerEventHandlers>(ctx: &Context) -> Result<(), String> {
    subscribe_to(
        ctx,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        "role-changed",
        on_role_changed::<H>,
    )?;
    subscribe_to(
        ctx,
        raw::REDISMODULE_EVENT_FLUSHDB,
        "flushdb",
        on_flush::<H>,
    )?;
    subscribe_to(ctx, raw::REDISMODULE_EVENT_SWAPDB, "swapdb", on_swapdb::<H>)
}
