//! Keeps a panic (a bug) in any callback Redis makes into the module from unwinding into
//! Redis, which would abort the server: the panic is logged and the callback returns a
//! fallback that Redis understands as a failure, or as nothing done.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::logging::RedisLogLevel;
use redis_module::Context;

/// Runs `callback`; if it panics, logs that `what` failed and returns `fallback`.
pub fn or_log<R>(what: &str, fallback: R, callback: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(callback)).unwrap_or_else(|_| {
        Context::dummy().log(
            RedisLogLevel::Warning,
            &format!(
                "idgen hit an internal error while {what} (a bug: please report it with this \
                 log); the server keeps running"
            ),
        );
        fallback
    })
}
