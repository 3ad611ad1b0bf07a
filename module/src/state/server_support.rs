//! What the running server offers that the module uses when it is there (`INFO idgen`).

use std::sync::atomic::{AtomicU8, Ordering};

/// The server's own atomic slot migration the module follows: 0 none, 1 Valkey 9's, 2
/// Redis 8.4+'s.
static ATOMIC_SLOT_MIGRATION: AtomicU8 = AtomicU8::new(0);

/// The server's atomic slot migration, as the module follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicSlotMigration {
    /// The server has none (Redis before 8.4, Valkey 8): slots move with `MIGRATE`.
    None,
    /// Valkey 9's `CLUSTER MIGRATESLOTS`, which the module declared it handles.
    Valkey,
    /// Redis 8.4+'s `CLUSTER MIGRATION`, whose events the module follows.
    Redis,
}

/// Records which atomic slot migration is handled here.
pub fn set_atomic_slot_migration(handled: AtomicSlotMigration) {
    let code = match handled {
        AtomicSlotMigration::None => 0,
        AtomicSlotMigration::Valkey => 1,
        AtomicSlotMigration::Redis => 2,
    };
    ATOMIC_SLOT_MIGRATION.store(code, Ordering::Relaxed);
}

/// Which atomic slot migration is handled here.
pub fn atomic_slot_migration() -> AtomicSlotMigration {
    match ATOMIC_SLOT_MIGRATION.load(Ordering::Relaxed) {
        1 => AtomicSlotMigration::Valkey,
        2 => AtomicSlotMigration::Redis,
        _ => AtomicSlotMigration::None,
    }
}
