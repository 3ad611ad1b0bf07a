//! Errors of the ID arithmetic, each with the reply code a Redis client can match on.

use std::fmt;

/// Why an ID request was refused. Nothing is issued and no state changes when one of these
/// is returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    /// Issuing would put the logical clock more than the drift bound ahead of the wall clock.
    Drift {
        /// How far ahead of the wall clock the last ID of the request would have been, in ms.
        ahead_ms: u64,
        /// The configured bound, in ms.
        limit_ms: u64,
        /// How long until the same request fits: the logical clock's allowance grows by one
        /// millisecond per elapsed millisecond.
        retry_in_ms: u64,
        /// Whether the restart fence is why the clock is this far ahead (the server started
        /// less than the fence ago).
        restart_fence: bool,
    },
    /// An operator's bound for a key is further ahead of the wall clock than the drift bound:
    /// accepting it would push this instance's clock that far ahead.
    BoundAhead {
        /// The bound given.
        bound: u64,
        /// How far ahead of the wall clock its millisecond is, in ms.
        ahead_ms: u64,
        /// The configured bound, in ms.
        limit_ms: u64,
    },
    /// The layout's time field cannot hold the millisecond the request needs.
    TimeExhausted {
        /// The unix time, in ms, at which the layout's time field runs out.
        expires_unix_ms: u64,
    },
    /// A segment value would pass the largest signed 64-bit integer.
    Overflow {
        /// The value the segment counter holds now.
        current: i64,
        /// How many values were asked for.
        count: u64,
    },
    /// A segment key holds a negative number; segments hand out positive IDs only.
    NegativeSeed {
        /// The value found.
        value: i64,
    },
    /// The requested shard does not fit the layout's shard field.
    ShardOutOfRange {
        /// The shard asked for.
        shard: u64,
        /// The number of shard values the layout has (`2^shard_bits`).
        shard_values: u64,
    },
    /// COUNT is zero or above the documented maximum.
    CountOutOfRange {
        /// The count asked for.
        count: u64,
        /// The largest count allowed.
        max: u64,
    },
    /// A number given to decode is not an ID of this layout.
    NotAnId {
        /// What is wrong with it.
        reason: String,
    },
    /// A field given to compose an ID, or a time of a window, does not fit the layout.
    OutsideLayout {
        /// Which field or time, its value, and what the layout allows.
        reason: String,
    },
    /// A time window that ends before it starts.
    EmptyWindow {
        /// The window's start, unix ms.
        from_unix_ms: u64,
        /// The window's end, unix ms.
        to_unix_ms: u64,
    },
}

impl IdError {
    /// The upper-case code that starts the Redis error reply (`-DRIFT ...`).
    pub fn code(&self) -> &'static str {
        match self {
            IdError::Drift { .. } | IdError::BoundAhead { .. } => "DRIFT",
            IdError::TimeExhausted { .. } => "EXHAUSTED",
            IdError::Overflow { .. } => "OVERFLOW",
            IdError::NegativeSeed { .. }
            | IdError::ShardOutOfRange { .. }
            | IdError::CountOutOfRange { .. }
            | IdError::NotAnId { .. }
            | IdError::OutsideLayout { .. }
            | IdError::EmptyWindow { .. } => "ERR",
        }
    }
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdError::Drift {
                ahead_ms,
                limit_ms,
                retry_in_ms,
                restart_fence,
            } => {
                write!(
                    f,
                    "this burst would run the ID clock {ahead_ms} ms ahead of the wall clock, past \
                     idgen.max-drift-ms ({limit_ms}) and the one millisecond of IDs per millisecond \
                     it may always issue; nothing was issued: the same request fits in {retry_in_ms} ms, \
                     or ask for fewer IDs now"
                )?;
                if *restart_fence {
                    write!(
                        f,
                        " (this server started less than idgen.max-drift-ms ago and its restart fence \
                         is on: until then it issues about one millisecond's sequence per millisecond)"
                    )?;
                }
                Ok(())
            }
            IdError::BoundAhead {
                bound,
                ahead_ms,
                limit_ms,
            } => write!(
                f,
                "bound {bound} is {ahead_ms} ms ahead of this server's clock, more than \
                 idgen.max-drift-ms ({limit_ms}); the key was not changed"
            ),
            IdError::TimeExhausted { expires_unix_ms } => write!(
                f,
                "the layout's time field ran out at {} (unix ms {expires_unix_ms}); \
                 configure a later idgen.epoch or more idgen.time-bits",
                crate::utc::format_unix_ms(*expires_unix_ms)
            ),
            IdError::Overflow { current, count } => write!(
                f,
                "the counter holds {current}; {count} more values would pass 9223372036854775807"
            ),
            IdError::NegativeSeed { value } => write!(
                f,
                "the key holds {value}; SEGMENT.NEXT continues from 0 or a positive integer"
            ),
            IdError::ShardOutOfRange {
                shard,
                shard_values,
            } => write!(
                f,
                "SHARD {shard} does not fit the layout: shards run from 0 to {}",
                shard_values.saturating_sub(1)
            ),
            IdError::CountOutOfRange { count, max } => {
                write!(f, "COUNT {count} is out of range: give 1 to {max}")
            }
            IdError::NotAnId { reason } => write!(f, "not an ID of this layout: {reason}"),
            IdError::OutsideLayout { reason } => write!(f, "{reason}"),
            IdError::EmptyWindow {
                from_unix_ms,
                to_unix_ms,
            } => write!(
                f,
                "the window ends ({to_unix_ms}, {}) before it starts ({from_unix_ms}, {})",
                crate::utc::format_unix_ms(*to_unix_ms),
                crate::utc::format_unix_ms(*from_unix_ms)
            ),
        }
    }
}

impl std::error::Error for IdError {}
