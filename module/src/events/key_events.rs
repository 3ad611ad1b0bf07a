//! Keeps what the module holds per segment key (`segment_keys`) no longer than the key, and
//! its reservation no longer than the key's value: when a key is deleted, expires, is
//! evicted, renamed or moved away, the module forgets it (a key that comes back is fenced
//! again on its next use, which only skips values; without this, a service with per-day or
//! per-tenant counters grew the table by one entry per key, for the life of the process);
//! when a key is restored, copied or renamed onto, moved into, or given a TTL, its reservation
//! is voided, so its next call continues above what it then holds (and, as before, leaves no
//! TTL). A plain write needs no event: the key then holds another value than the
//! reservation's top, which the next call sees.
//!
//! A flush (`FLUSHALL`, `FLUSHDB`) fires no key events; `flush_sweep` checks after it which
//! of the remembered keys are really gone.

use std::ffi::{c_char, c_int, CStr};

use redis_module::{raw, Context};

use crate::ffi::guard;
use crate::state::reservations;

/// Generic events after which the key of this name is gone from its database.
const KEY_GONE: [&CStr; 4] = [c"del", c"rename_from", c"move_from", c"expired"];

/// Generic events after which the key of this name holds a value this instance did not write
/// (possibly the same number) or has a TTL.
const KEY_REPLACED: [&CStr; 5] = [c"restore", c"copy_to", c"rename_to", c"move_to", c"expire"];

/// # Safety
/// Called by Redis only, for a keyspace event the module subscribed to, with the event's
/// context, its name (a C string) and the key.
unsafe extern "C" fn on_key_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    guard::or_log(
        "following a key deleted or replaced behind the module",
        (),
        || {
            // SAFETY: Redis passes the event's name as a NUL-terminated string, alive for the call.
            let event = unsafe { CStr::from_ptr(event) };
            let gone = KEY_GONE.contains(&event) || event == c"evicted";
            if !gone && !KEY_REPLACED.contains(&event) {
                return;
            }
            let mut len = 0usize;
            // SAFETY: key is the event's key, alive for the call; the bytes are read before it
            // returns.
            let bytes = unsafe {
                let ptr = raw::RedisModule_StringPtrLen.unwrap()(key, &mut len);
                std::slice::from_raw_parts(ptr.cast::<u8>(), len)
            };
            // SAFETY: ctx is the event's context.
            let db = unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx) };
            if gone {
                reservations::forget(db, bytes);
            } else {
                reservations::void(db, bytes);
            }
        },
    );
    raw::REDISMODULE_OK as c_int
}

/// Subscribes to the events that remove keys.
pub fn subscribe(ctx: &Context) -> Result<(), String> {
    let types = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED;
    // SAFETY: ctx is the loading context; the callback has the signature Redis expects.
    let status = unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents.unwrap()(ctx.ctx, types, Some(on_key_event))
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("could not subscribe to keyspace events".into());
    }
    Ok(())
}
