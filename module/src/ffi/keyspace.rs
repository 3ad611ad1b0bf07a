//! The keyspace of the running command, its one open key, and typed access to what it holds.
//!
//! Soundness rests on three rules the types enforce:
//! - a command gets one [`Keyspace`] and opening a key borrows it mutably, so a command holds
//!   at most one [`Key`] at a time: no two handles on one Redis key, no `&mut` to a value
//!   aliased through another handle, no string borrowed from a handle another one rewrites;
//! - everything Redis hands out by pointer — a module value, a string's bytes — is lent as a
//!   reference tied to a borrow of the key, and calls that rewrite the key take `&mut self`;
//! - a key opened with [`Read`] has no method that changes it: state that lives only in
//!   memory (the snowflake owner's last ID) sits in a `Cell` of the value, and replicated
//!   data can be changed only through a [`Write`] key, whose closing tells Redis.
//!
//! Module values are reached only through [`ModuleDataType::data_type`]: a
//! `DataType<T>`, whose callbacks (the only other makers and freers of its values) treat
//! every value as a `Box<T>` (`ffi::data_type`).

use std::ffi::c_int;
use std::marker::PhantomData;
use std::ptr::NonNull;

use redis_module::raw;

use crate::ffi::call::{Arg, Call, Request};
use crate::ffi::data_type::ModuleDataType;
use crate::ffi::refusal::{wrong_type, Refusal};

/// How a key is opened: [`Read`] or [`Write`].
pub trait Mode: private::Sealed {
    /// The `RedisModule_OpenKey` mode.
    const OPEN_MODE: c_int;
}

/// Opened for reading: a missing key stays missing, and closing it tells nobody it changed.
pub struct Read;

/// Opened for reading and writing: closing it signals the key as modified (`WATCH`,
/// client-side caching).
pub struct Write;

impl Mode for Read {
    const OPEN_MODE: c_int = raw::REDISMODULE_READ as c_int;
}

impl Mode for Write {
    const OPEN_MODE: c_int = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
}

mod private {
    /// Only [`super::Read`] and [`super::Write`] are modes.
    pub trait Sealed {}
    impl Sealed for super::Read {}
    impl Sealed for super::Write {}
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

/// A key opened by a command, as handlers read it: a [`Key`] of the running command, or an
/// in-memory stand-in in unit tests.
pub trait KeyRead {
    /// The key's value if it holds a `T`; `None` if it is empty; WRONGTYPE otherwise.
    fn value<T: ModuleDataType>(&self) -> Result<Option<&T>, Refusal>;
    /// The key's string: `Ok(Some(bytes))` if it holds a string, `Ok(None)` if it is
    /// empty, and its kind if it holds anything else.
    fn string(&self) -> Result<Option<&[u8]>, KeyKind>;
}

/// A key opened to write, as handlers change it.
pub trait KeyWrite: KeyRead {
    /// The key's value, to change in place, if it holds a `T`; `None` if it is empty;
    /// WRONGTYPE otherwise.
    fn value_mut<T: ModuleDataType>(&mut self) -> Result<Option<&mut T>, Refusal>;
    /// Stores `value` as the key's value: in place if the key holds a `T`, as a new value
    /// if it is empty; WRONGTYPE otherwise.
    fn store<T: ModuleDataType>(&mut self, value: T) -> Result<(), Refusal>;
    /// Replaces the key's value with the integer `value` as a Redis string (dropping any
    /// TTL); refused for a key of another type.
    fn set_integer(&mut self, value: i64) -> Result<(), Refusal>;
}

/// The keys a handler opens, named by arguments of its call `R`: the running command's
/// [`Keyspace`], or an in-memory stand-in in unit tests. Opening borrows the keyspace
/// mutably, so a handler holds one key at a time. Handlers take it as a type parameter
/// (static dispatch).
pub trait Keys<R: Request + ?Sized> {
    /// A key opened for reading.
    type Read<'k>: KeyRead
    where
        Self: 'k;
    /// A key opened for reading and writing.
    type Write<'k>: KeyWrite
    where
        Self: 'k;
    /// Opens the key named by `name` for reading.
    fn open_read<'a>(&mut self, name: R::Arg<'a>) -> Self::Read<'_>
    where
        R: 'a;
    /// Opens the key named by `name` for reading and writing.
    fn open_write<'a>(&mut self, name: R::Arg<'a>) -> Self::Write<'_>
    where
        R: 'a;
}

