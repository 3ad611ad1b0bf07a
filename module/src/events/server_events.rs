//! Server events the module follows: a flush about to erase a replica's data (remember this
//! instance's segment values first), any flush (void the segment reservations of its
//! databases; at its end, check which held keys it removed, `flush_sweep`), `SWAPDB` (the
//! records follow the data), and role changes (void every reservation; on promotion, a new
//! incarnation).

use idgen_core::parse_redis_integer;
use redis_module::Context;

use crate::events::flush_sweep;
use crate::events::identity_exchange;
use crate::ffi::key_scan::EventContext;
use crate::ffi::server_events::{self, FlushPhase, ServerEventHandlers};
use crate::state::failback_marks;
use crate::state::instance;
use crate::state::leases;
use crate::state::replica_role;
use crate::state::reservations;
use crate::state::stats;

/// The most digits (with a sign) an `i64` has: longer strings cannot be counters.
const MAX_INTEGER_LEN: usize = 20;

/// The module's handlers of server events.
struct Handlers;

impl ServerEventHandlers for Handlers {
    fn role_changed(ctx: &Context, now_master: bool) {
        // Either way the data may change under the reservations (a sync as a replica, other
        // masters' writes before a promotion): the next call of each key continues above
        // what the key holds.
        reservations::void_all(-1);
        replica_role::set_replica(!now_master);
        if !now_master {
            return;
        }
        stats::PROMOTIONS.add(1);
        // Keys recorded before the promotion (by the old master, or by this instance in an
        // earlier term) are continued above their bound.
        instance::new_incarnation();
        identity_exchange::promoted(ctx);
        // Grants and renewals the old master made may not have reached this node.
        leases::fence_all();
        ctx.log_notice(&format!(
            "promoted to master: snowflake IDs and segment values continue from this \
             instance's own offset; {} segment keys continue above values this instance \
             handed out before a full sync replaced its data",
            failback_marks::len()
        ));
    }

    fn flush(ctx: &Context, event: &EventContext, phase: FlushPhase, db: i32) {
        if phase == FlushPhase::End {
            flush_sweep::schedule(ctx, db);
            return;
        }
        reservations::void_all(db);
        // A replica's data is flushed when a full sync from its master begins (or the
        // master's FLUSHALL arrives); a master's only by its own users' FLUSHALL/FLUSHDB,
        // which mean what they say.
        if event.is_replica() {
            remember_own_values(ctx, event);
        }
    }

    fn swapdb(first: i32, second: i32) {
        reservations::swap_dbs(first, second);
    }
}

/// Remembers every string key holding an integer of this instance's residue class: a
/// value only this instance can have handed out, which the flush would erase.
fn remember_own_values(context: &Context, event: &EventContext) {
    let identity = instance::config().identity;
    let before = failback_marks::len();
    // The last top this instance wrote into each key it used: what it may have handed out,
    // even where an operator's SET has since replaced it in the data.
    for (db, key, top) in reservations::held(-1) {
        failback_marks::remember(db, key.as_slice(), top);
    }
    let complete = event.for_each_string(MAX_INTEGER_LEN, |db, key, value| {
        if let Some(value) = parse_redis_integer(value).filter(|&v| identity.owns(v)) {
            failback_marks::remember(db, key, value);
        }
    });
    let taken = failback_marks::len().saturating_sub(before);
    stats::SEGMENT_MARKS_TAKEN.add(taken as u64);
    if !complete {
        context.log_warning(
            "idgen could not finish remembering this instance's segment values before the \
             flush (a bug: please report it with this log); segment keys keep the start fence",
        );
    }
    if taken > 0 {
        context.log_notice(&format!(
            "a full sync replaces this replica's data: remembered {taken} segment keys holding \
             values this instance may have handed out, so it never hands them out again if \
             promoted"
        ));
    }
}

/// Subscribes to role changes, flushes and `SWAPDB`.
pub fn subscribe(ctx: &Context) -> Result<(), String> {
    server_events::subscribe::<Handlers>(ctx)
}
