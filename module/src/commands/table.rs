//! The commands: each declared once in the `commands!` table below (name, arity, entry
//! point, flags, key spec, ACL categories, COMMAND DOCS), and registered with Redis from it.

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use redis_module::{raw, Context};

use crate::commands::compose;
use crate::commands::decode;
use crate::commands::identity;
use crate::commands::segment_next;
use crate::commands::snowflake_next;
use crate::ffi::call::Call;
use crate::ffi::command_docs::{ArgDoc, CommandDocs, KeyAccess};
use crate::ffi::keyspace::Keyspace;
use crate::ffi::refusal::Refusal;
use crate::state::stats;

/// A command's work: it reads its arguments from the call, opens keys through the keyspace
/// (one at a time) and replies through the call, or returns a refusal to reply instead.
type Handler = fn(&Call, &mut Keyspace<'_>) -> Result<(), Refusal>;

/// The function Redis calls for a command.
type EntryPoint = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// Everything Redis needs to know about one command.
struct CommandSpec {
    name: &'static CStr,
    /// Exact argument count (command name included) if positive, minimum if negative.
    arity: c_int,
    handler: Handler,
    flags: &'static CStr,
    /// ACL categories, set where the server supports them (7.2+).
    acl_categories: &'static CStr,
    /// COMMAND DOCS; its `key_access` also gives the key position: the argument after the
    /// name, or none.
    docs: CommandDocs,
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

/// Runs a handler for a Redis call: checks arity, turns refusals into error replies, and
/// stops any panic from unwinding into Redis.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be those Redis passed to the running command's entry point.
// Inlined into each entry point: the arity folds to a constant and the handler becomes a
// direct call (about 15 instructions a call, measured with callgrind).
#[inline(always)]
unsafe fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    arity: c_int,
    handler: Handler,
) -> c_int {
    // SAFETY: the arguments are exactly those Redis passed to the entry point.
    let call = unsafe { Call::new(ctx, argv, argc) };
    let arity_ok = if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    };
    if !arity_ok {
        stats::ERRORS.add(1);
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
            stats::ERRORS.add(1);
            call.reply_refusal(&refusal);
        }
        Err(_) => {
            stats::ERRORS.add(1);
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
macro_rules! commands {
    ($($entry:ident: $spec:expr,)+) => {
        $(
            /// # Safety
            /// Called by Redis only, for this command, with the call's context and arguments
            /// (`dispatch` guards the handler against panics).
            unsafe extern "C" fn $entry(
                ctx: *mut raw::RedisModuleCtx,
                argv: *mut *mut raw::RedisModuleString,
                argc: c_int,
            ) -> c_int {
                const SPEC: CommandSpec = $spec;
                // SAFETY: Redis passes the running command's own context and arguments.
                unsafe { dispatch(ctx, argv, argc, SPEC.arity, SPEC.handler) }
            }
        )+

        /// Every command with its entry point.
        const COMMANDS: &[(CommandSpec, EntryPoint)] = &[$(($spec, $entry)),+];
    };
}

const KEY: ArgDoc = ArgDoc::key("key");

commands! {
    snowflake_next_entry: CommandSpec {
        name: c"snowflake.next",
        arity: -2,
        handler: snowflake_next::next,
        // Not `fast`: the work grows with COUNT (up to 100,000 IDs).
        flags: c"write deny-oom",
        acl_categories: c"write",
        docs: CommandDocs {
            summary: c"Issues snowflake IDs (time | shard | sequence) that are unique across keys and instances and increase per key; FORMAT decimal, base32 or base62 replies strings (JavaScript keeps them whole; base32 and base62 sort like the numbers).",
            complexity: c"O(N) where N is COUNT (1 without COUNT).",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: Some(c"nondeterministic_output"),
            args: &[
                KEY,
                ArgDoc::optional_integer("count", Some(c"COUNT")),
                ArgDoc::optional_integer("shard", Some(c"SHARD")),
                ArgDoc::optional_word("format", c"FORMAT"),
            ],
        },
    },
    segment_next_entry: CommandSpec {
        name: c"segment.next",
        arity: -2,
        handler: segment_next::next,
        // O(1) whatever COUNT is: the reply is a range, never COUNT integers.
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        docs: CommandDocs {
            summary: c"Takes the next values of this instance's step-offset class above the key's integer; with COUNT, a range [first, last, step]; FORMAT decimal replies strings.",
            complexity: c"O(1).",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: Some(c"nondeterministic_output"),
            args: &[
                KEY,
                ArgDoc::optional_integer("count", Some(c"COUNT")),
                ArgDoc::optional_word("format", c"FORMAT"),
            ],
        },
    },
    decode_entry: CommandSpec {
        name: c"snowflake.decode",
        arity: -2,
        handler: decode::decode,
        flags: c"readonly fast allow-stale",
        acl_categories: c"read fast",
        docs: CommandDocs {
            summary: c"Splits a snowflake ID (an integer, or a string in FORMAT decimal, base32 or base62) into unix time, shard, sequence and the issuing instance's offset.",
            complexity: c"O(1).",
            key_access: None,
            tips: None,
            args: &[ArgDoc::integer("id"), ArgDoc::optional_word("format", c"FORMAT")],
        },
    },
    range_entry: CommandSpec {
        name: c"snowflake.range",
        arity: -3,
        handler: compose::range,
        flags: c"readonly fast allow-stale",
        acl_categories: c"read fast",
        docs: CommandDocs {
            summary: c"Returns the lowest and the highest ID whose time lies in a window of unix milliseconds (both ends included), for WHERE id BETWEEN queries.",
            complexity: c"O(1).",
            key_access: None,
            tips: None,
            args: &[
                ArgDoc::integer("from-unix-ms"),
                ArgDoc::integer("to-unix-ms"),
                ArgDoc::optional_word("format", c"FORMAT"),
            ],
        },
    },
    compose_entry: CommandSpec {
        name: c"snowflake.compose",
        arity: -4,
        handler: compose::compose,
        flags: c"readonly fast allow-stale",
        acl_categories: c"read fast",
        docs: CommandDocs {
            summary: c"Returns the ID with the given unix milliseconds, shard and sequence in this instance's layout, refusing fields outside it (for backfills and tests).",
            complexity: c"O(1).",
            key_access: None,
            tips: None,
            args: &[
                ArgDoc::integer("unix-ms"),
                ArgDoc::integer("shard"),
                ArgDoc::integer("sequence"),
                ArgDoc::optional_word("format", c"FORMAT"),
            ],
        },
    },
    identity_entry: CommandSpec {
        name: c"idgen.identity",
        arity: 1,
        handler: identity::identity,
        flags: c"readonly fast allow-stale",
        acl_categories: c"read fast",
        docs: CommandDocs {
            summary: c"Returns this node's identity (step, offset, snowflake layout, module version), so that clients can check a deployment without CONFIG.",
            complexity: c"O(1).",
            key_access: None,
            tips: None,
            args: &[],
        },
    },
    bound_entry: CommandSpec {
        name: c"snowflake.bound",
        arity: 2,
        handler: snowflake_next::bound,
        flags: c"readonly fast",
        acl_categories: c"read fast",
        docs: CommandDocs {
            summary: c"Returns a snowflake key's bound: every ID issued for the key is at most this. Nil for a missing key.",
            complexity: c"O(1).",
            key_access: Some(KeyAccess::ReadOnly),
            tips: None,
            args: &[KEY],
        },
    },
    set_bound_entry: CommandSpec {
        name: c"snowflake.setbound",
        arity: -3,
        handler: snowflake_next::set_bound,
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        docs: CommandDocs {
            summary: c"Records a snowflake key's bound (and, from replication and the AOF, its owner): how SNOWFLAKE.NEXT reaches replicas and the AOF. From clients it only moves a bound forward.",
            complexity: c"O(1).",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: None,
            args: &[KEY, ArgDoc::integer("bound"), ArgDoc::optional_integer("owner", None)],
        },
    },
    set_last_entry: CommandSpec {
        name: c"snowflake.setlast",
        arity: 3,
        handler: snowflake_next::set_bound,
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        docs: CommandDocs {
            summary: c"Deprecated name of SNOWFLAKE.SETBOUND key bound (what AOF files of idgen before 0.1.0 contain).",
            complexity: c"O(1).",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: None,
            args: &[KEY, ArgDoc::integer("id")],
        },
    },
}

/// Creates every command; logs and fails on the first that cannot be created.
pub fn register_all(ctx: &Context) -> Result<(), String> {
    for (spec, entry) in COMMANDS {
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
            .apply(command, spec.arity)
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
