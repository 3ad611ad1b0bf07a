//! After a flush, forgets the segment keys held since the start (`state::reservations`) that the
//! flush really removed.
//!
//! The server's flush event fires for `FLUSHALL` and `FLUSHDB`, and also for `DEBUG RELOAD`
//! and a replica's full sync, after which the keys come back — and a reload is not a start,
//! so they must not be fenced again. The event therefore only schedules a check, run by a
//! timer on a later turn of the event loop (after a `DEBUG RELOAD` has loaded the data again,
//! and not while a full sync is still loading), which forgets each remembered key of the
//! flushed databases that no longer exists. Forgetting one too many is safe (the key is
//! fenced again on its next use, which only skips values); keeping one costs its name.

use std::time::Duration;

use redis_module::{raw, Context, ContextFlags};

use crate::ffi::databases::in_database;
use crate::ffi::guard;
use crate::state::reservations;

/// How soon after the flush the check runs, and how long it waits while data loads.
const SWEEP_AFTER: Duration = Duration::from_millis(10);
const WHILE_LOADING: Duration = Duration::from_millis(100);

/// Schedules the check for database `db` (`-1`: every database), flushed just now.
pub fn schedule(ctx: &Context, db: i32) {
    ctx.create_timer(SWEEP_AFTER, sweep, db);
}

/// The timer's callback, under the panic guard (redis-module's timer trampoline has none).
fn sweep(ctx: &Context, db: i32) {
    guard::or_log("forgetting the keys a flush removed", (), || {
        let flags = ctx.get_flags();
        if flags.intersects(ContextFlags::LOADING | ContextFlags::ASYNC_LOADING) {
            ctx.create_timer(WHILE_LOADING, sweep, db);
            return;
        }
        let keys = reservations::held(db);
        if keys.is_empty() {
            return;
        }
        let mut forgotten = 0;
        for (key_db, key, _top) in keys {
            let name = ctx.create_string(key.clone());
            // Opened for reading only; closed at once. A key that expired meanwhile is
            // removed by the lookup, and its `expired` event forgets it too.
            let gone = in_database(ctx, key_db, || {
                ctx.open_key(&name).key_type() == raw::KeyType::Empty
            });
            if gone {
                reservations::forget(key_db, &key);
                forgotten += 1;
            }
        }
        if forgotten > 0 {
            ctx.log_notice(&format!(
                "a flush removed {forgotten} segment keys: idgen forgot that it fenced them"
            ));
        }
    });
}
