//! Thin safe wrappers over the raw Redis module API calls the commands use.
//!
//! Commands are registered with our own `extern "C"` entry points (see `registry.rs`), so
//! arguments are read in place from `argv` without copying them into owned strings.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_longlong, CStr, CString};
use std::ptr::NonNull;

use redis_module::raw;

/// The context of one command call.
pub struct Call {
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
    /// The context flags, asked of Redis once per call (a batch reply consults them per ID).
    flags: Cell<Option<u32>>,
}

/// Why a command stops before doing its work: the error reply to send.
#[derive(Debug)]
pub struct Refusal(pub String);

impl Refusal {
    /// A refusal whose reply is `-CODE message`.
    pub fn new(code: &str, message: impl std::fmt::Display) -> Self {
        Refusal(format!("{code} {message}"))
    }
}

impl From<idgen_core::IdError> for Refusal {
    fn from(error: idgen_core::IdError) -> Self {
        Refusal::new(error.code(), error)
    }
}

/// The standard Redis reply for a key of another type.
pub fn wrong_type() -> Refusal {
    Refusal("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

impl Call {
    /// Wraps the arguments Redis passes to a command entry point.
    ///
    /// # Safety
    /// `ctx`, `argv` and `argc` must be the ones Redis passed to the running command.
    pub unsafe fn new(
        ctx: *mut raw::RedisModuleCtx,
        argv: *mut *mut raw::RedisModuleString,
        argc: c_int,
    ) -> Self {
        Call {
            ctx,
            argv,
            argc: usize::try_from(argc).unwrap_or(0),
            flags: Cell::new(None),
        }
    }

    /// Number of arguments, the command name included.
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// The raw string of argument `index` (which must be below `argc`).
    pub fn arg(&self, index: usize) -> *mut raw::RedisModuleString {
        assert!(index < self.argc, "argument {index} of {}", self.argc);
        // SAFETY: Redis guarantees argv holds argc valid strings for the call's duration.
        unsafe { *self.argv.add(index) }
    }

    /// The bytes of argument `index`.
    pub fn arg_bytes(&self, index: usize) -> &[u8] {
        string_bytes(self.arg(index))
    }

    /// Argument `index` as an integer, using Redis's own strict parser.
    pub fn arg_integer(&self, index: usize) -> Option<i64> {
        let mut value: c_longlong = 0;
        // SAFETY: the argument is a valid RedisModuleString for the call's duration.
        let status =
            unsafe { raw::RedisModule_StringToLongLong.unwrap()(self.arg(index), &mut value) };
        (status == raw::REDISMODULE_OK as c_int).then_some(value)
    }

    /// The database the calling client has selected.
    pub fn selected_db(&self) -> i32 {
        // SAFETY: ctx is the running command's context.
        unsafe { raw::RedisModule_GetSelectedDb.unwrap()(self.ctx) }
    }

    /// The context flags (replica, loading, replicated from master, in a script…). They
    /// cannot change while a command runs, so Redis is asked once.
    pub fn flags(&self) -> u32 {
        if let Some(flags) = self.flags.get() {
            return flags;
        }
        // SAFETY: ctx is the running command's context.
        let flags = unsafe { raw::RedisModule_GetContextFlags.unwrap()(self.ctx) as u32 };
        self.flags.set(Some(flags));
        flags
    }

    /// Whether the call comes from the master's replication stream or from loading a file,
    /// rather than from a client.
    pub fn is_replicated_or_loading(&self) -> bool {
        self.flags() & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING)
            != 0
    }

    /// Whether the call comes from a Lua script or function, where numbers are doubles
    /// that cannot hold a 63-bit ID exactly.
    pub fn is_from_script(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_LUA != 0
    }

    /// Replies with a snowflake ID: an integer, or a string inside scripts so that Lua
    /// does not round it to a double.
    pub fn reply_id(&self, id: u64) {
        if self.is_from_script() {
            let mut buffer = itoa_buffer();
            self.reply_bulk(format_u64(&mut buffer, id));
        } else {
            self.reply_integer(id as i64);
        }
    }

    /// Whether this instance is a replica.
    pub fn is_replica(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0
    }

    /// Opens `key` (an argument of this call) for reading, and for writing if `writable`.
    pub fn open_key(&self, key: *mut raw::RedisModuleString, writable: bool) -> Key {
        let mode = if writable {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        } as c_int;
        // SAFETY: ctx and key are valid for the call; the handle is closed on drop.
        let handle = unsafe { raw::RedisModule_OpenKey.unwrap()(self.ctx, key, mode) };
        Key {
            handle: handle.cast(),
        }
    }

    /// Propagates `command key value` to replicas and the AOF, in place of this call.
    pub fn replicate_key_value(
        &self,
        command: &CStr,
        key: *mut raw::RedisModuleString,
        value: i64,
    ) {
        // SAFETY: format "sl" takes a RedisModuleString and a long long, given in order.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                self.ctx,
                command.as_ptr(),
                c"sl".as_ptr(),
                key,
                value as c_longlong,
            );
        }
    }

    /// Propagates `command key first second` to replicas and the AOF, in place of this call.
    pub fn replicate_key_values(
        &self,
        command: &CStr,
        key: *mut raw::RedisModuleString,
        first: i64,
        second: i64,
    ) {
        // SAFETY: format "sll" takes a RedisModuleString and two long longs, given in order.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                self.ctx,
                command.as_ptr(),
                c"sll".as_ptr(),
                key,
                first as c_longlong,
                second as c_longlong,
            );
        }
    }

    /// Fires a keyspace notification `event` of `class` for `key`.
    pub fn notify(&self, class: raw::NotifyEvent, event: &CStr, key: *mut raw::RedisModuleString) {
        // SAFETY: all pointers are valid for the call.
        unsafe {
            raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
                self.ctx,
                class.bits(),
                event.as_ptr(),
                key,
            );
        }
    }

    /// Replies with an integer.
    pub fn reply_integer(&self, value: i64) {
        raw::reply_with_long_long(self.ctx, value);
    }

    /// Starts an array reply of `len` elements, to be followed by `len` replies.
    pub fn reply_array(&self, len: usize) {
        raw::reply_with_array(self.ctx, len as std::ffi::c_long);
    }

    /// Starts a map reply of `len` pairs (a flat array of 2·len for RESP2 clients).
    pub fn reply_map(&self, len: usize) {
        raw::reply_with_map(self.ctx, len as std::ffi::c_long);
    }

    /// Replies with a bulk string.
    pub fn reply_bulk(&self, text: &str) {
        raw::reply_with_string_buffer(self.ctx, text.as_ptr().cast::<c_char>(), text.len());
    }

    /// Replies with a simple string such as `OK`.
    pub fn reply_simple(&self, text: &CStr) {
        raw::reply_with_simple_string(self.ctx, text.as_ptr());
    }

    /// Replies with a null.
    pub fn reply_null(&self) {
        raw::reply_with_null(self.ctx);
    }

    /// Replies with an error; `refusal` holds `CODE message`.
    pub fn reply_refusal(&self, refusal: &Refusal) {
        let text = CString::new(refusal.0.replace(['\r', '\n', '\0'], " "))
            .unwrap_or_else(|_| CString::from(c"ERR invalid error text"));
        // SAFETY: ctx is valid and text is NUL-terminated.
        unsafe { raw::RedisModule_ReplyWithError.unwrap()(self.ctx, text.as_ptr()) };
    }

    /// Replies with Redis's standard wrong-number-of-arguments error.
    pub fn reply_wrong_arity(&self) {
        // SAFETY: ctx is valid.
        unsafe { raw::RedisModule_WrongArity.unwrap()(self.ctx) };
    }
}

