//! The raw side of keyspace events: the callback Redis calls for the generic, expired and
//! evicted events, which decodes the event's name, key and database and hands them, under
//! the panic guard, to a safe handler (`events::key_events`).

use std::ffi::{c_char, c_int, CStr};

use redis_module::{raw, Context};

use crate::ffi::guard;

/// One keyspace event.
pub struct KeyEvent<'a> {
    /// The event's name (`del`, `expired`, `rename_to`, …).
    pub name: &'a CStr,
    /// The key's database.
    pub db: i32,
    /// The key's name.
    pub key: &'a [u8],
}

/// What the module does on a keyspace event.
pub trait KeyEventHandler {
    /// What the handler does, for the log if it panics.
    const WHAT: &'static str;
    /// Handles one event.
    fn handle(event: &KeyEvent<'_>);
}

/// # Safety
/// Called by Redis only, for a keyspace event the module subscribed to, with the event's
/// context, its name (a C string) and the key.
unsafe extern "C" fn on_key_event<H: KeyEventHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    guard::or_log(H::WHAT, (), || {
        // SAFETY: Redis passes the event's name as a NUL-terminated string, alive for the call.
        let name = unsafe { CStr::from_ptr(event) };
        let mut len = 0usize;
        // SAFETY: key is the event's key, alive for the call; the bytes are read before it
        // returns.
        let key = unsafe {
            let ptr = raw::RedisModule_StringPtrLen.unwrap()(key, &mut len);
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        };
        // SAFETY: ctx is the event's context.
        let db = unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx) };
        H::handle(&KeyEvent { name, db, key });
    });
    raw::REDISMODULE_OK as c_int
}

/// Subscribes `H` to the generic, expired and evicted keyspace events.
pub fn subscribe<H: KeyEventHandler>(ctx: &Context) -> Result<(), String> {
    let types = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED;
    // SAFETY: ctx is the loading context; the callback has the signature Redis expects.
    let status = unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents.unwrap()(ctx.ctx, types, Some(on_key_event::<H>))
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("could not subscribe to keyspace events".into());
    }
    Ok(())
}
