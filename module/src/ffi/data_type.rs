//! The raw side of a module data type: the callbacks Redis calls to load, save, rewrite,
//! digest, copy and free its values (and the module's aux record), which hand safe views
//! of their arguments, under the panic guard, to the type's safe implementation
//! ([`ModuleDataType`], `datatype::snowflake_key`).
//!
//! Every value of a [`DataType<T>`] is a `Box<T>` turned into a pointer: made by
//! `Key::store` (in `ffi::keyspace`) and by the `rdb_load` and `copy` callbacks below,
//! dropped as a `Box<T>` by `free`. A `DataType<T>` can only be made by [`DataType::new`],
//! whose callbacks are exactly these, so a key of that Redis type holds a `T`.

use std::ffi::{c_char, c_int, c_longlong, c_void, CStr};
use std::marker::PhantomData;
use std::ops::Deref;

use redis_module::logging::{log_io_error, RedisLogLevel};
use redis_module::{native_types::RedisType, raw};

use crate::ffi::guard;

/// A value could not be read from an RDB file or stream (it ended, or held another type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadFailed;

/// The RDB file or stream a callback reads or writes; lent to the type for the callback.
pub struct Rdb<'io> {
    io: *mut raw::RedisModuleIO,
    _callback: PhantomData<&'io mut ()>,
}

impl Rdb<'_> {
    /// Writes an unsigned integer.
    pub fn save_unsigned(&mut self, value: u64) {
        raw::save_unsigned(self.io, value);
    }

    /// Writes a signed integer.
    pub fn save_signed(&mut self, value: i64) {
        raw::save_signed(self.io, value);
    }

    /// Writes a byte string.
    pub fn save_bytes(&mut self, bytes: &[u8]) {
        raw::save_slice(self.io, bytes);
    }

    /// Reads an unsigned integer.
    pub fn load_unsigned(&mut self) -> Result<u64, LoadFailed> {
        raw::load_unsigned(self.io).map_err(|_| LoadFailed)
    }

    /// Reads a signed integer.
    pub fn load_signed(&mut self) -> Result<i64, LoadFailed> {
        raw::load_signed(self.io).map_err(|_| LoadFailed)
    }

    /// Reads a byte string.
    pub fn load_bytes(&mut self) -> Result<Vec<u8>, LoadFailed> {
        raw::load_string_buffer(self.io)
            .map(|buffer| buffer.as_ref().to_vec())
            .map_err(|_| LoadFailed)
    }

    /// Logs a warning about this file (Redis names the key being loaded, if any).
    pub fn log_warning(&self, message: &str) {
        log_io_error(self.io, RedisLogLevel::Warning, message);
    }
}

/// What `DEBUG DIGEST` folds a value into; lent to the type for the callback.
pub struct Digest<'md> {
    md: *mut raw::RedisModuleDigest,
    _callback: PhantomData<&'md mut ()>,
}

impl Digest<'_> {
    /// Adds an integer to the current sequence.
    pub fn add(&mut self, value: i64) {
        // SAFETY: md is the digest Redis passed, valid for the callback (`Digest` lives no
        // longer).
        unsafe { raw::RedisModule_DigestAddLongLong.unwrap()(self.md, value as c_longlong) };
    }

    /// Ends the current sequence (one value's fields).
    pub fn end_sequence(&mut self) {
        // SAFETY: as in `add`.
        unsafe { raw::RedisModule_DigestEndSequence.unwrap()(self.md) };
    }
}

/// A command an AOF rewrite writes for a value: `COMMAND key args…`.
pub struct AofCommand {
    /// The command's name.
    pub name: &'static CStr,
    /// Its arguments after the key.
    pub args: AofArgs,
}

/// The shapes of arguments an AOF command can take after the key.
pub enum AofArgs {
    /// Two integers.
    Two([i64; 2]),
    /// Five integers and a byte string.
    FiveAndBytes([i64; 5], Vec<u8>),
}

