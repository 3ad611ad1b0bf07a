//! The snowflake bit layout: `time | shard | sequence`, and decoding IDs back into parts.

use crate::IdError;

/// Widths of the three snowflake fields and the epoch the time field counts from.
///
/// An ID is `time << (shard_bits + sequence_bits) | shard << sequence_bits | sequence`, with
/// `time` in time units (`time_unit_ms`, 1 ms by default) since `epoch_unix_ms`. The widths
/// add up to [`Layout::id_bits`] (63 by default, so IDs are positive signed 64-bit integers;
/// 53 keeps them exact in JavaScript numbers). A coarser unit (10 ms like sonyflake, 1 s like
/// UidGenerator) makes the same time bits last longer, leaving bits for shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Bits of time units since the epoch. Defaults to 41 (about 69 years of milliseconds).
    pub time_bits: u32,
    /// Bits of the caller-chosen shard field. Defaults to 10.
    pub shard_bits: u32,
    /// Bits of the per-unit sequence. Defaults to 12 (4096 values per unit).
    pub sequence_bits: u32,
    /// Unix time in ms at which the time field is zero. Defaults to 2024-01-01T00:00:00Z.
    pub epoch_unix_ms: u64,
    /// Milliseconds in one unit of the time field: 1 by default; any divisor of 1000.
    pub time_unit_ms: u64,
}

/// The default epoch: 2024-01-01T00:00:00Z in unix milliseconds.
pub const DEFAULT_EPOCH_UNIX_MS: u64 = 1_704_067_200_000;

impl Default for Layout {
    fn default() -> Self {
        Layout {
            time_bits: 41,
            shard_bits: 10,
            sequence_bits: 12,
            epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
            time_unit_ms: 1,
        }
    }
}

/// The parts of a decoded snowflake ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedId {
    /// When the ID was issued, in unix ms: the start of its time unit.
    pub unix_ms: u64,
    /// Milliseconds since the layout's epoch: the time field times the time unit.
    pub time_ms: u64,
    /// The shard field.
    pub shard: u64,
    /// The sequence field.
    pub sequence: u64,
    /// The step offset of the instance that issued it (`sequence % step`).
    pub offset: u64,
}

impl Layout {
    /// Total width of an ID in bits (the sum of the three fields).
    pub fn id_bits(&self) -> u32 {
        self.time_bits + self.shard_bits + self.sequence_bits
    }

    /// Number of distinct sequence values in one time unit (`2^sequence_bits`).
    pub fn sequence_values(&self) -> u64 {
        1u64 << self.sequence_bits
    }

    /// Number of distinct shard values (`2^shard_bits`).
    pub fn shard_values(&self) -> u64 {
        1u64 << self.shard_bits
    }

    /// Number of distinct time units the time field can hold (`2^time_bits`).
    pub fn time_values(&self) -> u64 {
        1u64 << self.time_bits
    }

    /// The first unix millisecond the time field can no longer represent.
    pub fn expires_unix_ms(&self) -> u64 {
        self.epoch_unix_ms
            .saturating_add(self.time_values().saturating_mul(self.time_unit_ms))
    }

    /// The time field for `ms_since_epoch` milliseconds after the epoch: the unit it falls
    /// in (not checked against the field's width).
    pub fn units_of_ms(&self, ms_since_epoch: u64) -> u64 {
        // Millisecond units, the default, without a 64-bit division (tens of cycles, on
        // every SNOWFLAKE.NEXT).
        match self.time_unit_ms {
            0 | 1 => ms_since_epoch,
            unit => ms_since_epoch / unit,
        }
    }

    /// Milliseconds since the epoch at which time field value `units` starts.
    pub fn ms_of_units(&self, units: u64) -> u64 {
        units.saturating_mul(self.time_unit_ms)
    }

    /// Builds an ID from its fields. The caller guarantees each field fits its width.
    pub fn compose(&self, time_ms: u64, shard: u64, sequence: u64) -> u64 {
        debug_assert!(time_ms < self.time_values());
        debug_assert!(shard < self.shard_values());
        debug_assert!(sequence < self.sequence_values());
        (time_ms << (self.shard_bits + self.sequence_bits))
            | (shard << self.sequence_bits)
            | sequence
    }

    /// The time field for unix millisecond `unix_ms`; `what` names it in the error when the
    /// layout cannot hold it (before the epoch, or at or past where the time field runs out).
    fn time_field(&self, unix_ms: u64, what: &str) -> Result<u64, IdError> {
        use crate::utc::format_unix_ms;
        if unix_ms < self.epoch_unix_ms {
            return Err(IdError::OutsideLayout {
                reason: format!(
                    "{what} {unix_ms} ({}) is before the layout's epoch {} ({})",
                    format_unix_ms(unix_ms),
                    self.epoch_unix_ms,
                    format_unix_ms(self.epoch_unix_ms)
                ),
            });
        }
        if unix_ms >= self.expires_unix_ms() {
            return Err(IdError::OutsideLayout {
                reason: format!(
                    "{what} {unix_ms} ({}) is past the end of the layout's time field ({})",
                    format_unix_ms(unix_ms),
                    format_unix_ms(self.expires_unix_ms())
                ),
            });
        }
        Ok(self.units_of_ms(unix_ms - self.epoch_unix_ms))
    }

