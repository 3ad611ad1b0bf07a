//! Atomic slot migration, as each server does it, and what the module does at each step.
//!
//! **Valkey 9** (`CLUSTER MIGRATESLOTS`): the source sends the slots' keys to the target as
//! AOF commands (a snowflake key as `SNOWFLAKE.SETBOUND key bound owner`, a counter as
//! `SET`), then the stream of their writes, and hands the slots over at once. Valkey refuses
//! the command while a loaded module has not declared that it handles it; this module
//! declares it, on Valkey servers that offer it.
//!
//! **Redis 8.4+** (`CLUSTER MIGRATION IMPORT`, sent to the target): the target pulls the
//! slots' keys (a snowflake key as `RESTORE … ABSTTL`, read back through the type's
//! `rdb_load`; a counter as a plain string), then the source's replication stream filtered
//! to those slots, and takes the slots over; the target hides the keys until then. The
//! source then *trims* the slots: in a background thread unless some module asked for an
//! event per trimmed key. This module asks for none — it has nothing to do per key that it
//! cannot do per slot — so the values of moved snowflake keys are freed off the main
//! thread: the type's free callback only drops the key's own `Box` (no shared state, and
//! the allocator is the server's, which its background threads use too).
//!
//! On both, the module can let keys move as they are, because:
//!
//! - a moved snowflake key arrives with its bound and owner, which no ID issued for it on
//!   the source passes (the source extends a bound, and replicates it, before issuing under
//!   it — and the migration forwards that write); the target owns the key under another
//!   incarnation, so it continues above the bound, as after any failover;
//! - a moved counter arrives with its value, a bound on every value handed out for it (the
//!   source writes a reservation's top before handing out values under it); the target
//!   fences the key on its first use there, as any key first used since its start, and
//!   hands out values of its own residue class only;
//! - nothing the module keeps beside the keys needs to travel: the snowflake position is
//!   the instance's (the target's IDs are told apart by its offset), and so are remembered
//!   values (`state::failback_marks`), so nothing is propagated with the slots (Redis's
//!   subevent "module propagate" is left alone, and no keyless command is replicated, which
//!   Redis would drop from the slot stream);
//! - when an export starts, the source looks at the counters it holds in those slots: one
//!   that a `SET` lowered below what was handed out here (and has not been called since, so
//!   the key does not say so) is remembered (`state::failback_marks`): if the key ever
//!   comes back, it continues above that value instead of repeating values from the
//!   lowered one plus the fence; the target, in its own residue class, cannot repeat them;
//! - when an export completes, the source drops what it kept for the keys of those slots
//!   (which keys it has fenced since its start, their reservations); the values it
//!   remembers (from before a full sync, or lowered counters) are kept: they stay true if
//!   a key comes back;
//! - a cancelled or failed migration leaves the source's keys as they were, and the target
//!   deletes what it imported (Redis: a trim); the module keeps nothing for imported keys
//!   until they are used, which they cannot be before the slots are handed over; a trim
//!   drops anything still kept for the slots, which this node no longer serves.

use idgen_core::parse_redis_integer;
use redis_module::Context;

use crate::ffi::databases::in_database;

use crate::ffi::slot_migration::{self, Declared, MigrationStep, SlotMigrationHandler, TrimStep};
use crate::state::failback_marks;
use crate::state::reservations;
use crate::state::server_support::{self, AtomicSlotMigration};
use crate::state::stats;

/// Follows the server's atomic slot migration where it has one.
pub fn declare(ctx: &Context) {
    match slot_migration::declare::<FollowMigrations>(ctx) {
        Some(Declared::Valkey) => {
            server_support::set_atomic_slot_migration(AtomicSlotMigration::Valkey);
            ctx.log_notice("atomic slot migration (CLUSTER MIGRATESLOTS) is handled");
        }
        Some(Declared::Redis) => {
            server_support::set_atomic_slot_migration(AtomicSlotMigration::Redis);
            ctx.log_notice("atomic slot migration (CLUSTER MIGRATION) is handled");
        }
        None => {}
    }
}

/// Counts migrations, and drops what the module kept for keys that moved away.
struct FollowMigrations;

/// Forgets the keys of `slots` and logs how many.
fn forget(ctx: &Context, slots: &[(u16, u16)]) {
    let forgotten = reservations::forget_slots(slots);
    if forgotten > 0 {
        ctx.log_notice(&format!(
            "slot migration: forgot the fence of {forgotten} keys that moved away"
        ));
    }
}

/// Remembers the counters of `slots` that hold less than their reservation's top here (a
/// `SET` lowered them since their last call), so that a counter that comes back continues
/// above what it handed out here.
fn remember_lowered(ctx: &Context, slots: &[(u16, u16)]) {
    let mut remembered = 0;
    for (db, key, top) in reservations::held_in_slots(slots) {
        let name = ctx.create_string(key.clone());
        let held = in_database(ctx, db, || {
            let key = ctx.open_key(&name);
            key.read().ok().flatten().and_then(parse_redis_integer)
        });
        if held.is_some_and(|held| held < top) {
            failback_marks::remember(db, &key, top);
            remembered += 1;
        }
    }
    if remembered > 0 {
        ctx.log_notice(&format!(
            "slot migration: {remembered} counters leaving were lowered by a SET; if they \
             come back they continue above what was handed out here"
        ));
    }
}

impl SlotMigrationHandler for FollowMigrations {
    fn handle(ctx: &Context, step: MigrationStep, slots: &[(u16, u16)]) {
        let what = match step {
            MigrationStep::ImportStarted => {
                stats::SLOT_IMPORTS_STARTED.add(1);
                "import started"
            }
            MigrationStep::ExportStarted => {
                stats::SLOT_EXPORTS_STARTED.add(1);
                remember_lowered(ctx, slots);
                "export started"
            }
            MigrationStep::ImportAborted => {
                stats::SLOT_IMPORTS_FAILED.add(1);
                "import cancelled or failed: the imported keys are dropped"
            }
            MigrationStep::ExportAborted => {
                stats::SLOT_EXPORTS_FAILED.add(1);
                "export cancelled or failed: the keys stay here"
            }
            MigrationStep::ImportCompleted => {
                stats::SLOT_IMPORTS.add(1);
                "import completed: these slots' keys continue here above their records"
            }
            MigrationStep::ExportCompleted => {
                stats::SLOT_EXPORTS.add(1);
                forget(ctx, slots);
                "export completed: these slots' keys now live on the target"
            }
        };
        ctx.log_notice(&format!("slot migration of slots {slots:?}: {what}"));
    }

    fn trim(ctx: &Context, step: TrimStep, slots: &[(u16, u16)]) {
        let what = match step {
            TrimStep::Started => "trim started (key by key)",
            TrimStep::Background => "trim handed to a background thread",
            TrimStep::Completed => "trim completed",
        };
        if step != TrimStep::Completed {
            stats::SLOT_TRIMS.add(1);
            // These slots are not served here any more (they moved away, or their import
            // failed): nothing kept for their keys is of use.
            forget(ctx, slots);
        }
        ctx.log_notice(&format!("slot migration of slots {slots:?}: {what}"));
    }
}
