//! Clients known to have a network connection, so that a snowflake call from one need not
//! ask Redis whether it runs inside a script.
//!
//! Inside a Lua script or function an integer reply becomes a Lua double, so IDs are
//! answered as strings there (`Call::reply_id`). The only way the module API says whether
//! a call runs in a script is `RedisModule_GetContextFlags`, which costs a
//! noticeable share of a whole `SNOWFLAKE.NEXT` request (docs/performance.md). But whether a call can run in a script
//! follows from its client:
//!
//! - A script's commands run on the scripting engine's own client (Redis and Valkey create
//!   it without a connection), never on the client that sent `EVAL` or `FCALL`; a command
//!   a module sends with `RedisModule_Call` runs on a temporary client without one too.
//! - A client with a connection never runs a command while a script runs: a script blocks
//!   the server, and while a slow one runs, only commands flagged `allow-busy` (none of
//!   idgen's) are let through.
//! - A client ID is given once in a process's life and never reused, and a client's
//!   connection is set when it is created.
//!
//! So once a client ID is known to have a connection, every later call from it is outside
//! any script. `RedisModule_GetClientInfoById` finds only clients with a connection (the
//! others are not in the server's client index); it is asked once per client, on the first
//! call not answered here.
//!
//! The table is direct-mapped on the ID (32 KiB): connections whose IDs differ by less than
//! 4,096 (IDs are handed out in sequence) are each remembered; two whose IDs are equal
//! modulo 4,096 may evict each other, which costs the flags and the index lookup again on
//! their calls, never a wrong answer — an entry holds a whole ID and is only ever compared
//! with the asking call's own ID.

use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 4096;

/// The IDs known to have a connection; 0 (no client has ID 0) marks an empty slot.
static KNOWN: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

fn slot(client_id: u64) -> &'static AtomicU64 {
    &KNOWN[client_id as usize % SLOTS]
}

/// Whether `client_id` is known to have a connection.
pub fn is_known(client_id: u64) -> bool {
    client_id != 0 && slot(client_id).load(Ordering::Relaxed) == client_id
}

/// Records that `client_id` has a connection (asked of the server by the caller).
pub fn remember(client_id: u64) {
    if client_id != 0 {
        slot(client_id).store(client_id, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_client_is_known_and_no_other() {
        remember(1_000_003);
        assert!(is_known(1_000_003));
        // Same slot, another client: not known, and knowing it evicts the first.
        let same_slot = 1_000_003 + SLOTS as u64;
        assert!(!is_known(same_slot));
        remember(same_slot);
        assert!(is_known(same_slot));
        assert!(!is_known(1_000_003));
    }

    #[test]
    fn id_zero_is_never_known() {
        remember(0);
        assert!(!is_known(0));
    }
}