    /// The lowest and the highest ID whose time lies in `[from_unix_ms, to_unix_ms]` (both
    /// included), for any shard and sequence: every ID issued in the window is between them,
    /// and no ID issued outside it is (`WHERE id BETWEEN lowest AND highest`).
    pub fn window(&self, from_unix_ms: u64, to_unix_ms: u64) -> Result<(u64, u64), IdError> {
        if to_unix_ms < from_unix_ms {
            return Err(IdError::EmptyWindow {
                from_unix_ms,
                to_unix_ms,
            });
        }
        let from = self.time_field(from_unix_ms, "the window's start")?;
        let to = self.time_field(to_unix_ms, "the window's end")?;
        Ok((
            self.compose(from, 0, 0),
            self.compose(to, self.shard_values() - 1, self.sequence_values() - 1),
        ))
    }

    /// The ID with these fields (time as unix ms), each checked against the layout.
    pub fn compose_fields(&self, unix_ms: u64, shard: u64, sequence: u64) -> Result<u64, IdError> {
        let time = self.time_field(unix_ms, "the time")?;
        let outside = |what: &str, value: u64, values: u64| IdError::OutsideLayout {
            reason: format!(
                "{what} {value} does not fit the layout: it runs from 0 to {}",
                values - 1
            ),
        };
        if shard >= self.shard_values() {
            return Err(outside("the shard", shard, self.shard_values()));
        }
        if sequence >= self.sequence_values() {
            return Err(outside("the sequence", sequence, self.sequence_values()));
        }
        Ok(self.compose(time, shard, sequence))
    }

    /// The time field (time units since the epoch) of an ID of this layout.
    pub fn time_of(&self, id: u64) -> u64 {
        id >> (self.shard_bits + self.sequence_bits)
    }

    /// Splits an ID into its parts; `step` recovers the issuing instance's offset.
    ///
    /// Refuses zero, negative numbers and numbers wider than [`Layout::id_bits`].
    pub fn decode(&self, id: i64, step: u64) -> Result<DecodedId, IdError> {
        if id <= 0 {
            return Err(IdError::NotAnId {
                reason: format!("{id} is not positive"),
            });
        }
        let id = id as u64;
        if self.id_bits() < 64 && id >> self.id_bits() != 0 {
            return Err(IdError::NotAnId {
                reason: format!("{id} is wider than the layout's {} bits", self.id_bits()),
            });
        }
        let time_ms = self.ms_of_units(self.time_of(id));
        let shard = (id >> self.sequence_bits) & (self.shard_values() - 1);
        let sequence = id & (self.sequence_values() - 1);
        Ok(DecodedId {
            unix_ms: self.epoch_unix_ms + time_ms,
            time_ms,
            shard,
            sequence,
            offset: sequence % step.max(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_and_decode_round_trip() {
        let layout = Layout::default();
        let id = layout.compose(123_456, 789, 4000);
        let parts = layout.decode(id as i64, 6).unwrap();
        assert_eq!(parts.time_ms, 123_456);
        assert_eq!(parts.unix_ms, DEFAULT_EPOCH_UNIX_MS + 123_456);
        assert_eq!(parts.shard, 789);
        assert_eq!(parts.sequence, 4000);
        assert_eq!(parts.offset, 4000 % 6);
    }

    #[test]
    fn decode_refuses_what_is_not_an_id() {
        let layout = Layout::default();
        assert!(layout.decode(0, 1).is_err());
        assert!(layout.decode(-5, 1).is_err());
        let js = Layout {
            time_bits: 41,
            shard_bits: 2,
            sequence_bits: 10,
            epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
            time_unit_ms: 1,
        };
        assert_eq!(js.id_bits(), 53);
        assert!(js.decode(1 << 53, 1).is_err());
        assert!(js.decode((1 << 53) - 1, 1).is_ok());
    }

    #[test]
    fn windows_and_composed_ids_are_checked_against_the_layout() {
        let layout = Layout::default();
        let t = DEFAULT_EPOCH_UNIX_MS + 1000;
        let (low, high) = layout.window(t, t + 9).unwrap();
        assert_eq!(low, layout.compose(1000, 0, 0));
        assert_eq!(high, layout.compose(1009, 1023, 4095));
        assert_eq!(
            layout.window(t, t).unwrap().0,
            layout.compose_fields(t, 0, 0).unwrap()
        );
        let empty = layout.window(t + 1, t).unwrap_err().to_string();
        assert!(empty.starts_with("the window ends (") && empty.contains("before it starts"));
        let early = layout.window(1, t).unwrap_err().to_string();
        assert!(
            early.contains(
                "the window's start 1 (1970-01-01T00:00:00.001Z) is before the layout's epoch"
            ),
            "{early}"
        );
        let late = layout
            .compose_fields(layout.expires_unix_ms(), 0, 0)
            .unwrap_err()
            .to_string();
        assert!(
            late.contains("is past the end of the layout's time field (2093-09-06"),
            "{late}"
        );
        let shard = layout.compose_fields(t, 1024, 0).unwrap_err().to_string();
        assert_eq!(
            shard,
            "the shard 1024 does not fit the layout: it runs from 0 to 1023"
        );
        let sequence = layout.compose_fields(t, 0, 4096).unwrap_err().to_string();
        assert_eq!(
            sequence,
            "the sequence 4096 does not fit the layout: it runs from 0 to 4095"
        );
        assert_eq!(
            layout
                .compose_fields(layout.expires_unix_ms() - 1, 1023, 4095)
                .unwrap(),
            (1 << 63) - 1
        );
    }

    #[test]
    fn default_layout_is_twitters() {
        let layout = Layout::default();
        assert_eq!(layout.id_bits(), 63);
        assert_eq!(layout.sequence_values(), 4096);
        assert_eq!(layout.shard_values(), 1024);
        // 2^41 ms after 2024-01-01 is in 2093.
        assert_eq!(
            crate::utc::format_date(layout.expires_unix_ms()),
            "2093-09-06"
        );
    }
}
