//! Registering the commands with Redis from their declarations (`idgen_core::commands`:
//! name, arity, key, flags, ACL categories, COMMAND DOCS), the `extern "C"` entry point the
//! [`command_table!`] macro makes for each, and the dispatch every entry point runs (arity,
//! refusals as error replies, panics kept from Redis). The call carries the declaration to
//! the handler, which never spells its own name.

use std::ffi::{c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use idgen_core::commands::Command;
use redis_module::{raw, Context};

use crate::ffi::call::Call;
use crate::ffi::command_docs;
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
    command: &'static Command,
    handler: Handler,
    on_error: fn(),
) -> c_int {
    // SAFETY: the arguments are exactly those Redis passed to the entry point.
    let call = unsafe { Call::new(ctx, argv, argc, command) };
    let arity = command.arity;
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

/// Declares the commands: for each, an entry point that dispatches to the handler with the
/// command's declaration, and its row in `COMMANDS`, from which `register_all` creates the
/// command. A command's facts are written once, in its declaration.
macro_rules! command_table {
    (on_error: $on_error:path; $($entry:ident: $command:path => $handler:expr,)+) => {
        $(
            /// # Safety
            /// Called by Redis only, for this command, with the call's context and arguments
            /// (`dispatch` guards the handler against panics).
            // The one `unsafe` outside `ffi/`, written here: the crate denies it elsewhere.
            #[allow(unsafe_code)]
            unsafe extern "C" fn $entry(
                ctx: *mut redis_module::raw::RedisModuleCtx,
                argv: *mut *mut redis_module::raw::RedisModuleString,
                argc: std::ffi::c_int,
            ) -> std::ffi::c_int {
                // SAFETY: Redis passes the running command's own context and arguments.
                unsafe {
                    $crate::ffi::command_table::dispatch(
                        ctx, argv, argc, &$command, $handler, $on_error,
                    )
                }
            }
        )+

        /// Every command with its entry point.
        const COMMANDS: &[(
            &idgen_core::commands::Command,
            $crate::ffi::command_table::EntryPoint,
        )] = &[$((&$command, $entry)),+];
    };
}
pub(crate) use command_table;

/// Creates every command (`since`: the release that added them, for COMMAND DOCS); fails
/// on the first that cannot be created.
pub fn register_all(
    ctx: &Context,
    commands: &[(&Command, EntryPoint)],
    since: &CStr,
) -> Result<(), String> {
    for &(command, entry) in commands {
        // Registered lower case, as Redis names its own commands.
        let name = command.name().to_ascii_lowercase();
        let c_name = CString::new(name.as_str()).map_err(|e| e.to_string())?;
        let flags = CString::new(command.flags).map_err(|e| e.to_string())?;
        // Key positions for `RedisModule_CreateCommand`: the argument after the name, or none.
        let (first, last, step) = if command.key.is_some() {
            (1, 1, 1)
        } else {
            (0, 0, 0)
        };
        // SAFETY: ctx is the loading context; Redis copies the strings.
        let created = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.ctx,
                c_name.as_ptr(),
                Some(entry),
                flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        if created != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not create command {name}"));
        }
        // SAFETY: the command was just created under this name.
        let registered = unsafe { raw::RedisModule_GetCommand.unwrap()(ctx.ctx, c_name.as_ptr()) };
        if registered.is_null() {
            return Err(format!("could not look up command {name}"));
        }
        command_docs::apply(registered, command, since).map_err(|e| format!("{name}: {e}"))?;
        let categories = CString::new(command.acl_categories).map_err(|e| e.to_string())?;
        // ACL categories for module commands exist from Redis 7.2; on 7.0 users grant the
        // commands by name (+snowflake.next).
        // SAFETY: the pointer is present only where the server implements it.
        if let Some(set_categories) = unsafe { raw::RedisModule_SetCommandACLCategories } {
            if unsafe { set_categories(registered, categories.as_ptr()) }
                != raw::REDISMODULE_OK as c_int
            {
                ctx.log_warning(&format!("could not set ACL categories of {name}"));
            }
        }
    }
    Ok(())
}
