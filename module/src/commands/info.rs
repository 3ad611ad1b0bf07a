//! The `INFO idgen` section: identity, layout, when the layout runs out, and counters.

use idgen_core::utc::{format_date, format_unix_ms};
use idgen_core::{SettingKind, SETTINGS};

use crate::ffi::info::{InfoFields, InfoSection};

use crate::state::clock;
use crate::state::failback_marks;
use crate::state::instance;
use crate::state::leases;
use crate::state::pacing;
use crate::state::peer_identities;
use crate::state::reservations;
use crate::state::server_support::{self, AtomicSlotMigration};
use crate::state::settings;
use crate::state::stats;
use crate::state::warnings;

/// The `# idgen` section of `INFO`.
pub struct IdgenSection;

impl InfoSection for IdgenSection {
    fn write(fields: &InfoFields<'_>) {
        add_fields(fields);
    }
}

/// Adds the section's fields.
fn add_fields(fields: &InfoFields<'_>) {
    let config = instance::config();
    let layout = &config.layout;
    let text = |name: &str, value: &str| fields.text(name, value);
    let number = |name: &str, value: u64| fields.number(name, value);
    // The settings INFO shows, as their declarations name them (values checked at load).
    for (index, setting) in SETTINGS.iter().enumerate() {
        let value = settings::get_at(index);
        match (setting.info, setting.kind) {
            (Some(field), SettingKind::Choice(words)) => text(field, words[value as usize]),
            (Some(field), _) => number(field, value as u64),
            (None, _) => {}
        }
    }
    text("epoch", &format_unix_ms(layout.epoch_unix_ms));
    text("layout_runs_out", &format_date(layout.expires_unix_ms()));
    number("snowflake_ids_per_unit", config.ids_per_unit());
    // The sustained rate in the common unit (rounded down for coarser units).
    number(
        "snowflake_ids_per_ms",
        config.ids_per_unit() / layout.time_unit_ms.max(1),
    );
    let ahead =
        instance::with_sequence(|sequence| sequence.ahead_of_wall_ms(clock::wall_unix_ms()));
    number("clock_ahead_ms", ahead);
    number("clock_paced", u64::from(pacing::is_pacing()));
    number("snowflake_calls", stats::SNOWFLAKE_CALLS.get());
    number("snowflake_ids_issued", stats::SNOWFLAKE_IDS.get());
    number(
        "snowflake_bound_writes",
        stats::SNOWFLAKE_BOUND_WRITES.get(),
    );
    number("segment_calls", stats::SEGMENT_CALLS.get());
    number("segment_ids_issued", stats::SEGMENT_IDS.get());
    number("segment_writes", stats::SEGMENT_WRITES.get());
    number("ms_borrowed", stats::BORROWED_MS.get());
    number("clock_step_backs", stats::CLOCK_STEP_BACKS.get());
    number("drift_refusals", stats::DRIFT_REFUSALS.get());
    number("fences_applied", stats::FENCES_APPLIED.get());
    number("segment_keys_held", reservations::len() as u64);
    number("segment_marks_held", failback_marks::len() as u64);
    number("segment_marks_taken", stats::SEGMENT_MARKS_TAKEN.get());
    number("segment_marks_applied", stats::SEGMENT_MARKS_APPLIED.get());
    number("promotions", stats::PROMOTIONS.get());
    number(
        "segment_counters_lowered",
        stats::SEGMENT_COUNTERS_LOWERED.get(),
    );
    number("segment_ttls_seen", stats::SEGMENT_TTLS_SEEN.get());
    number(
        "segment_counters_expired",
        stats::SEGMENT_COUNTERS_EXPIRED.get(),
    );
    // Atomic slot migration (Valkey 9, Redis 8.4+): what is followed, and every step seen.
    text(
        "atomic_slot_migration",
        match server_support::atomic_slot_migration() {
            AtomicSlotMigration::Valkey | AtomicSlotMigration::Redis => "handled",
            AtomicSlotMigration::None => "not offered by this server",
        },
    );
    number("slot_imports", stats::SLOT_IMPORTS.get());
    number("slot_exports", stats::SLOT_EXPORTS.get());
    number("slot_imports_started", stats::SLOT_IMPORTS_STARTED.get());
    number("slot_imports_failed", stats::SLOT_IMPORTS_FAILED.get());
    number("slot_exports_started", stats::SLOT_EXPORTS_STARTED.get());
    number("slot_exports_failed", stats::SLOT_EXPORTS_FAILED.get());
    number("slot_trims", stats::SLOT_TRIMS.get());
    number("peers", peer_identities::peers() as u64);
    number("conflicts", peer_identities::conflicts() as u64);
    text("conflict_detail", &peer_identities::detail());
    number(
        "issuing_refused",
        u64::from(peer_identities::issuing_refused()),
    );
    text("identity_standing", peer_identities::standing());
    text("identity_refusal", &peer_identities::refusal());
    number("conflict_refusals", stats::CONFLICT_REFUSALS.get());
    number("announcements_sent", stats::ANNOUNCEMENTS_SENT.get());
    number(
        "announcements_received",
        stats::ANNOUNCEMENTS_RECEIVED.get(),
    );
    number(
        "announcements_unreadable",
        stats::ANNOUNCEMENTS_UNREADABLE.get(),
    );
    // Leased worker ids.
    let lease_band = leases::setup().band;
    number("lease_workers", lease_band.count);
    number("lease_first_worker", lease_band.first);
    number("lease_max_ms", leases::setup().max_ms);
    number("lease_grants", stats::LEASE_GRANTS.get());
    number("lease_renewals", stats::LEASE_RENEWALS.get());
    number("lease_releases", stats::LEASE_RELEASES.get());
    number("lease_expiries", stats::LEASE_EXPIRIES.get());
    number("lease_refusals", stats::LEASE_REFUSALS.get());
    number("lease_pools_in_use", leases::pools_in_use());
    number("errors", stats::ERRORS.get());
    text("warnings", &warnings::summary());
}
