//! Registers the commands with Redis: entry points, flags, key positions, COMMAND DOCS and
//! ACL categories.

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, Context};

use crate::command_docs::{ArgDoc, CommandDocs, KeyAccess};
use crate::ffi::{Call, Refusal};
use crate::{cmd_compose, cmd_decode, cmd_identity, cmd_segment, cmd_snowflake, counters};

type Handler = fn(&Call) -> Result<(), Refusal>;

/// Everything Redis needs to know about one command.
struct CommandSpec {
    name: &'static CStr,
    entry: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut *mut raw::RedisModuleString,
        c_int,
    ) -> c_int,
    flags: &'static CStr,
    /// `(first, last, step)` key positions; `(0, 0, 0)` for a command without keys.
    keys: (c_int, c_int, c_int),
    /// ACL categories, set where the server supports them (7.2+).
    acl_categories: &'static CStr,
    docs: CommandDocs,
}

/// Runs a handler for a Redis call: checks arity, turns refusals into error replies, and
/// stops any panic from unwinding into Redis.
fn dispatch(
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
        counters::ERRORS.add(1);
        call.reply_wrong_arity();
        return raw::REDISMODULE_OK as c_int;
    }
    match catch_unwind(AssertUnwindSafe(|| handler(&call))) {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => {
            counters::ERRORS.add(1);
            call.reply_refusal(&refusal);
        }
        Err(_) => {
            counters::ERRORS.add(1);
            call.reply_refusal(&Refusal::new(
                "ERR",
                "idgen hit an internal error (a bug: please report it with the server log); \
                 the server keeps running",
            ));
        }
    }
    raw::REDISMODULE_OK as c_int
}

macro_rules! entry_point {
    ($name:ident, $arity:expr, $handler:path) => {
        /// # Safety
        /// Called by Redis only, for this command, with the call's context and arguments
        /// (`dispatch` guards the handler against panics).
        unsafe extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch(ctx, argv, argc, $arity, $handler)
        }
    };
}

const SNOWFLAKE_NEXT_ARITY: c_int = -2;
const SEGMENT_NEXT_ARITY: c_int = -2;
const DECODE_ARITY: c_int = -2;
const RANGE_ARITY: c_int = -3;
const COMPOSE_ARITY: c_int = -4;
const IDENTITY_ARITY: c_int = 1;
const BOUND_ARITY: c_int = 2;
const SETBOUND_ARITY: c_int = -3;
const SETLAST_ARITY: c_int = 3;

entry_point!(
    snowflake_next_entry,
    SNOWFLAKE_NEXT_ARITY,
    cmd_snowflake::next
);
entry_point!(segment_next_entry, SEGMENT_NEXT_ARITY, cmd_segment::next);
entry_point!(decode_entry, DECODE_ARITY, cmd_decode::decode);
entry_point!(range_entry, RANGE_ARITY, cmd_compose::range);
entry_point!(compose_entry, COMPOSE_ARITY, cmd_compose::compose);
entry_point!(identity_entry, IDENTITY_ARITY, cmd_identity::identity);
entry_point!(bound_entry, BOUND_ARITY, cmd_snowflake::bound);
entry_point!(set_bound_entry, SETBOUND_ARITY, cmd_snowflake::set_bound);
entry_point!(set_last_entry, SETLAST_ARITY, cmd_snowflake::set_bound);

const KEY: ArgDoc = ArgDoc::key("key");

