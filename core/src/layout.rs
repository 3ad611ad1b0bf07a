//! The snowflake bit layout: `time | shard | sequence`, and decoding IDs back into parts.

use crate::IdError;

/// Widths of the three snowflake fields and the epoch the time field counts from.
///
/// An ID is `time << (shard_bits + sequence_bits) | shard << sequence_bits | sequence`, with
/// `time` in milliseconds since `epoch_unix_ms`. The widths add up to [`Layout::id_bits`]
/// (63 by default, so IDs are positive signed 64-bit integers; 53 keeps them exact in
/// JavaScript numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bits of milliseconds since the epoch. Defaults to 41 (about 69 years).
    pub time_bits: u32,
    /// Bits of the caller-chosen shard field. Defaults to 10.
    pub shard_bits: u32,
    /// Bits of the per-millisecond sequence. Defaults to 12 (4096 values per ms).
    pub sequence_bits: u32,
    /// Unix time in ms at which the time field is zero. Defaults to 2024-01-01T00:00:00Z.
    pub epoch_unix_ms: u64,
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
        }
    }
}

/// The parts of a decoded snowflake ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedId {
    /// When the ID was issued (its logical millisecond), in unix ms.
    pub unix_ms: u64,
    /// The time field: milliseconds since the layout's epoch.
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

    /// Number of distinct sequence values in one millisecond (`2^sequence_bits`).
    pub fn sequence_values(&self) -> u64 {
        1u64 << self.sequence_bits
    }

    /// Number of distinct shard values (`2^shard_bits`).
    pub fn shard_values(&self) -> u64 {
        1u64 << self.shard_bits
    }

    /// Number of distinct milliseconds the time field can hold (`2^time_bits`).
    pub fn time_values(&self) -> u64 {
        1u64 << self.time_bits
    }

    /// The first unix millisecond the time field can no longer represent.
    pub fn expires_unix_ms(&self) -> u64 {
        self.epoch_unix_ms.saturating_add(self.time_values())
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

    /// The time field (ms since the epoch) of an ID of this layout.
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
        let time_ms = self.time_of(id);
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
        };
        assert_eq!(js.id_bits(), 53);
        assert!(js.decode(1 << 53, 1).is_err());
        assert!(js.decode((1 << 53) - 1, 1).is_ok());
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
