//! Switching the database of a context's client (timers and event callbacks that visit
//! keys in several databases).

use std::ffi::c_int;

use redis_module::{raw, Context};

/// Runs `f` with `ctx`'s client switched to database `db`, then switches it back.
///
/// `ctx` must have a client (a timer's or an event's context has one). A database that
/// does not exist leaves the selection as it was.
pub fn in_database<R>(ctx: &Context, db: i32, f: impl FnOnce() -> R) -> R {
    // SAFETY: ctx is a live context with a client (the function's contract, held by every
    // caller: the module's timers and event callbacks).
    let selected = unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) };
    // SAFETY: as above; SelectDb refuses (and changes nothing for) a database out of range.
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.ctx, db as c_int) };
    let result = f();
    // SAFETY: as above; back to the database the client had.
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.ctx, selected) };
    result
}
