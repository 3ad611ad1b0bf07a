pub mod config_warnings;
pub mod flush_sweep;
pub mod identity_exchange;
pub mod key_events;
pub mod server_events;
pub mod slot_migration;