/// Room for the decimal digits of any u64, or of any i64 with its sign.
fn itoa_buffer() -> [u8; 21] {
    [0; 21]
}

/// Writes `value` in decimal into the end of `buffer` without allocating.
fn format_u64(buffer: &mut [u8; 21], value: u64) -> &str {
    format_decimal(buffer, false, value)
}

/// Writes `value` in decimal into the end of `buffer` without allocating.
fn format_i64(buffer: &mut [u8; 21], value: i64) -> &str {
    format_decimal(buffer, value < 0, value.unsigned_abs())
}

fn format_decimal(buffer: &mut [u8; 21], negative: bool, mut magnitude: u64) -> &str {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        start -= 1;
        buffer[start] = b'-';
    }
    // Only ASCII digits and a sign were written.
    std::str::from_utf8(&buffer[start..]).unwrap_or("0")
}

/// The bytes of a Redis string.
pub fn string_bytes<'a>(string: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0;
    let ptr = raw::string_ptr_len(string, &mut len);
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: Redis returns a pointer to `len` bytes that live as long as the string.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// What a key holds.
pub enum KeyKind {
    /// Nothing.
    Empty,
    /// A Redis string.
    String,
    /// A value of a module type; the pointer is the type's identity.
    Module(*mut raw::RedisModuleType),
    /// Any other Redis type.
    Other,
}

