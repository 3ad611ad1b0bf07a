//! The local buffers: segment buffers, snowflake caches, and what they share — the source
//! they take from (`source.rs`), the measurements and plans that time and size their
//! fetches, the one fetch in flight, demand, waits and tokio's cooperative budget. They
//! know nothing of connections: the API gives them a source.

pub(crate) mod cooperate;
pub(crate) mod demand;
pub(crate) mod fetch_flight;
pub(crate) mod local_segment;
pub(crate) mod measured;
pub(crate) mod options;
pub(crate) mod range_slots;
pub(crate) mod segment;
pub(crate) mod segment_plan;
pub(crate) mod snowflake_cache;
pub(crate) mod snowflake_plan;
pub(crate) mod source;
pub(crate) mod wait_stats;