/// A Rust type stored as the values of a Redis module data type, with what Redis asks of
/// such a type. Its values are only ever reached through [`DataType<Self>`].
pub trait ModuleDataType: Clone + Sized + 'static {
    /// The type's name, exactly 9 characters (`TYPE key` answers it).
    const NAME: &'static str;
    /// The encoding version Redis stores with each value and with the aux record.
    const ENCODING_VERSION: i32;

    /// The registered type.
    fn data_type() -> &'static DataType<Self>;
    /// Reads a value written in encoding `encver`; `None` for a failure (the load fails).
    fn rdb_load(rdb: &mut Rdb<'_>, encver: i32) -> Option<Self>;
    /// Writes the value.
    fn rdb_save(&self, rdb: &mut Rdb<'_>);
    /// The commands that recreate the value in an AOF rewrite, in order.
    fn aof_commands(&self) -> Vec<AofCommand>;
    /// Folds the value into `DEBUG DIGEST`.
    fn digest(&self, digest: &mut Digest<'_>);
    /// The value's size for `MEMORY USAGE`.
    fn memory_usage(&self) -> usize;
    /// Whether the type writes and reads the module's aux record (one type of the module
    /// does).
    const HAS_AUX: bool;
    /// Writes the module's aux record (before the keys of an RDB file or stream).
    fn aux_save(rdb: &mut Rdb<'_>);
    /// Reads the aux record written in encoding `encver`; false for a failure.
    fn aux_load(rdb: &mut Rdb<'_>, encver: i32) -> bool;
}

/// A module data type whose values are `T`s.
pub struct DataType<T> {
    redis_type: RedisType,
    _values: PhantomData<fn() -> T>,
}

impl<T: ModuleDataType> DataType<T> {
    /// The type, with the callbacks that treat its values as `Box<T>`.
    pub const fn new() -> Self {
        DataType {
            redis_type: RedisType::new(
                T::NAME,
                T::ENCODING_VERSION,
                raw::RedisModuleTypeMethods {
                    version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
                    rdb_load: Some(rdb_load::<T>),
                    rdb_save: Some(rdb_save::<T>),
                    aof_rewrite: Some(aof_rewrite::<T>),
                    mem_usage: Some(mem_usage::<T>),
                    digest: Some(digest::<T>),
                    free: Some(free::<T>),
                    aux_load: if T::HAS_AUX {
                        Some(aux_load::<T>)
                    } else {
                        None
                    },
                    aux_save: if T::HAS_AUX {
                        Some(aux_save::<T>)
                    } else {
                        None
                    },
                    aux_save_triggers: if T::HAS_AUX {
                        raw::REDISMODULE_AUX_BEFORE_RDB as c_int
                    } else {
                        0
                    },
                    free_effort: None,
                    unlink: None,
                    copy: Some(copy::<T>),
                    defrag: None,
                    mem_usage2: None,
                    free_effort2: None,
                    unlink2: None,
                    copy2: None,
                    aux_save2: None,
                },
            ),
            _values: PhantomData,
        }
    }

    /// The Redis type, once registered (null before).
    pub fn registered(&self) -> *mut raw::RedisModuleType {
        *self.redis_type.raw_type.borrow()
    }
}

/// What `redis_module!`'s `data_types` registers.
impl<T> Deref for DataType<T> {
    type Target = RedisType;

    fn deref(&self) -> &RedisType {
        &self.redis_type
    }
}

/// The value behind a pointer Redis passes to a type callback.
///
/// # Safety
/// `value` must be a value of `T`'s data type (a live `Box<T>` pointer; see the module
/// docs) that Redis keeps alive and unchanged for `'a`.
unsafe fn value_at<'a, T>(value: *const c_void) -> &'a T {
    // SAFETY: the caller's contract.
    unsafe { &*value.cast::<T>() }
}

/// An RDB handle lent for one callback.
fn rdb<'io>(io: *mut raw::RedisModuleIO) -> Rdb<'io> {
    Rdb {
        io,
        _callback: PhantomData,
    }
}

/// # Safety
/// Called by Redis only, while it writes an RDB file or stream, with that file's IO handle.
unsafe extern "C" fn aux_save<T: ModuleDataType>(io: *mut raw::RedisModuleIO, _when: c_int) {
    guard::or_log("saving the module's aux record to RDB", (), || {
        T::aux_save(&mut rdb(io));
    });
}

/// # Safety
/// Called by Redis only, while it loads an RDB file or stream, with that file's IO handle.
unsafe extern "C" fn aux_load<T: ModuleDataType>(
    io: *mut raw::RedisModuleIO,
    encver: c_int,
    _when: c_int,
) -> c_int {
    let failed = raw::REDISMODULE_ERR as c_int;
    guard::or_log("loading the module's aux record from RDB", failed, || {
        if T::aux_load(&mut rdb(io), encver) {
            raw::REDISMODULE_OK as c_int
        } else {
            failed
        }
    })
}

/// # Safety
/// Called by Redis only, while it loads a value of the type, with the file's IO handle. The
/// pointer returned becomes the key's value (a `Box<T>`), or null for a failure.
unsafe extern "C" fn rdb_load<T: ModuleDataType>(
    io: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    guard::or_log(
        "loading a key of a module type",
        std::ptr::null_mut(),
        || {
            T::rdb_load(&mut rdb(io), encver).map_or(std::ptr::null_mut(), |value| {
                Box::into_raw(Box::new(value)).cast()
            })
        },
    )
}

/// # Safety
/// Called by Redis only, with a value of the type and the RDB file's IO handle.
unsafe extern "C" fn rdb_save<T: ModuleDataType>(io: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard::or_log("saving a key of a module type", (), || {
        // SAFETY: Redis passes a value of this type, alive for the callback.
        unsafe { value_at::<T>(value) }.rdb_save(&mut rdb(io));
    });
}

/// # Safety
/// Called by Redis only, during an AOF rewrite, with the key's name, a value of the type
/// and the AOF's IO handle.
unsafe extern "C" fn aof_rewrite<T: ModuleDataType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard::or_log("rewriting a key of a module type into the AOF", (), || {
        // SAFETY: Redis passes a value of this type, alive for the callback.
        let commands = unsafe { value_at::<T>(value) }.aof_commands();
        for command in commands {
            match command.args {
                // SAFETY: format "sll" takes a Redis string and two long longs, given in
                // order; the pointers are the ones Redis passed, and the name is a static C
                // string.
                AofArgs::Two([first, second]) => unsafe {
                    raw::RedisModule_EmitAOF.unwrap()(
                        aof,
                        command.name.as_ptr(),
                        c"sll".as_ptr(),
                        key,
                        first as c_longlong,
                        second as c_longlong,
                    );
                },
                // SAFETY: format "slllllb" takes a Redis string, five long longs and a
                // buffer as pointer and length, given in order; the buffer lives until the
                // call returns (Redis copies it).
                AofArgs::FiveAndBytes(ints, bytes) => unsafe {
                    raw::RedisModule_EmitAOF.unwrap()(
                        aof,
                        command.name.as_ptr(),
                        c"slllllb".as_ptr(),
                        key,
                        ints[0] as c_longlong,
                        ints[1] as c_longlong,
                        ints[2] as c_longlong,
                        ints[3] as c_longlong,
                        ints[4] as c_longlong,
                        bytes.as_ptr().cast::<c_char>(),
                        bytes.len(),
                    );
                },
            }
        }
    });
}

/// # Safety
/// Called by Redis only (`MEMORY USAGE`), with a value of the type.
unsafe extern "C" fn mem_usage<T: ModuleDataType>(value: *const c_void) -> usize {
    guard::or_log("sizing a key of a module type", 0, || {
        // SAFETY: Redis passes a value of this type, alive for the callback.
        unsafe { value_at::<T>(value) }.memory_usage()
    })
}

/// # Safety
/// Called by Redis only (`DEBUG DIGEST`), with a value of the type and a digest handle.
unsafe extern "C" fn digest<T: ModuleDataType>(
    md: *mut raw::RedisModuleDigest,
    value: *mut c_void,
) {
    guard::or_log("digesting a key of a module type", (), || {
        // SAFETY: Redis passes a value of this type, alive for the callback.
        let value = unsafe { value_at::<T>(value) };
        value.digest(&mut Digest {
            md,
            _callback: PhantomData,
        });
    });
}

/// # Safety
/// Called by Redis only, once, when a value of the type is deleted: the value is a
/// `Box<T>` pointer nobody uses afterwards.
unsafe extern "C" fn free<T: ModuleDataType>(value: *mut c_void) {
    guard::or_log("freeing a key of a module type", (), || {
        // SAFETY: see above; every value of the type came from `Box::into_raw`.
        drop(unsafe { Box::from_raw(value.cast::<T>()) });
    });
}

/// # Safety
/// Called by Redis only (`COPY`), with a value of the type; the pointer returned becomes
/// the copy's value.
unsafe extern "C" fn copy<T: ModuleDataType>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard::or_log(
        "copying a key of a module type",
        std::ptr::null_mut(),
        || {
            // SAFETY: Redis passes a value of this type, alive for the callback.
            let copy = unsafe { value_at::<T>(value) }.clone();
            Box::into_raw(Box::new(copy)).cast()
        },
    )
}
