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
    snowflake_next_entry: SNOWFLAKE_NEXT => snowflake_next::next,
    segment_next_entry: SEGMENT_NEXT => segment_next::next,
    decode_entry: SNOWFLAKE_DECODE => |call, _| decode::decode(call),
    range_entry: SNOWFLAKE_RANGE => |call, _| compose::range(call),
    compose_entry: SNOWFLAKE_COMPOSE => |call, _| compose::compose(call),
    identity_entry: IDGEN_IDENTITY => |call, _| identity::identity(call),
    bound_entry: SNOWFLAKE_BOUND => snowflake_bound::bound,
    set_bound_entry: SNOWFLAKE_SETBOUND => snowflake_bound::set_bound,
    set_last_entry: SNOWFLAKE_SETLAST => snowflake_bound::set_bound,
    lease_acquire_entry: LEASE_ACQUIRE => lease::acquire,
    lease_renew_entry: LEASE_RENEW => lease::renew,
    lease_release_entry: LEASE_RELEASE => lease::release,
    lease_list_entry: LEASE_LIST => lease::list,
    lease_set_worker_entry: LEASE_SETWORKER => lease::set_worker,
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
