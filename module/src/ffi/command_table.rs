//! Registering the commands with Redis: each command's spec (name, arity, handler, flags,
//! key spec, ACL categories, COMMAND DOCS), the `extern "C"` entry point the
//! [`command_table!`] macro makes for each, and the dispatch every entry point runs (arity,
//! refusals as error replies, panics kept from Redis).

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use redis_module::{raw, Context};

use crate::ffi::call::Call;
use crate::ffi::command_docs::CommandDocs;
use crate::ffi::keyspace::Keyspace;
use crate::ffi::refusal::Refusal;

/// A command's work: it reads its arguments from the call, opens keys through the keyspace
/// (one at a time) and replies through the call, or returns a refusal to reply instead.
pub type Handler = fn(&Call, &mut Keyspace<'_>) -> Result<(), Refusal>;

/// The function Redis calls for a command.
pub type EntryPoint = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// Everything Redis needs to know about one command.
pub struct CommandSpec {
    /// The command's name, lower case.
    pub name: &'static CStr,
    /// Exact argument count (command name included) if positive, minimum if negative.
    pub arity: c_int,
    /// What the command does.
    pub handler: Handler,
    /// Redis command flags.
    pub flags: &'static CStr,
    /// ACL categories, set where the server supports them (7.2+).
    pub acl_categories: &'static CStr,
    /// COMMAND DOCS; its `key_access` also gives the key position: the argument after the
    /// name, or none.
    pub docs: CommandDocs,
}

impl CommandSpec {
    /// `(first, last, step)` key positions for `RedisModule_CreateCommand`.
    fn key_positions(&self) -> (c_int, c_int, c_int) {
        match self.docs.key_access {
            Some(_) => (1, 1, 1),
            None => (0, 0, 0),
        }
    }
}

/// Runs a handler for a Redis call: checks arity, turns refusals into error replies (and
/// calls `on_error` for each), and stops any panic from unwinding into Redis.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be those Redis passed to the running command's entry point.
// Inlined into each entry point: the arity folds to a constant and the handler becomes a
// direct call.
#[inline(always)]
pub unsafe fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    arity: c_int,
    handler: Handler,
    on_error: fn(),
) -> c_int {
    // SAFETY: the arguments are exactly those Redis passed to the entry point.
    let call = unsafe { Call::new(ctx, argv, argc) };
    let arity_ok = if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    };
    if !arity_ok {
        on_error();
        call.reply_wrong_arity();
        return raw::REDISMODULE_OK as c_int;
    }
    let Some(ctx) = NonNull::new(ctx) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: ctx is the running command's, and this is the call's only keyspace.
    let mut keys = unsafe { Keyspace::new(ctx) };
    match catch_unwind(AssertUnwindSafe(|| handler(&call, &mut keys))) {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => {
            on_error();
            call.reply_refusal(&refusal);
        }
        Err(_) => {
            on_error();
            call.reply_refusal(&Refusal::new(
                "ERR",
                "idgen hit an internal error (a bug: please report it with the server log); \
                 the server keeps running",
            ));
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// Declares the commands: for each, an entry point that dispatches to the spec's handler
/// with the spec's arity, and the spec's row in `COMMANDS`, from which `register_all`
/// creates the command. A command's facts are written once, in its spec.
macro_rules! command_table {
    (on_error: $on_error:path; $($entry:ident: $spec:expr,)+) => {
        $(
            /// # Safety
            /// Called by Redis only, for this command, with the call's context and arguments
            /// (`dispatch` guards the handler against panics).
            unsafe extern "C" fn $entry(
                ctx: *mut redis_module::raw::RedisModuleCtx,
                argv: *mut *mut redis_module::raw::RedisModuleString,
                argc: std::ffi::c_int,
            ) -> std::ffi::c_int {
                const SPEC: $crate::ffi::command_table::CommandSpec = $spec;
                // SAFETY: Redis passes the running command's own context and arguments.
                unsafe {
                    $crate::ffi::command_table::dispatch(
                        ctx, argv, argc, SPEC.arity, SPEC.handler, $on_error,
                    )
                }
            }
        )+

        /// Every command with its entry point.
        const COMMANDS: &[(
            $crate::ffi::command_table::CommandSpec,
            $crate::ffi::command_table::EntryPoint,
        )] = &[$(($spec, $entry)),+];
    };
}
pub(crate) use command_table;

/// Creates every command (`since`: the release that added them, for COMMAND DOCS); fails
/// on the first that cannot be created.
pub fn register_all(
    ctx: &Context,
    commands: &[(CommandSpec, EntryPoint)],
    since: &CStr,
) -> Result<(), String> {
    for (spec, entry) in commands {
        let (first, last, step) = spec.key_positions();
        let name = spec.name.to_string_lossy();
        // SAFETY: ctx is the loading context; the strings are static.
        let created = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.ctx,
                spec.name.as_ptr(),
                Some(*entry),
                spec.flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        if created != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not create command {name}"));
        }
        // SAFETY: the command was just created under this name.
        let command = unsafe { raw::RedisModule_GetCommand.unwrap()(ctx.ctx, spec.name.as_ptr()) };
        if command.is_null() {
            return Err(format!("could not look up command {name}"));
        }
        spec.docs
            .apply(command, spec.arity, since)
            .map_err(|e| format!("{name}: {e}"))?;
        // ACL categories for module commands exist from Redis 7.2; on 7.0 users grant the
        // commands by name (+snowflake.next).
        // SAFETY: the pointer is present only where the server implements it.
        if let Some(set_categories) = unsafe { raw::RedisModule_SetCommandACLCategories } {
            if unsafe { set_categories(command, spec.acl_categories.as_ptr()) }
                != raw::REDISMODULE_OK as c_int
            {
                ctx.log_warning(&format!("could not set ACL categories of {name}"));
            }
        }
    }
    Ok(())
}
