//! The commands: each declaration (`idgen_core::commands`) with its handler, registered
//! with Redis from this table.

use idgen_core::commands::*;
use redis_module::Context;

use crate::commands::snowflake_next;
use crate::commands::{compose, decode, identity, lease, segment_next, snowflake_bound};
use crate::ffi::command_table::{self, command_table};
use crate::state::stats;
use crate::state::version;

/// Counts an error reply (`INFO idgen`'s `errors`).
fn count_error() {
    stats::ERRORS.add(1);
}

command_table! {
    on_error: count_error;
    snowflake_next_entry: SNOWFLAKE_NEXT => |call, keys| snowflake_next::next(call, keys),
    segment_next_entry: SEGMENT_NEXT => |call, keys| segment_next::next(call, keys),
    decode_entry: SNOWFLAKE_DECODE => |call, _| decode::decode(call),
    range_entry: SNOWFLAKE_RANGE => |call, _| compose::range(call),
    compose_entry: SNOWFLAKE_COMPOSE => |call, _| compose::compose(call),
    identity_entry: IDGEN_IDENTITY => |call, _| identity::identity(call),
    bound_entry: SNOWFLAKE_BOUND => |call, keys| snowflake_bound::bound(call, keys),
    set_bound_entry: SNOWFLAKE_SETBOUND => |call, keys| snowflake_bound::set_bound(call, keys),
    set_last_entry: SNOWFLAKE_SETLAST => |call, keys| snowflake_bound::set_bound(call, keys),
    lease_acquire_entry: LEASE_ACQUIRE => |call, keys| lease::acquire(call, keys),
    lease_renew_entry: LEASE_RENEW => |call, keys| lease::renew(call, keys),
    lease_release_entry: LEASE_RELEASE => |call, keys| lease::release(call, keys),
    lease_list_entry: LEASE_LIST => |call, keys| lease::list(call, keys),
    lease_set_worker_entry: LEASE_SETWORKER => |call, keys| lease::set_worker(call, keys),
}

/// Creates every command; fails on the first that cannot be created.
pub fn register_all(ctx: &Context) -> Result<(), String> {
    command_table::register_all(ctx, COMMANDS, version::SINCE)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_declared_command_has_a_handler_once() {
        let registered: Vec<&str> = super::COMMANDS.iter().map(|(c, _)| c.name()).collect();
        let declared: Vec<&str> = idgen_core::commands::COMMANDS
            .iter()
            .map(|c| c.name())
            .collect();
        assert_eq!(registered, declared);
    }
}
