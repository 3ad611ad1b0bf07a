//! What the running server offers that the module uses when it is there (`INFO idgen`).

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this server migrates slots atomically and the module declared that it handles it.
static ATOMIC_SLOT_MIGRATION: AtomicBool = AtomicBool::new(false);

/// Records whether atomic slot migration is handled here.
pub fn set_atomic_slot_migration(handled: bool) {
    ATOMIC_SLOT_MIGRATION.store(handled, Ordering::Relaxed);
}

/// Whether atomic slot migration is handled here.
pub fn atomic_slot_migration() -> bool {
    ATOMIC_SLOT_MIGRATION.load(Ordering::Relaxed)
}
