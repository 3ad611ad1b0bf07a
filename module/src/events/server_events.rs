//! Server events the module follows: a flush about to erase a replica's data (remember this
//! instance's segment values first), any flush (void the segment reservations of its
//! databases; at its end, check which held keys it removed, `flush_sweep`), `SWAPDB` (the
//! records follow the data), and role changes (void every reservation; on promotion, a new
//! incarnation).

use std::ffi::{c_int, c_void};

use idgen_core::parse_redis_integer;
use redis_module::{raw, Context};

use crate::events::flush_sweep;
use crate::ffi::guard;
use crate::ffi::key_scan::EventContext;
use crate::state::failback_marks;
use crate::state::instance;
use crate::state::replica_role;
use crate::state::reservations;
use crate::state::stats;

/// The role-changed subevent meaning "this instance is now a master".
const NOW_MASTER: u64 = 0;

/// The most digits (with a sign) an `i64` has: longer strings cannot be counters.
const MAX_INTEGER_LEN: usize = 20;

/// # Safety
/// Called by Redis only, for the role-changed event, with its own event context.
unsafe extern "C" fn on_role_changed(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    guard::or_log("handling a role change", (), || {
        // Either way the data may change under the reservations (a sync as a replica, other
        // masters' writes before a promotion): the next call of each key continues above
        // what the key holds.
        reservations::void_all(-1);
        replica_role::set_replica(subevent != NOW_MASTER);
        if subevent != NOW_MASTER {
            return;
        }
        stats::PROMOTIONS.add(1);
        // Keys recorded before the promotion (by the old master, or by this instance in an
        // earlier term) are continued above their bound.
        instance::new_incarnation();
        Context::new(ctx).log_notice(&format!(
            "promoted to master: snowflake IDs and segment values continue from this \
             instance's own offset; {} segment keys continue above values this instance \
             handed out before a full sync replaced its data",
            failback_marks::len()
        ));
    });
}

/// # Safety
/// Called by Redis only, for the flush event, with its own event context (which has a
/// temporary client, so keys can be scanned).
unsafe extern "C" fn on_flush(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling a flush", (), || {
        // SAFETY: for the flush event Redis passes a RedisModuleFlushInfo, alive for the call.
        let info = unsafe { &*data.cast::<raw::RedisModuleFlushInfo>() };
        if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
            flush_sweep::schedule(&Context::new(ctx), info.dbnum);
            return;
        }
        reservations::void_all(info.dbnum);
        // SAFETY: ctx is this flush event's context.
        let event = unsafe { EventContext::new(ctx) };
        // A replica's data is flushed when a full sync from its master begins (or the
        // master's FLUSHALL arrives); a master's only by its own users' FLUSHALL/FLUSHDB,
        // which mean what they say.
        if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_START || !event.is_replica() {
            return;
        }
        remember_own_values(ctx, &event);
    });
}

/// Remembers every string key holding an integer of this instance's residue class: a
/// value only this instance can have handed out, which the flush would erase.
fn remember_own_values(ctx: *mut raw::RedisModuleCtx, event: &EventContext) {
    let identity = instance::config().identity;
    let before = failback_marks::len();
    // The last top this instance wrote into each key it used: what it may have handed out,
    // even where an operator's SET has since replaced it in the data.
    for (db, key, top) in reservations::held(-1) {
        failback_marks::remember(db, key.as_slice(), top);
    }
    let complete = event.for_each_string(MAX_INTEGER_LEN, |db, key, value| {
        if let Some(value) = parse_redis_integer(value).filter(|&v| identity.owns(v)) {
            failback_marks::remember(db, key, value);
        }
    });
    let taken = failback_marks::len().saturating_sub(before);
    stats::SEGMENT_MARKS_TAKEN.add(taken as u64);
    let context = Context::new(ctx);
    if !complete {
        context.log_warning(
            "idgen could not finish remembering this instance's segment values before the \
             flush (a bug: please report it with this log); segment keys keep the start fence",
        );
    }
    if taken > 0 {
        context.log_notice(&format!(
            "a full sync replaces this replica's data: remembered {taken} segment keys holding \
             values this instance may have handed out, so it never hands them out again if \
             promoted"
        ));
    }
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
unsafe extern "C" fn on_swapdb(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    guard::or_log("handling SWAPDB", (), || {
        // SAFETY: for the swapdb event Redis passes a RedisModuleSwapDbInfoV1, alive for the
        // call, whose layout `SwapDbInfo` repeats.
        let info = unsafe { &*data.cast::<SwapDbInfo>() };
        reservations::swap_dbs(info.first, info.second);
    });
}

/// Subscribes to one server event; fails with a message naming it.
fn subscribe_to(
    ctx: &Context,
    id: u64,
    name: &str,
    callback: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        raw::RedisModuleEvent,
        u64,
        *mut c_void,
    ),
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

/// Subscribes to role changes, flushes and `SWAPDB`.
pub fn subscribe(ctx: &Context) -> Result<(), String> {
    subscribe_to(
        ctx,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        "role-changed",
        on_role_changed,
    )?;
    subscribe_to(ctx, raw::REDISMODULE_EVENT_FLUSHDB, "flushdb", on_flush)?;
    subscribe_to(ctx, raw::REDISMODULE_EVENT_SWAPDB, "swapdb", on_swapdb)
}
