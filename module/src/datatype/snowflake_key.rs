//! The `snowflake` key type: a bound on the IDs issued for a key, and who issued under it
//! (`idgen_core::KeyRecord`; the write-free rule is in `idgen_core::lease`).
//!
//! A dedicated type, rather than a plain string, keeps a snowflake key from being mistaken
//! for a counter (and a counter for a snowflake key), and gives the module RDB callbacks:
//! - the value is the key's record, so IDs for a key restored anywhere continue above its
//!   bound; the owner's in-memory last ID is not saved, copied into RDB or digested;
//! - the instance's snowflake position is saved as RDB aux data (also inside an AOF's RDB
//!   preamble) and restored on load, so after a restart nothing at or before the last
//!   persisted millisecond is issued again, even if the wall clock is now behind it;
//! - so are the segment values this instance remembers (`state::failback_marks`), so a replica that
//!   restarts still knows what it handed out before a full sync erased it.

use std::cell::Cell;

use idgen_core::{KeyRecord, KeyState};

use crate::datatype::encodings;
use crate::ffi::data_type::{AofArgs, AofCommand, DataType, Digest, ModuleDataType, Rdb};
use crate::state::clock;
use crate::state::failback_marks;
use crate::state::instance;

/// What a snowflake key holds.
#[derive(Debug, Clone)]
pub struct SnowflakeKey {
    /// The bound and its owner: what RDB, replicas and the AOF hold.
    pub record: KeyRecord,
    /// The key's last ID, known to its owner only, in memory only: a `Cell`, so that a
    /// command that opened the key for reading can keep it without being able to change
    /// the record.
    pub last_issued: Cell<Option<u64>>,
}

impl SnowflakeKey {
    /// A key as loaded or replicated: its record, no last ID known.
    pub fn from_record(record: KeyRecord) -> Self {
        SnowflakeKey {
            record,
            last_issued: Cell::new(None),
        }
    }
}

/// The first encoding whose keys carry bound and owner.
const KEY_WITH_OWNER: i32 = 2;

/// The first encoding whose aux record carries remembered segment values.
const AUX_WITH_SEGMENT_MARKS: i32 = 1;

/// The registered type; `TYPE key` answers `snowflake`.
pub static SNOWFLAKE_TYPE: DataType<SnowflakeKey> = DataType::new();

impl SnowflakeKey {
    /// The key as the issuing rule sees it.
    pub fn state(&self) -> KeyState {
        KeyState {
            record: Some(self.record),
            last_issued: self.last_issued.get(),
        }
    }
}

impl ModuleDataType for SnowflakeKey {
    const NAME: &'static str = "snowflake";
    /// See `encodings`, which says what each encoding holds and what this release does with
    /// newer ones.
    const ENCODING_VERSION: i32 = encodings::KNOWN;

    fn data_type() -> &'static DataType<Self> {
        &SNOWFLAKE_TYPE
    }

    const HAS_AUX: bool = true;

    fn rdb_load(rdb: &mut Rdb<'_>, encver: i32) -> Option<Self> {
        if !encodings::readable(encver) {
            encodings::refuse_key(rdb, encver);
            return None;
        }
        let bound = rdb.load_unsigned().ok()?;
        let owner = if encver >= KEY_WITH_OWNER {
            rdb.load_unsigned().ok()?
        } else {
            0 // an older file's last ID: a bound nobody owns
        };
        Some(SnowflakeKey::from_record(KeyRecord { bound, owner }))
    }

    fn rdb_save(&self, rdb: &mut Rdb<'_>) {
        rdb.save_unsigned(self.record.bound);
        rdb.save_unsigned(self.record.owner);
    }

    fn aof_commands(&self) -> Vec<AofCommand> {
        vec![AofCommand {
            name: idgen_core::commands::SNOWFLAKE_SETBOUND.name,
            args: AofArgs::Two([self.record.bound as i64, self.record.owner as i64]),
        }]
    }

    fn digest(&self, digest: &mut Digest<'_>) {
        // The record only: the owner's in-memory last ID is not data replicas have.
        digest.add(self.record.bound as i64);
        digest.add(self.record.owner as i64);
        digest.end_sequence();
    }

    fn memory_usage(&self) -> usize {
        std::mem::size_of::<SnowflakeKey>()
    }

    /// The instance's snowflake position and the segment values it remembers.
    fn aux_save(rdb: &mut Rdb<'_>) {
        // The time field of the last position: time units since the epoch (milliseconds
        // with the default unit, which is what files written before units existed hold).
        let last_time = instance::with_sequence(|sequence| {
            sequence.last_position().map_or(0, |position| position.time)
        });
        rdb.save_unsigned(last_time);
        let marks = failback_marks::snapshot();
        rdb.save_unsigned(marks.len() as u64);
        for (db, key, value) in marks {
            rdb.save_signed(i64::from(db));
            rdb.save_bytes(&key);
            rdb.save_signed(value);
        }
    }

    fn aux_load(rdb: &mut Rdb<'_>, encver: i32) -> bool {
        if !encodings::readable(encver) {
            encodings::refuse_aux(rdb, encver);
            return false;
        }
        load_aux(rdb, encver).is_ok()
    }
}

/// Reads the aux record: the position, then (from encoding 1) the remembered values.
fn load_aux(rdb: &mut Rdb<'_>, encver: i32) -> Result<(), crate::ffi::data_type::LoadFailed> {
    let last_time = rdb.load_unsigned()?;
    // The instance's own saved position, or its master's in a full sync: either way IDs up
    // to it exist, so they must not be issued again, whatever the clock says.
    instance::with_sequence(|sequence| sequence.raise_floor(last_time, clock::monotonic_ms()));
    if encver >= AUX_WITH_SEGMENT_MARKS {
        // Only values of this instance's own class mean anything to it: a master's
        // remembered values, arriving in a full sync, are of the master's class.
        let identity = instance::config().identity;
        for _ in 0..rdb.load_unsigned()? {
            let db = rdb.load_signed()?;
            let key = rdb.load_bytes()?;
            let value = rdb.load_signed()?;
            if let (Ok(db), true) = (i32::try_from(db), identity.owns(value)) {
                failback_marks::remember(db, &key, value);
            }
        }
    }
    Ok(())
}
