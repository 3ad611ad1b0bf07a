//! An open key of the running command, and typed access to what it holds.
//!
//! Everything here that Redis hands out by pointer — a module value, a string's bytes — is
//! lent as a reference tied to a borrow of the [`Key`]: it cannot outlive the key, and no
//! shared reference can be held across a call that rewrites the key (those take
//! `&mut self`). Module values are reached only through [`ModuleValue`], whose implementor
//! vouches that its Redis type holds exactly that Rust type.

use std::ffi::c_int;
use std::marker::PhantomData;
use std::ptr::NonNull;

use redis_module::raw;

use crate::ffi::{format_i64, itoa_buffer, wrong_type, Refusal};

/// How a key is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading only. A missing key stays missing; closing it tells nobody it changed.
    Read,
    /// Reading and writing. Closing it signals the key as modified (`WATCH`, client-side
    /// caching).
    Write,
}

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// Nothing.
    Empty,
    /// A Redis string.
    String,
    /// A value of some module's type.
    Module,
    /// Any other Redis type.
    Other,
}

/// A Rust type stored as the values of a Redis module type.
///
/// # Safety
/// [`ModuleValue::registered`] must return the Redis type (or null before registration)
/// whose every value is a `Box<Self>` turned into a pointer with `Box::into_raw`, and whose
/// free callback drops it as a `Box<Self>`. [`Key`] relies on it to turn a value pointer
/// into `&Self`.
pub unsafe trait ModuleValue: Sized {
    /// The Redis type whose values are this Rust type.
    fn registered() -> *mut raw::RedisModuleType;
}

/// A key opened by the running command; closed when dropped.
pub struct Key<'call> {
    /// Null when a missing key is opened for reading (Redis returns no handle then; every
    /// API call below treats null as an empty key).
    handle: *mut raw::RedisModuleKey,
    access: Access,
    _call: PhantomData<&'call ()>,
}