impl Keys<Call> for Keyspace<'_> {
    type Read<'k>
        = Key<'k, Read>
    where
        Self: 'k;
    type Write<'k>
        = Key<'k, Write>
    where
        Self: 'k;
    #[inline(always)]
    fn open_read<'a>(&mut self, name: Arg<'a>) -> Key<'_, Read>
    where
        Call: 'a,
    {
        self.open::<Read>(name)
    }
    #[inline(always)]
    fn open_write<'a>(&mut self, name: Arg<'a>) -> Key<'_, Write>
    where
        Call: 'a,
    {
        self.open::<Write>(name)
    }
}

impl<M: Mode> KeyRead for Key<'_, M> {
    #[inline(always)]
    fn value<T: ModuleDataType>(&self) -> Result<Option<&T>, Refusal> {
        Key::value(self)
    }
    #[inline(always)]
    fn string(&self) -> Result<Option<&[u8]>, KeyKind> {
        Key::string(self)
    }
}

impl KeyWrite for Key<'_, Write> {
    #[inline(always)]
    fn value_mut<T: ModuleDataType>(&mut self) -> Result<Option<&mut T>, Refusal> {
        Key::value_mut(self)
    }
    #[inline(always)]
    fn store<T: ModuleDataType>(&mut self, value: T) -> Result<(), Refusal> {
        Key::store(self, value)
    }
    #[inline(always)]
    fn set_integer(&mut self, value: i64) -> Result<(), Refusal> {
        Key::set_integer(self, value)
    }
}

/// The keys of the running command. There is one per call (made by the command dispatcher),
/// and a key opened through it borrows it: one open key at a time.
pub struct Keyspace<'call> {
    ctx: NonNull<raw::RedisModuleCtx>,
    _call: PhantomData<&'call mut ()>,
}

impl<'call> Keyspace<'call> {
    /// The keyspace of the running command.
    ///
    /// # Safety
    /// `ctx` must be the running command's context, valid for `'call`, and only one
    /// `Keyspace` may be made per call.
    pub unsafe fn new(ctx: NonNull<raw::RedisModuleCtx>) -> Self {
        Keyspace {
            ctx,
            _call: PhantomData,
        }
    }

    /// Opens the key named by `name`, an argument of this call, in the calling client's
    /// database. It stays open (and this keyspace borrowed) until the key is dropped.
    pub fn open<M: Mode>(&mut self, name: Arg<'_>) -> Key<'_, M> {
        // SAFETY: ctx is the running command's (the contract of `new`) and `name` one of its
        // arguments, valid for the call; the handle is closed when the `Key` drops, before
        // the call ends (the key borrows this keyspace, which lives no longer than 'call).
        let handle = unsafe {
            raw::RedisModule_OpenKey.unwrap()(self.ctx.as_ptr(), name.raw(), M::OPEN_MODE)
        };
        Key {
            handle: handle.cast(),
            _open: PhantomData,
        }
    }
}

/// A key opened by the running command; closed when dropped.
pub struct Key<'open, M: Mode> {
    /// Null when a missing key is opened for reading (Redis returns no handle then; every
    /// API call below treats null as an empty key).
    handle: *mut raw::RedisModuleKey,
    _open: PhantomData<(&'open mut (), M)>,
}

impl<M: Mode> Key<'_, M> {
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
    #[inline(always)]
    pub fn value<T: ModuleDataType>(&self) -> Result<Option<&T>, Refusal> {
        // SAFETY: the pointer is a live `Box<T>` owned by the key (`typed_value`), borrowed
        // for no longer than `&self`; nothing can change it meanwhile (`value_mut` and
        // `store` take `&mut self`, and no other handle on the key exists).
        Ok(self
            .typed_value::<T>()?
            .map(|value| unsafe { value.as_ref() }))
    }

