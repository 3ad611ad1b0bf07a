//! Keeps what the module holds per segment key (`state::reservations`) no longer than the
//! key, and its reservation no longer than the key's value: when a key is deleted, expires or
//! is evicted, the module forgets it (a key that comes back is fenced again on its next use,
//! which only skips values; without this, a service with per-day or per-tenant counters grew
//! the table by one entry per key, for the life of the process); when a key is restored,
//! copied onto, or given a TTL, its reservation is voided, so its next call continues above
//! what it then holds (and, as before, leaves no TTL). A key renamed, or moved to another
//! database, takes what the module holds for it along — what it handed out, so a `SET` that
//! lowered it before the move is still caught — merged with the record of a key the rename
//! replaced. A plain write needs no event: the key then holds another value than the
//! reservation's top, which the next call sees.
//!
//! A counter deleted (`DEL`, `UNLINK`, or moved away by `MIGRATE`) is kept in
//! `state::departed` with what it handed out here; if it comes back through `RESTORE` (the
//! way back of a `MIGRATE`), its next call continues above that, should it hold less.
//!
//! A flush (`FLUSHALL`, `FLUSHDB`) fires no key events; `flush_sweep` checks after it which
//! of the remembered keys are really gone.

use std::ffi::CStr;

use redis_module::Context;

use crate::ffi::keyspace_events::{self, KeyEvent, KeyEventHandler};
use crate::state::departed;
use crate::state::failback_marks;
use crate::state::instance;
use crate::state::reservations;
use crate::state::stats;

/// Generic events after which the key of this name is gone from its database.
const KEY_GONE: [&CStr; 2] = [c"del", c"expired"];

/// Generic events after which the key of this name holds a value this instance did not write
/// (possibly the same number) or has a TTL.
const KEY_REPLACED: [&CStr; 3] = [c"restore", c"copy_to", c"expire"];

/// Generic events of a key leaving its name (`RENAME`, `MOVE`), each followed at once by
/// one of [`KEY_ARRIVED`] for the name it arrives under.
const KEY_LEFT: [&CStr; 2] = [c"rename_from", c"move_from"];

/// Generic events of a key arriving under a name (`RENAME`, `MOVE`).
const KEY_ARRIVED: [&CStr; 2] = [c"rename_to", c"move_to"];

/// Forgets or voids what the module holds for a key deleted or replaced behind it.
struct ForgetReplacedKeys;

impl KeyEventHandler for ForgetReplacedKeys {
    const WHAT: &'static str = "following a key deleted or replaced behind the module";

    fn handle(event: &KeyEvent<'_>) {
        let gone = KEY_GONE.contains(&event.name) || event.name == c"evicted";
        if gone {
            let Some(top) = reservations::forget(event.db, event.key) else {
                return;
            };
            // `MIGRATE` moves a key away with `del`: kept in case it comes back. Not an
            // expired or evicted one: eviction frees memory, which the record would take
            // back under the same pressure (a counter that expires loses its value anyway).
            if event.name == c"del" {
                departed::record(event.db, event.key, top);
            }
            // A counter that expires loses its value (`events::config_warnings` says so).
            if event.name == c"expired" {
                stats::SEGMENT_COUNTERS_EXPIRED.add(1);
            }
        } else if KEY_LEFT.contains(&event.name) {
            reservations::carry_from(event.db, event.key);
        } else if KEY_ARRIVED.contains(&event.name) {
            reservations::carry_to(event.db, event.key, instance::config().identity.step);
        } else if KEY_REPLACED.contains(&event.name) {
            if event.name == c"restore" {
                // A counter back from a `MIGRATE` away continues above what it handed out
                // here, if it comes back lower.
                if let Some(top) = departed::take(event.db, event.key) {
                    failback_marks::remember(event.db, event.key, top);
                }
            }
            let held = reservations::void(event.db, event.key);
            if held && event.name == c"expire" {
                stats::SEGMENT_TTLS_SEEN.add(1);
            }
        }
    }
}

/// Subscribes to the events that remove or replace keys.
pub fn subscribe(ctx: &Context) -> Result<(), String> {
    keyspace_events::subscribe::<ForgetReplacedKeys>(ctx)
}
