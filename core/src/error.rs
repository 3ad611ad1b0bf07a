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
        /// The values skipped ahead of the counter by this call: the segment fence on a
        /// key's first call after a start, else 0.
        fence: u64,
        /// Values of this instance's class left between the counter plus `fence` and
        /// 2^63 − 1.
        room: u64,
        /// The same without the fence: whether the fence, not COUNT, is why it failed.
        room_without_fence: u64,
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
                 idgen.max-drift-ms ({limit_ms}); the key was not changed: give a bound whose \
                 time is at most idgen.max-drift-ms ahead (SNOWFLAKE.COMPOSE builds one)"
            ),
            IdError::TimeExhausted { expires_unix_ms } => write!(
                f,
                "the layout's time field ran out at {} (unix ms {expires_unix_ms}); \
                 configure a later idgen.epoch or more idgen.time-bits",
                crate::utc::format_unix_ms(*expires_unix_ms)
            ),
            IdError::Overflow {
                current,
                count,
                fence,
                room,
                room_without_fence,
            } => {
                write!(f, "the counter holds {current}; ")?;
                if *fence > 0 && room_without_fence >= count {
                    // The restart fence's jump, not COUNT, passes the end.
                    write!(
                        f,
                        "the first call for a key after a start skips idgen.segment-fence \
                         ({fence}) values, so that values lost in a crash are not handed out \
                         again, "
                    )?;
                    if *room == 0 {
                        write!(
                            f,
                            "and that jump passes 9223372036854775807, the largest value"
                        )?;
                    } else {
                        let values = if *room == 1 { "value" } else { "values" };
                        write!(
                            f,
                            "and after that jump only {room} {values} of this instance's class \
                             left up to 9223372036854775807, the largest value"
                        )?;
                    }
                    write!(
                        f,
                        " (COUNT {count} would fit without it); nothing was handed out. The key \
                         is within the fence of the end of 64-bit integers: continue on a new key"
                    )
                } else if *room_without_fence == 0 {
                    write!(
                        f,
                        "no value of this instance's class is left up to 9223372036854775807, \
                         the largest value; nothing was handed out: continue on a new key"
                    )
                } else {
                    let values = if *room_without_fence == 1 {
                        "value"
                    } else {
                        "values"
                    };
                    write!(
                        f,
                        "only {room_without_fence} {values} of this instance's class left up to \
                         9223372036854775807, the largest value, and COUNT asked for {count}"
                    )?;
                    if *fence > 0 {
                        write!(
                            f,
                            " (and this first call for the key after a start would also skip \
                             idgen.segment-fence ({fence}) values)"
                        )?;
                    }
                    write!(
                        f,
                        "; nothing was handed out: move to a new key before the values run out"
                    )
                }
            }
            IdError::NegativeSeed { value } => write!(
                f,
                "the key holds {value}; SEGMENT.NEXT continues from 0 or a positive integer: \
                 SET the key to 0 or more (above every value handed out for it), or use another key"
            ),
            IdError::ShardOutOfRange {
                shard,
                shard_values,
            } => write!(
                f,
                "SHARD {shard} does not fit the layout: shards run from 0 to {} \
                 (2^idgen.shard-bits values)",
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