fn commands() -> [CommandSpec; 9] {
    [
        CommandSpec {
            name: c"snowflake.next",
            entry: snowflake_next_entry,
            // Not `fast`: the work grows with COUNT (up to 100,000 IDs).
            flags: c"write deny-oom",
            keys: (1, 1, 1),
            acl_categories: c"write",
            docs: CommandDocs {
                summary: c"Issues snowflake IDs (time | shard | sequence) that are unique across keys and instances and increase per key; FORMAT decimal, base32 or base62 replies strings (JavaScript keeps them whole; base32 and base62 sort like the numbers).",
                complexity: c"O(N) where N is COUNT (1 without COUNT).",
                arity: SNOWFLAKE_NEXT_ARITY,
                key_access: Some(KeyAccess::ReadWriteUpdate),
                tips: Some(c"nondeterministic_output"),
                args: vec![
                    KEY,
                    ArgDoc::optional_integer("count", Some(c"COUNT")),
                    ArgDoc::optional_integer("shard", Some(c"SHARD")),
                    ArgDoc::optional_word("format", c"FORMAT"),
                ],
            },
        },
        CommandSpec {
            name: c"segment.next",
            entry: segment_next_entry,
            // O(1) whatever COUNT is: the reply is a range, never COUNT integers.
            flags: c"write deny-oom fast",
            keys: (1, 1, 1),
            acl_categories: c"write fast",
            docs: CommandDocs {
                summary: c"Takes the next values of this instance's step-offset class above the key's integer; with COUNT, a range [first, last, step]; FORMAT decimal replies strings.",
                complexity: c"O(1).",
                arity: SEGMENT_NEXT_ARITY,
                key_access: Some(KeyAccess::ReadWriteUpdate),
                tips: Some(c"nondeterministic_output"),
                args: vec![
                    KEY,
                    ArgDoc::optional_integer("count", Some(c"COUNT")),
                    ArgDoc::optional_word("format", c"FORMAT"),
                ],
            },
        },
        CommandSpec {
            name: c"snowflake.decode",
            entry: decode_entry,
            flags: c"readonly fast allow-stale",
            keys: (0, 0, 0),
            acl_categories: c"read fast",
            docs: CommandDocs {
                summary: c"Splits a snowflake ID (an integer, or a string in FORMAT decimal, base32 or base62) into unix time, shard, sequence and the issuing instance's offset.",
                complexity: c"O(1).",
                arity: DECODE_ARITY,
                key_access: None,
                tips: None,
                args: vec![ArgDoc::integer("id"), ArgDoc::optional_word("format", c"FORMAT")],
            },
        },
        CommandSpec {
            name: c"snowflake.range",
            entry: range_entry,
            flags: c"readonly fast allow-stale",
            keys: (0, 0, 0),
            acl_categories: c"read fast",
            docs: CommandDocs {
                summary: c"Returns the lowest and the highest ID whose time lies in a window of unix milliseconds (both ends included), for WHERE id BETWEEN queries.",
                complexity: c"O(1).",
                arity: RANGE_ARITY,
                key_access: None,
                tips: None,
                args: vec![
                    ArgDoc::integer("from-unix-ms"),
                    ArgDoc::integer("to-unix-ms"),
                    ArgDoc::optional_word("format", c"FORMAT"),
                ],
            },
        },
        CommandSpec {
            name: c"snowflake.compose",
            entry: compose_entry,
            flags: c"readonly fast allow-stale",
            keys: (0, 0, 0),
            acl_categories: c"read fast",
            docs: CommandDocs {
                summary: c"Returns the ID with the given unix milliseconds, shard and sequence in this instance's layout, refusing fields outside it (for backfills and tests).",
                complexity: c"O(1).",
                arity: COMPOSE_ARITY,
                key_access: None,
                tips: None,
                args: vec![
                    ArgDoc::integer("unix-ms"),
                    ArgDoc::integer("shard"),
                    ArgDoc::integer("sequence"),
                    ArgDoc::optional_word("format", c"FORMAT"),
                ],
            },
        },
        CommandSpec {
            name: c"idgen.identity",
            entry: identity_entry,
            flags: c"readonly fast allow-stale",
            keys: (0, 0, 0),
            acl_categories: c"read fast",
            docs: CommandDocs {
                summary: c"Returns this node's identity (step, offset, snowflake layout, module version), so that clients can check a deployment without CONFIG.",
                complexity: c"O(1).",
                arity: IDENTITY_ARITY,
                key_access: None,
                tips: None,
                args: vec![],
            },
        },
        CommandSpec {
            name: c"snowflake.bound",
            entry: bound_entry,
            flags: c"readonly fast",
            keys: (1, 1, 1),
            acl_categories: c"read fast",
            docs: CommandDocs {
                summary: c"Returns a snowflake key's bound: every ID issued for the key is at most this. Nil for a missing key.",
                complexity: c"O(1).",
                arity: BOUND_ARITY,
                key_access: Some(KeyAccess::ReadOnly),
                tips: None,
                args: vec![KEY],
            },
        },
        CommandSpec {
            name: c"snowflake.setbound",
            entry: set_bound_entry,
            flags: c"write deny-oom fast",
            keys: (1, 1, 1),
            acl_categories: c"write fast",
            docs: CommandDocs {
                summary: c"Records a snowflake key's bound (and, from replication and the AOF, its owner): how SNOWFLAKE.NEXT reaches replicas and the AOF. From clients it only moves a bound forward.",
                complexity: c"O(1).",
                arity: SETBOUND_ARITY,
                key_access: Some(KeyAccess::ReadWriteUpdate),
                tips: None,
                args: vec![KEY, ArgDoc::integer("bound"), ArgDoc::optional_integer("owner", None)],
            },
        },
        CommandSpec {
            name: c"snowflake.setlast",
            entry: set_last_entry,
            flags: c"write deny-oom fast",
            keys: (1, 1, 1),
            acl_categories: c"write fast",
            docs: CommandDocs {
                summary: c"Deprecated name of SNOWFLAKE.SETBOUND key bound (what AOF files of idgen before 0.1.0 contain).",
                complexity: c"O(1).",
                arity: SETLAST_ARITY,
                key_access: Some(KeyAccess::ReadWriteUpdate),
                tips: None,
                args: vec![KEY, ArgDoc::integer("id")],
            },
        },
    ]
}

/// Creates every command; logs and fails on the first that cannot be created.
pub fn register_all(ctx: &Context) -> Result<(), String> {
    for spec in commands() {
        let (first, last, step) = spec.keys;
        let name = spec.name.to_string_lossy();
        // SAFETY: ctx is the loading context; the strings are static.
        let created = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.ctx,
                spec.name.as_ptr(),
                Some(spec.entry),
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
            .apply(command)
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
