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
//! - so are the segment values this instance remembers (`segment_marks`), so a replica that
//!   restarts still knows what it handed out before a full sync erased it.

use std::ffi::{c_int, c_void};

use redis_module::{native_types::RedisType, raw};

use idgen_core::KeyRecord;

use crate::{clock, segment_marks, state};

/// What a snowflake key holds.
#[derive(Debug, Clone, Copy)]
pub struct SnowflakeKey {
    /// The bound and its owner: what RDB, replicas and the AOF hold.
    pub record: KeyRecord,
    /// The key's last ID, known to its owner only, in memory only.
    pub last_issued: Option<u64>,
}

impl SnowflakeKey {
    /// A key as loaded or replicated: its record, no last ID known.
    pub fn from_record(record: KeyRecord) -> Self {
        SnowflakeKey {
            record,
            last_issued: None,
        }
    }
}

/// Encoding version of the type. A key: its last ID (0 and 1, loaded as a bound with no
/// owner), then bound and owner (2). The aux record: the snowflake position (0), then the
/// remembered segment values (1 on).
const ENCODING_VERSION: i32 = 2;

/// The first encoding whose keys carry bound and owner.
const KEY_WITH_OWNER: c_int = 2;

/// The registered type; `TYPE key` answers `snowflake`.
pub static SNOWFLAKE_TYPE: RedisType = RedisType::new(
    "snowflake",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

/// The raw type handle, for type checks and new values.
pub fn raw_type() -> *mut raw::RedisModuleType {
    *SNOWFLAKE_TYPE.raw_type.borrow()
}

/// Makes sure nothing at or before `id`'s millisecond is issued again by this
/// instance. With `check_drift`, refuses (returns false, changing nothing) when that
/// millisecond is more than the drift bound ahead of the wall clock.
pub fn raise_floor_for(id: u64, check_drift: bool) -> bool {
    let config = state::config();
    let time_ms = config.layout.time_of(id);
    let wall_ms = clock::wall_unix_ms().saturating_sub(config.layout.epoch_unix_ms);
    if check_drift && time_ms > wall_ms.saturating_add(config.max_drift_ms) {
        return false;
    }
    state::with_sequence(|sequence| sequence.raise_floor(time_ms, clock::monotonic_ms()));
    true
}

/// The first encoding whose aux record carries remembered segment values.
const AUX_WITH_SEGMENT_MARKS: c_int = 1;

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    let last_time_ms = state::with_sequence(|sequence| {
        sequence
            .last_position()
            .map_or(0, |position| position.time_ms)
    });
    raw::save_unsigned(rdb, last_time_ms);
    let marks = segment_marks::snapshot();
    raw::save_unsigned(rdb, marks.len() as u64);
    for (db, key, value) in marks {
        raw::save_signed(rdb, i64::from(db));
        raw::save_slice(rdb, &key);
        raw::save_signed(rdb, value);
    }
}

unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    if !(0..=ENCODING_VERSION).contains(&encver) {
        return raw::REDISMODULE_ERR as c_int;
    }
    let loaded = (|| -> Result<(), redis_module::error::Error> {
        let last_time_ms = raw::load_unsigned(rdb)?;
        // The instance's own saved position, or its master's in a full sync: either way
        // IDs up to it exist, so they must not be issued again, whatever the clock says.
        state::with_sequence(|sequence| sequence.raise_floor(last_time_ms, clock::monotonic_ms()));
        if encver >= AUX_WITH_SEGMENT_MARKS {
            // Only values of this instance's own class mean anything to it: a master's
            // remembered values, arriving in a full sync, are of the master's class.
            let identity = state::config().identity;
            for _ in 0..raw::load_unsigned(rdb)? {
                let db = raw::load_signed(rdb)?;
                let key = raw::load_string_buffer(rdb)?;
                let value = raw::load_signed(rdb)?;
                if let (Ok(db), true) = (i32::try_from(db), identity.owns(value)) {
                    segment_marks::remember(db, key.as_ref(), value);
                }
            }
        }
        Ok(())
    })();
    match loaded {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(_) => raw::REDISMODULE_ERR as c_int,
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if !(0..=ENCODING_VERSION).contains(&encver) {
        return std::ptr::null_mut();
    }
    let Ok(bound) = raw::load_unsigned(rdb) else {
        return std::ptr::null_mut();
    };
    let owner = if encver >= KEY_WITH_OWNER {
        match raw::load_unsigned(rdb) {
            Ok(owner) => owner,
            Err(_) => return std::ptr::null_mut(),
        }
    } else {
        0 // an older file's last ID: a bound nobody owns
    };
    Box::into_raw(Box::new(SnowflakeKey::from_record(KeyRecord {
        bound,
        owner,
    })))
    .cast()
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let record = (*value.cast::<SnowflakeKey>()).record;
    raw::save_unsigned(rdb, record.bound);
    raw::save_unsigned(rdb, record.owner);
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let record = (*value.cast::<SnowflakeKey>()).record;
    raw::RedisModule_EmitAOF.unwrap()(
        aof,
        c"SNOWFLAKE.SETBOUND".as_ptr(),
        c"sll".as_ptr(),
        key,
        record.bound as std::ffi::c_longlong,
        record.owner as std::ffi::c_longlong,
    );
}

unsafe extern "C" fn mem_usage(_value: *const c_void) -> usize {
    std::mem::size_of::<SnowflakeKey>()
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // The record only: the owner's in-memory last ID is not data replicas have.
    let record = (*value.cast::<SnowflakeKey>()).record;
    raw::RedisModule_DigestAddLongLong.unwrap()(md, record.bound as std::ffi::c_longlong);
    raw::RedisModule_DigestAddLongLong.unwrap()(md, record.owner as std::ffi::c_longlong);
    raw::RedisModule_DigestEndSequence.unwrap()(md);
}

unsafe extern "C" fn free(value: *mut c_void) {
    drop(Box::from_raw(value.cast::<SnowflakeKey>()));
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    let key = *value.cast::<SnowflakeKey>();
    Box::into_raw(Box::new(key)).cast()
}
