//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): the source sends the slots'
//! keys to the target as AOF commands (a snowflake key as `SNOWFLAKE.SETBOUND key bound
//! owner`, a counter as `SET`), then the stream of their writes, and hands the slots over
//! at once. Valkey refuses the command while a loaded module has not declared that it
//! handles it; this module declares it, on Valkey servers that offer it, because:
//!
//! - a moved snowflake key arrives with its bound and owner, which no ID issued for it on
//!   the source passes (the source extends a bound, and replicates it, before issuing under
//!   it); the target owns the key under another incarnation, so it continues above the
//!   bound, as after any failover;
//! - a moved counter arrives with its value, above every value handed out for it; the
//!   target fences the key on its first use there, as any key first used since its start;
//! - the slot import client's commands reach modules flagged as replicated, so its
//!   `SNOWFLAKE.SETBOUND` records the owner and is not held to a client's drift rule
//!   (seen on Valkey 9.1.2: the bound arrives whole; `tests/tests/cluster.rs`);
//! - when an export completes, the source drops what it kept for the keys of those slots
//!   (which keys it has fenced since its start); the values it remembers from before a full
//!   sync are kept (`state::failback_marks`): they stay true if a key comes back;
//! - a cancelled or failed migration leaves the source's keys as they were, and the target
//!   deletes what it imported; the module keeps nothing for imported keys until they are
//!   used, which they cannot be before the slots are handed over.

use redis_module::Context;

use crate::ffi::slot_migration::{self, MigrationStep, SlotMigrationHandler};
use crate::state::reservations;
use crate::state::server_support;
use crate::state::stats;

/// Declares support for atomic slot migration where the server offers it.
pub fn declare(ctx: &Context) {
    if slot_migration::declare::<FollowMigrations>(ctx) {
        server_support::set_atomic_slot_migration(true);
        ctx.log_notice("atomic slot migration (CLUSTER MIGRATESLOTS) is handled");
    }
}

/// Counts migrations, and drops what the module kept for keys that moved away.
struct FollowMigrations;

impl SlotMigrationHandler for FollowMigrations {
    fn handle(ctx: &Context, step: MigrationStep, slots: &[(u16, u16)]) {
        let what = match step {
            MigrationStep::ImportStarted => "import started",
            MigrationStep::ExportStarted => "export started",
            MigrationStep::ImportAborted => {
                "import cancelled or failed: the imported keys are dropped"
            }
            MigrationStep::ExportAborted => "export cancelled or failed: the keys stay here",
            MigrationStep::ImportCompleted => {
                stats::SLOT_IMPORTS.add(1);
                "import completed: these slots' keys continue here above their records"
            }
            MigrationStep::ExportCompleted => {
                stats::SLOT_EXPORTS.add(1);
                let forgotten = reservations::forget_slots(slots);
                ctx.log_notice(&format!(
                    "slot migration: forgot the fence of {forgotten} keys that moved away"
                ));
                "export completed: these slots' keys now live on the target"
            }
        };
        ctx.log_notice(&format!("slot migration of slots {slots:?}: {what}"));
    }
}
