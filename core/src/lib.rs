//! Pure ID arithmetic for redis-idgen, with no Redis calls and an injected clock.
//!
//! - [`Config`] and [`Layout`]: the deployment's identity (step and offset) and the
//!   snowflake bit layout, with [`Config::validate`] refusing unsafe combinations.
//! - [`SnowflakeSequence`]: the per-instance logical clock and step-offset sequence behind
//!   `SNOWFLAKE.NEXT`, and [`SnowflakeSequence::issue_for_key`]: the write-free rule for a
//!   key's recorded bound ([`KeyRecord`]).
//! - [`next_range`]: the step-offset range arithmetic behind `SEGMENT.NEXT`.
//! - [`Layout::decode`]: the parts of an ID, as `SNOWFLAKE.DECODE` shows them.
//! - [`Announcement`] and [`decide`]: what cluster nodes tell each other about their
//!   identity, and which of them must refuse to issue (a shared offset, another step or
//!   layout).
//! - [`LeasePool`], [`LeaseFences`] and [`LeaseBand`]: leased worker ids, time windows
//!   that never overlap for one worker id, in a shard band `SNOWFLAKE.NEXT` never uses.
//! - [`IdFormat`]: IDs as decimal, base32 and base62 strings that sort like the numbers.
//!
//! The Redis module and the client crate both build on this crate, so the arithmetic exists
//! once.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod commands;
mod config;
mod error;
mod id_text;
mod identity_announcement;
mod identity_verdict;
mod integer;
pub mod key_slot;
mod layout;
mod lease;
mod reservation;
mod segment;
mod settings;
mod snowflake;
pub mod utc;
mod worker_lease;

pub use config::{Config, ConfigError, Identity, DEFAULT_SEGMENT_FENCE, MIN_LAYOUT_LIFETIME_MS};
pub use error::IdError;
pub use id_text::{IdFormat, IdTextError};
pub use identity_announcement::{Announcement, Refused, MAX_NAMED_REFUSALS, NODE_ID_LEN};
pub use identity_verdict::{
    decide, disagreement, Conflict, Decision, Disagreement, KnownNode, Member, Role, Why,
};
pub use integer::parse_redis_integer;
pub use layout::{DecodedId, Layout, DEFAULT_EPOCH_UNIX_MS};
pub use lease::{KeyIssue, KeyRecord, KeyState};
pub use reservation::{
    reserve, serve, Reservation, ReservationPolicy, SegmentRequest, Served, GROW_WITHIN_MS,
    MAX_AHEAD, SHRINK_AFTER_MS,
};
pub use segment::{continue_above, next_range, SegmentRange, MAX_SEGMENT_COUNT};
pub use settings::{listed_names, non_negative, Setting, SettingId, SettingKind, SETTINGS};
pub use snowflake::{
    Batch, BatchIds, Clocks, Now, Position, Request, SnowflakeSequence, MAX_SNOWFLAKE_COUNT,
};
pub use worker_lease::{
    Grant, LeaseBand, LeaseError, LeaseFences, LeasePool, LeaseRules, Window, WorkerLease,
};