impl<'call> Key<'call> {
    /// Opens `name` in the running command's database.
    ///
    /// # Safety
    /// `ctx` must be the running command's context and `name` a Redis string valid for
    /// `'call`, the duration of the command.
    pub unsafe fn open(
        ctx: *mut raw::RedisModuleCtx,
        name: NonNull<raw::RedisModuleString>,
        access: Access,
    ) -> Key<'call> {
        let mode = match access {
            Access::Read => raw::REDISMODULE_READ,
            Access::Write => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
        } as c_int;
        // SAFETY: ctx and name are valid for the call (the caller's contract); the handle is
        // closed on drop.
        let handle = unsafe { raw::RedisModule_OpenKey.unwrap()(ctx, name.as_ptr(), mode) };
        Key {
            handle: handle.cast(),
            access,
            _call: PhantomData,
        }
    }

    /// What the key holds.
    pub fn kind(&self) -> KeyKind {
        // SAFETY: the handle is open or null, which Redis reads as an empty key.
        let kind = unsafe { raw::RedisModule_KeyType.unwrap()(self.handle) };
        match kind as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_MODULE => KeyKind::Module,
            _ => KeyKind::Other,
        }
    }

    /// The key's value if it holds a `T`; `None` if it is empty; WRONGTYPE otherwise.
    pub fn value<T: ModuleValue>(&self) -> Result<Option<&T>, Refusal> {
        // SAFETY: the pointer is a live `Box<T>` owned by the key (`typed_value`), borrowed
        // for no longer than `&self`.
        Ok(self
            .typed_value::<T>()?
            .map(|value| unsafe { value.as_ref() }))
    }

    /// The key's value, to change in place, if it holds a `T`; `None` if it is empty;
    /// WRONGTYPE otherwise.
    ///
    /// Changing it through a key opened for reading is allowed: Redis then does not learn
    /// that the key changed, which is right only for state that is not part of the data
    /// (the snowflake owner's in-memory last ID).
    pub fn value_mut<T: ModuleValue>(&mut self) -> Result<Option<&mut T>, Refusal> {
        // SAFETY: as in `value`; `&mut self` makes this the only reference.
        Ok(self
            .typed_value::<T>()?
            .map(|mut value| unsafe { value.as_mut() }))
    }

    /// Stores `value` as the key's value: in place if the key holds a `T`, as a new value
    /// if it is empty; WRONGTYPE otherwise. The key must be open for writing.
    pub fn store<T: ModuleValue>(&mut self, value: T) -> Result<(), Refusal> {
        self.require_write()?;
        if let Some(current) = self.value_mut::<T>()? {
            *current = value;
            return Ok(());
        }
        let ptr = Box::into_raw(Box::new(value));
        // SAFETY: the key is open for writing and empty; T's registered type frees its
        // values as `Box<T>` (the `ModuleValue` contract). On failure Redis did not take
        // the pointer, so the box is taken back.
        let status = unsafe {
            raw::RedisModule_ModuleTypeSetValue.unwrap()(self.handle, T::registered(), ptr.cast())
        };
        if status != raw::REDISMODULE_OK as c_int {
            drop(unsafe { Box::from_raw(ptr) });
            return Err(write_failed());
        }
        Ok(())
    }

    /// The bytes of a string key (empty for an empty key).
    pub fn string_value(&self) -> &[u8] {
        if self.handle.is_null() {
            return &[];
        }
        let mut len = 0;
        let ptr = raw::string_dma(self.handle, &mut len, raw::KeyMode::READ);
        if ptr.is_null() {
            return &[];
        }
        // SAFETY: DMA returns `len` readable bytes valid until the key is modified or
        // closed; both need `&mut self` or the key's drop, which this borrow prevents.
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
    }

    /// Replaces the key's value with the integer `value` as a Redis string (like SET, this
    /// drops any TTL). The key must be open for writing.
    ///
    /// The digits are written into the string in place (truncate, then direct access) rather
    /// than with `RedisModule_StringSet`, which deletes the key and adds a new one: that
    /// costs about 2,000 instructions a call, more than `INCR` does in all.
    pub fn set_integer(&mut self, value: i64) -> Result<(), Refusal> {
        self.require_write()?;
        let mut buffer = itoa_buffer();
        let digits = format_i64(&mut buffer, value).as_bytes();
        // SAFETY: the handle is open for writing; StringTruncate makes the key a string of
        // exactly `digits.len()` bytes (creating it if empty), and DMA then points at those
        // bytes, which nothing else references (`&mut self`), until the key is closed.
        unsafe {
            let status = raw::RedisModule_StringTruncate.unwrap()(self.handle, digits.len());
            if status != raw::REDISMODULE_OK as c_int {
                return Err(write_failed());
            }
            let mut len = 0;
            let target = raw::string_dma(self.handle, &mut len, raw::KeyMode::WRITE);
            if target.is_null() || len != digits.len() {
                return Err(write_failed());
            }
            std::ptr::copy_nonoverlapping(digits.as_ptr(), target.cast::<u8>(), len);
            if raw::RedisModule_GetExpire.unwrap()(self.handle) != raw::REDISMODULE_NO_EXPIRE.into()
            {
                raw::RedisModule_SetExpire.unwrap()(self.handle, raw::REDISMODULE_NO_EXPIRE.into());
            }
        }
        Ok(())
    }

    /// The pointer to the key's value if it is a value of `T`'s registered type.
    fn typed_value<T: ModuleValue>(&self) -> Result<Option<NonNull<T>>, Refusal> {
        match self.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::Module => {
                // SAFETY: the key is open and holds a module value.
                let kind = unsafe { raw::RedisModule_ModuleTypeGetType.unwrap()(self.handle) };
                if kind.is_null() || kind != T::registered() {
                    return Err(wrong_type());
                }
                // SAFETY: as above; the type check makes the value a `Box<T>`'s pointer.
                let value = unsafe { raw::RedisModule_ModuleTypeGetValue.unwrap()(self.handle) };
                Ok(NonNull::new(value.cast::<T>()))
            }
            KeyKind::String | KeyKind::Other => Err(wrong_type()),
        }
    }

    fn require_write(&self) -> Result<(), Refusal> {
        match self.access {
            Access::Write if !self.handle.is_null() => Ok(()),
            Access::Write => Err(write_failed()),
            // A bug in a command, not a user's mistake: say so rather than crash.
            Access::Read => Err(Refusal::new(
                "ERR",
                "idgen tried to write a key it opened for reading (a bug: please report it)",
            )),
        }
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        raw::close_key(self.handle);
    }
}

fn write_failed() -> Refusal {
    Refusal::new("ERR", "could not write the key")
}
