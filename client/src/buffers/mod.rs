//! The local buffers and what times and sizes their fetches. They know no connection: the
//! API hands them a source (`source.rs`).

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
