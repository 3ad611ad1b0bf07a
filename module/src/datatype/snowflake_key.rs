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

use std::cell::Cell;
use std::ffi::{c_int, c_void};

use redis_module::{native_types::RedisType, raw};

use idgen_core::{KeyRecord, KeyState};

use crate::datatype::encodings;
use crate::ffi::guard;
use crate::ffi::keyspace::ModuleValue;
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

/// Encoding version of the type: see `compat`, which says what each encoding holds and
/// what this release does with newer ones.
const ENCODING_VERSION: i32 = encodings::KNOWN;

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

// SAFETY: the `snowflake` type's values are only ever `Box<SnowflakeKey>` pointers: made by
// `Key::store` and by `rdb_load`/`copy` below with `Box::into_raw`, freed by `free` below as
// a box.
unsafe impl ModuleValue for SnowflakeKey {
    fn registered() -> *mut raw::RedisModuleType {
        *SNOWFLAKE_TYPE.raw_type.borrow()
    }
}

impl SnowflakeKey {
    /// The key as the issuing rule sees it.
    pub fn state(&self) -> KeyState {
        KeyState {
            record: Some(self.record),
            last_issued: self.last_issued.get(),
        }
    }
}

/// The value behind a pointer Redis passes to a type callback.
///
/// # Safety
/// `value` must be a value of the `snowflake` type (a live `Box<SnowflakeKey>` pointer; see
/// the `ModuleValue` impl) that Redis keeps alive and unchanged for `'a`.
unsafe fn key_at<'a>(value: *const c_void) -> &'a SnowflakeKey {
    // SAFETY: the caller's contract.
    unsafe { &*value.cast::<SnowflakeKey>() }
}

/// The first encoding whose aux record carries remembered segment values.
const AUX_WITH_SEGMENT_MARKS: c_int = 1;

/// # Safety
/// Called by Redis only, while it writes an RDB file or stream, with that file's IO handle.
unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    guard::or_log("saving the snowflake position to RDB", (), || {
        // The time field of the last position: time units since the epoch (milliseconds
        // with the default unit, which is what files written before units existed hold).
        let last_time = instance::with_sequence(|sequence| {
            sequence.last_position().map_or(0, |position| position.time)
        });
        raw::save_unsigned(rdb, last_time);
        let marks = failback_marks::snapshot();
        raw::save_unsigned(rdb, marks.len() as u64);
        for (db, key, value) in marks {
            raw::save_signed(rdb, i64::from(db));
            raw::save_slice(rdb, &key);
            raw::save_signed(rdb, value);
        }
    });
}

/// # Safety
/// Called by Redis only, while it loads an RDB file or stream, with that file's IO handle.
unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let failed = raw::REDISMODULE_ERR as c_int;
    guard::or_log("loading the snowflake position from RDB", failed, || {
        if !encodings::readable(encver) {
            encodings::refuse_aux(rdb, encver);
            return failed;
        }
        let loaded = (|| -> Result<(), redis_module::error::Error> {
            let last_time = raw::load_unsigned(rdb)?;
            // The instance's own saved position, or its master's in a full sync: either way
            // IDs up to it exist, so they must not be issued again, whatever the clock says.
            instance::with_sequence(|sequence| {
                sequence.raise_floor(last_time, clock::monotonic_ms())
            });
            if encver >= AUX_WITH_SEGMENT_MARKS {
                // Only values of this instance's own class mean anything to it: a master's
                // remembered values, arriving in a full sync, are of the master's class.
                let identity = instance::config().identity;
                for _ in 0..raw::load_unsigned(rdb)? {
                    let db = raw::load_signed(rdb)?;
                    let key = raw::load_string_buffer(rdb)?;
                    let value = raw::load_signed(rdb)?;
                    if let (Ok(db), true) = (i32::try_from(db), identity.owns(value)) {
                        failback_marks::remember(db, key.as_ref(), value);
                    }
                }
            }
            Ok(())
        })();
        match loaded {
            Ok(()) => raw::REDISMODULE_OK as c_int,
            Err(_) => failed,
        }
    })
}

/// # Safety
/// Called by Redis only, while it loads a `snowflake` key, with the file's IO handle. The
/// pointer returned becomes the key's value (a `Box<SnowflakeKey>`), or null for a failure.
unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard::or_log("loading a snowflake key", std::ptr::null_mut(), || {
        if !encodings::readable(encver) {
            encodings::refuse_key(rdb, encver);
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
    })
}

/// # Safety
/// Called by Redis only, with a `snowflake` value and the RDB file's IO handle.
unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type, alive for the callback.
    let record = unsafe { key_at(value) }.record;
    guard::or_log("saving a snowflake key", (), || {
        raw::save_unsigned(rdb, record.bound);
        raw::save_unsigned(rdb, record.owner);
    });
}

/// # Safety
/// Called by Redis only, during an AOF rewrite, with the key's name, its `snowflake` value
/// and the AOF's IO handle.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard::or_log("rewriting a snowflake key into the AOF", (), || {
        // SAFETY: Redis passes a value of this type, alive for the callback.
        let record = unsafe { key_at(value) }.record;
        // SAFETY: format "sll" takes a Redis string and two long longs, given in order; the
        // pointers are the ones Redis passed.
        unsafe {
            raw::RedisModule_EmitAOF.unwrap()(
                aof,
                c"SNOWFLAKE.SETBOUND".as_ptr(),
                c"sll".as_ptr(),
                key,
                record.bound as std::ffi::c_longlong,
                record.owner as std::ffi::c_longlong,
            );
        }
    });
}

/// # Safety
/// Called by Redis only (`MEMORY USAGE`); the value is not read.
unsafe extern "C" fn mem_usage(_value: *const c_void) -> usize {
    guard::or_log(
        "sizing a snowflake key",
        0,
        std::mem::size_of::<SnowflakeKey>,
    )
}

/// # Safety
/// Called by Redis only (`DEBUG DIGEST`), with a `snowflake` value and a digest handle.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard::or_log("digesting a snowflake key", (), || {
        // The record only: the owner's in-memory last ID is not data replicas have.
        // SAFETY: Redis passes a value of this type, alive for the callback.
        let record = unsafe { key_at(value) }.record;
        // SAFETY: md is the digest Redis passed, valid for the callback.
        unsafe {
            raw::RedisModule_DigestAddLongLong.unwrap()(md, record.bound as std::ffi::c_longlong);
            raw::RedisModule_DigestAddLongLong.unwrap()(md, record.owner as std::ffi::c_longlong);
            raw::RedisModule_DigestEndSequence.unwrap()(md);
        }
    });
}

/// # Safety
/// Called by Redis only, once, when a `snowflake` value is deleted: the value is a
/// `Box<SnowflakeKey>` pointer nobody uses afterwards.
unsafe extern "C" fn free(value: *mut c_void) {
    guard::or_log("freeing a snowflake key", (), || {
        // SAFETY: see above; the pointer came from `Box::into_raw` (the `ModuleValue` impl).
        drop(unsafe { Box::from_raw(value.cast::<SnowflakeKey>()) });
    });
}

/// # Safety
/// Called by Redis only (`COPY`), with a `snowflake` value; the pointer returned becomes
/// the copy's value.
unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard::or_log("copying a snowflake key", std::ptr::null_mut(), || {
        // SAFETY: Redis passes a value of this type, alive for the callback.
        let key = unsafe { key_at(value) }.clone();
        Box::into_raw(Box::new(key)).cast()
    })
}