    /// The key's string: `Ok(Some(bytes))` if it holds a string, `Ok(None)` if it is
    /// empty, and its kind if it holds anything else.
    pub fn string(&self) -> Result<Option<&[u8]>, KeyKind> {
        if self.handle.is_null() {
            return Ok(None);
        }
        let mut len = 0;
        // One API call for the common case: Redis answers null for a key of another type
        // and a placeholder of length 0 for an empty key, which only then is asked apart
        // from an empty string.
        let ptr = raw::string_dma(self.handle, &mut len, raw::KeyMode::READ);
        if ptr.is_null() {
            return Err(self.kind());
        }
        if len == 0 {
            return match self.kind() {
                KeyKind::Empty => Ok(None),
                _ => Ok(Some(&[])),
            };
        }
        // SAFETY: DMA returns `len` readable bytes valid until the key is modified or
        // closed; both need `&mut self` or the key's drop, which this borrow prevents.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        }))
    }

    /// The pointer to the key's value if it is a value of `T`'s registered type.
    #[inline(always)]
    fn typed_value<T: ModuleDataType>(&self) -> Result<Option<NonNull<T>>, Refusal> {
        // The common case first, in two API calls: Redis answers null for an empty key or a
        // value that is not a module's, and only then is the key's kind asked.
        // SAFETY: the handle is open or null.
        let kind = unsafe { raw::RedisModule_ModuleTypeGetType.unwrap()(self.handle) };
        if !kind.is_null() && kind == T::data_type().registered() {
            // SAFETY: the key holds a value of T's type, a `Box<T>`'s pointer (`ffi::data_type`).
            let value = unsafe { raw::RedisModule_ModuleTypeGetValue.unwrap()(self.handle) };
            return Ok(NonNull::new(value.cast::<T>()));
        }
        match self.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::String | KeyKind::Module | KeyKind::Other => Err(wrong_type()),
        }
    }
}

impl Key<'_, Write> {
    /// The key's value, to change in place, if it holds a `T`; `None` if it is empty;
    /// WRONGTYPE otherwise.
    pub fn value_mut<T: ModuleDataType>(&mut self) -> Result<Option<&mut T>, Refusal> {
        // SAFETY: as in `value`; `&mut self` makes this the only reference.
        Ok(self
            .typed_value::<T>()?
            .map(|mut value| unsafe { value.as_mut() }))
    }

    /// Stores `value` as the key's value: in place if the key holds a `T`, as a new value
    /// if it is empty; WRONGTYPE otherwise.
    pub fn store<T: ModuleDataType>(&mut self, value: T) -> Result<(), Refusal> {
        self.require_handle()?;
        if let Some(current) = self.value_mut::<T>()? {
            *current = value;
            return Ok(());
        }
        let registered = T::data_type().registered();
        if registered.is_null() {
            // A type that was never registered with Redis has no values to hold.
            return Err(write_failed());
        }
        let ptr = Box::into_raw(Box::new(value));
        // SAFETY: the key is open for writing and empty; `DataType<T>`'s callbacks free its
        // values as `Box<T>` (`ffi::data_type`). On failure Redis did not take the pointer,
        // so the box is taken back.
        let status = unsafe {
            raw::RedisModule_ModuleTypeSetValue.unwrap()(self.handle, registered, ptr.cast())
        };
        if status != raw::REDISMODULE_OK as c_int {
            drop(unsafe { Box::from_raw(ptr) });
            return Err(write_failed());
        }
        Ok(())
    }

    /// Replaces the key's value with the integer `value` as a Redis string (like SET, this
    /// drops any TTL).
    ///
    /// The digits are written into the string in place (truncate, then direct access) rather
    /// than with `RedisModule_StringSet`, which deletes the key and adds a new one: that
    /// costs more than a whole `INCR` (docs/performance.md).
    pub fn set_integer(&mut self, value: i64) -> Result<(), Refusal> {
        self.require_handle()?;
        let mut buffer = itoa::Buffer::new();
        let digits = buffer.format(value).as_bytes();
        // SAFETY: the handle is open for writing; StringTruncate makes the key
        // a string of exactly `digits.len()` bytes (creating it if empty), and DMA then
        // points at those bytes, which nothing else references (`&mut self`), until the key
        // is closed.
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
}

impl Key<'_, Write> {
    /// Redis returns a handle for a missing key opened to write; a null one means the open
    /// failed, and nothing can be written.
    fn require_handle(&self) -> Result<(), Refusal> {
        if self.handle.is_null() {
            return Err(write_failed());
        }
        Ok(())
    }
}

impl<M: Mode> Drop for Key<'_, M> {
    fn drop(&mut self) {
        raw::close_key(self.handle);
    }
}

fn write_failed() -> Refusal {
    Refusal::new("ERR", "could not write the key")
}
