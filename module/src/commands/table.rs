//! The commands: each declared once in this table (name, arity, entry point, flags, key
//! spec, ACL categories, COMMAND DOCS), and registered with Redis from it.

use redis_module::Context;

use crate::commands::compose;
use crate::commands::decode;
use crate::commands::identity;
use crate::commands::lease;
use crate::commands::segment_next;
use crate::commands::snowflake_bound;
use crate::commands::snowflake_next;
use crate::ffi::command_docs::{ArgDoc, CommandDocs, KeyAccess};
use crate::ffi::command_table::{self, command_table, CommandSpec};
use crate::state::stats;
use crate::state::version;

/// Counts an error reply (`INFO idgen`'s `errors`).
fn count_error() {
    stats::ERRORS.add(1);
}

const KEY: ArgDoc = ArgDoc::key("key");

command_table! {
    on_error: count_error;
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
        handler: snowflake_bound::bound,
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
        handler: snowflake_bound::set_bound,
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
        handler: snowflake_bound::set_bound,
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
    // Leased worker ids (docs/leases.md).
    lease_acquire_entry: CommandSpec {
        name: c"lease.acquire",
        arity: -3,
        handler: lease::acquire,
        // Not `fast`: it looks through the worker ids of the instance (up to the band).
        flags: c"write deny-oom",
        acl_categories: c"write",
        docs: CommandDocs {
            summary: c"Leases a free worker id of the pool to a holder for a time window (DURATION ms, at most idgen.lease-max-ms): the holder may issue snowflake IDs with that worker id as shard and a time inside the window. Replies the worker id, the window and the layout.",
            complexity: c"O(N) where N is the number of worker ids this instance may lease.",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: Some(c"nondeterministic_output"),
            args: &[
                ArgDoc::key("pool"),
                ArgDoc::string("holder"),
                ArgDoc::optional_integer("duration", Some(c"DURATION")),
            ],
        },
    },
    lease_renew_entry: CommandSpec {
        name: c"lease.renew",
        arity: -4,
        handler: lease::renew,
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        docs: CommandDocs {
            summary: c"Extends the holder's window of a worker id to DURATION ms from now (never shortening it); refused once the window ended or after a restart or failover fenced it.",
            complexity: c"O(log N) where N is the number of worker ids in the pool.",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: Some(c"nondeterministic_output"),
            args: &[
                ArgDoc::key("pool"),
                ArgDoc::integer("worker-id"),
                ArgDoc::string("holder"),
                ArgDoc::optional_integer("duration", Some(c"DURATION")),
            ],
        },
    },
    lease_release_entry: CommandSpec {
        name: c"lease.release",
        arity: 4,
        handler: lease::release,
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        docs: CommandDocs {
            summary: c"Frees the holder's worker id; its next holder still starts after the window granted.",
            complexity: c"O(log N) where N is the number of worker ids in the pool.",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: None,
            args: &[
                ArgDoc::key("pool"),
                ArgDoc::integer("worker-id"),
                ArgDoc::string("holder"),
            ],
        },
    },
    lease_list_entry: CommandSpec {
        name: c"lease.list",
        arity: 2,
        handler: lease::list,
        flags: c"readonly",
        acl_categories: c"read",
        docs: CommandDocs {
            summary: c"Lists the pool's worker ids: holder, state (held, ended, released), window, fence and last renewal, in unix ms.",
            complexity: c"O(N) where N is the number of worker ids in the pool.",
            key_access: Some(KeyAccess::ReadOnly),
            tips: Some(c"nondeterministic_output"),
            args: &[ArgDoc::key("pool")],
        },
    },
    lease_set_worker_entry: CommandSpec {
        name: c"lease.setworker",
        arity: 8,
        handler: lease::set_worker,
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        docs: CommandDocs {
            summary: c"Records one worker id of a pool: how the LEASE commands reach replicas and the AOF. Refused from clients.",
            complexity: c"O(log N) where N is the number of worker ids in the pool.",
            key_access: Some(KeyAccess::ReadWriteUpdate),
            tips: None,
            args: &[
                ArgDoc::key("pool"),
                ArgDoc::integer("worker-id"),
                ArgDoc::integer("start"),
                ArgDoc::integer("end"),
                ArgDoc::integer("fence"),
                ArgDoc::integer("renewed"),
                ArgDoc::string("holder"),
            ],
        },
    },
}

/// Creates every command; fails on the first that cannot be created.
pub fn register_all(ctx: &Context) -> Result<(), String> {
    command_table::register_all(ctx, COMMANDS, version::SINCE)
}