/// An open key, closed when dropped.
pub struct Key {
    handle: *mut raw::RedisModuleKey,
}

impl Key {
    /// What the key holds.
    pub fn kind(&self) -> KeyKind {
        // SAFETY: the handle is open.
        let kind = unsafe { raw::RedisModule_KeyType.unwrap()(self.handle) };
        match kind as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_MODULE => {
                // SAFETY: the key holds a module value.
                KeyKind::Module(unsafe { raw::RedisModule_ModuleTypeGetType.unwrap()(self.handle) })
            }
            _ => KeyKind::Other,
        }
    }

    /// The bytes of a string key.
    pub fn string_value(&self) -> &[u8] {
        let mut len = 0;
        let ptr = raw::string_dma(self.handle, &mut len, raw::KeyMode::READ);
        if ptr.is_null() {
            return &[];
        }
        // SAFETY: DMA returns `len` readable bytes valid until the key is modified or closed.
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
    }

    /// Replaces the key's value with the integer `value` as a Redis string (like SET, this
    /// drops any TTL).
    ///
    /// The digits are written into the string in place (truncate, then direct access) rather
    /// than with `RedisModule_StringSet`, which deletes the key and adds a new one: that
    /// costs about 2,000 instructions a call, more than `INCR` does in all.
    pub fn set_integer(&self, value: i64) -> Result<(), Refusal> {
        let mut buffer = itoa_buffer();
        let digits = format_i64(&mut buffer, value).as_bytes();
        let failed = || Refusal::new("ERR", "could not write the key");
        // SAFETY: the handle is open for writing; StringTruncate makes the key a string of
        // exactly `digits.len()` bytes (creating it if empty), and DMA then points at those
        // bytes until the key is closed.
        unsafe {
            let status = raw::RedisModule_StringTruncate.unwrap()(self.handle, digits.len());
            if status != raw::REDISMODULE_OK as c_int {
                return Err(failed());
            }
            let mut len = 0;
            let target = raw::string_dma(self.handle, &mut len, raw::KeyMode::WRITE);
            if target.is_null() || len != digits.len() {
                return Err(failed());
            }
            std::ptr::copy_nonoverlapping(digits.as_ptr(), target.cast::<u8>(), len);
            if raw::RedisModule_GetExpire.unwrap()(self.handle) != raw::REDISMODULE_NO_EXPIRE.into()
            {
                raw::RedisModule_SetExpire.unwrap()(self.handle, raw::REDISMODULE_NO_EXPIRE.into());
            }
        }
        Ok(())
    }

    /// The module value of a key that holds `module_type` (checked by the caller).
    pub fn module_value<T>(&self) -> Option<NonNull<T>> {
        // SAFETY: the handle is open; the caller checked the type.
        NonNull::new(unsafe { raw::RedisModule_ModuleTypeGetValue.unwrap()(self.handle) }.cast())
    }

    /// Stores a new module value; Redis owns it from now on and frees it with the type's
    /// free callback.
    pub fn set_module_value<T>(
        &self,
        module_type: *mut raw::RedisModuleType,
        value: Box<T>,
    ) -> Result<(), Refusal> {
        let ptr = Box::into_raw(value);
        // SAFETY: the key is open for writing; on failure we take the box back.
        let status = unsafe {
            raw::RedisModule_ModuleTypeSetValue.unwrap()(self.handle, module_type, ptr.cast())
        };
        if status != raw::REDISMODULE_OK as c_int {
            // SAFETY: Redis did not take ownership.
            drop(unsafe { Box::from_raw(ptr) });
            return Err(Refusal::new("ERR", "could not write the key"));
        }
        Ok(())
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        raw::close_key(self.handle);
    }
}
