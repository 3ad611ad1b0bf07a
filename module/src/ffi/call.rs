//! The running command's call: its arguments, its replies, and what it tells replicas.
//!
//! Commands are registered with our own `extern "C"` entry points (see `ffi/command_table.rs`), so
//! arguments are read in place from `argv` without copying them into owned strings.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_longlong, CStr, CString};
use std::marker::PhantomData;
use std::ptr::NonNull;

use idgen_core::commands::Command;
use idgen_core::IdFormat;
use redis_module::{raw, Context, ContextFlags};

use crate::ffi::connected_clients;
use crate::ffi::refusal::Refusal;

/// What a handler reads from a call, replies to it and tells replicas: the running [`Call`],
/// or a stand-in that records all of it in unit tests, so handlers are tested without a
/// server. Handlers take it as a type parameter (static dispatch: the module's build runs
/// `Call`'s own inlined methods).
pub trait Request {
    /// The running command's declaration.
    fn command(&self) -> &'static Command;
    /// Number of arguments, the command name included.
    fn argc(&self) -> usize;
    /// The bytes of argument `index` (below `argc`).
    fn arg_bytes(&self, index: usize) -> &[u8];
    /// Argument `index` as an integer, parsed as Redis parses integers.
    fn arg_integer(&self, index: usize) -> Option<i64>;
    /// Replies with an integer.
    fn reply_integer(&self, value: i64);
    /// Replies with a bulk string.
    fn reply_bulk(&self, text: &str);
    /// Starts an array reply of `len` elements.
    fn reply_array(&self, len: usize);
    /// Starts a map reply of `len` pairs.
    fn reply_map(&self, len: usize);
    /// Replies with a snowflake ID, as an integer (a string in scripts) or in `format`.
    fn reply_id_in(&self, id: u64, format: Option<IdFormat>);
    /// Replies with a snowflake ID, as an integer (a string in scripts).
    #[inline(always)]
    fn reply_id(&self, id: u64) {
        self.reply_id_in(id, None)
    }
    /// Replies with a simple string such as `OK`.
    fn reply_simple(&self, text: &CStr);
    /// Replies with a null.
    fn reply_null(&self);

    /// An argument as the call holds it: what a keyspace opens a key by, and what is
    /// replicated.
    type Arg<'a>: Copy
    where
        Self: 'a;
    /// Argument `index` (below `argc`).
    fn arg(&self, index: usize) -> Self::Arg<'_>;
    /// The database the calling client has selected.
    fn selected_db(&self) -> i32;
    /// Whether this instance is a replica.
    fn is_replica(&self) -> bool;
    /// Whether the call comes from the master's replication stream or from loading a file.
    fn is_replicated_or_loading(&self) -> bool;
    /// Writes `text` to the server log at warning level.
    fn log_warning(&self, text: &str);
    /// Propagates `command key value` to replicas and the AOF, in place of this call.
    fn replicate_key_value(&self, command: &CStr, key: Self::Arg<'_>, value: i64);
    /// Propagates `command key first second` to replicas and the AOF, in place of this call.
    fn replicate_key_values(&self, command: &CStr, key: Self::Arg<'_>, first: i64, second: i64);
    /// Propagates `command key i0 i1 i2 i3 i4 bytes` to replicas and the AOF, in place of
    /// this call.
    fn replicate_key_five_and_bytes(
        &self,
        command: &CStr,
        key: Self::Arg<'_>,
        ints: [i64; 5],
        bytes: &[u8],
    );
    /// Fires the command's keyspace notification (its declared event) of `class` for `key`.
    fn notify(&self, class: raw::NotifyEvent, key: Self::Arg<'_>);
}

impl Request for Call {
    fn command(&self) -> &'static Command {
        Call::command(self)
    }
    fn argc(&self) -> usize {
        Call::argc(self)
    }
    fn arg_bytes(&self, index: usize) -> &[u8] {
        Call::arg_bytes(self, index)
    }
    fn arg_integer(&self, index: usize) -> Option<i64> {
        Call::arg_integer(self, index)
    }
    fn reply_integer(&self, value: i64) {
        Call::reply_integer(self, value)
    }
    fn reply_bulk(&self, text: &str) {
        Call::reply_bulk(self, text)
    }
    fn reply_array(&self, len: usize) {
        Call::reply_array(self, len)
    }
    fn reply_map(&self, len: usize) {
        Call::reply_map(self, len)
    }
    #[inline(always)]
    fn reply_id_in(&self, id: u64, format: Option<IdFormat>) {
        Call::reply_id_in(self, id, format)
    }
    #[inline(always)]
    fn reply_id(&self, id: u64) {
        Call::reply_id(self, id)
    }
    fn reply_simple(&self, text: &CStr) {
        Call::reply_simple(self, text)
    }
    fn reply_null(&self) {
        Call::reply_null(self)
    }

    type Arg<'a> = Arg<'a>;
    #[inline(always)]
    fn arg(&self, index: usize) -> Arg<'_> {
        Call::arg(self, index)
    }
    fn selected_db(&self) -> i32 {
        Call::selected_db(self)
    }
    fn is_replica(&self) -> bool {
        Call::is_replica(self)
    }
    fn is_replicated_or_loading(&self) -> bool {
        Call::is_replicated_or_loading(self)
    }
    fn log_warning(&self, text: &str) {
        Call::log_warning(self, text)
    }
    fn replicate_key_value(&self, command: &CStr, key: Arg<'_>, value: i64) {
        Call::replicate_key_value(self, command, key, value)
    }
    fn replicate_key_values(&self, command: &CStr, key: Arg<'_>, first: i64, second: i64) {
        Call::replicate_key_values(self, command, key, first, second)
    }
    fn replicate_key_five_and_bytes(
        &self,
        command: &CStr,
        key: Arg<'_>,
        ints: [i64; 5],
        bytes: &[u8],
    ) {
        Call::replicate_key_five_and_bytes(self, command, key, ints, bytes)
    }
    fn notify(&self, class: raw::NotifyEvent, key: Arg<'_>) {
        Call::notify(self, class, key)
    }
}

/// An argument of the running command: a Redis string that lives as long as the call.
#[derive(Clone, Copy)]
pub struct Arg<'call> {
    string: NonNull<raw::RedisModuleString>,
    _call: PhantomData<&'call Call>,
}

impl<'call> Arg<'call> {
    /// The Redis string, for the module API.
    pub fn raw(self) -> *mut raw::RedisModuleString {
        self.string.as_ptr()
    }

    /// The argument's bytes.
    pub fn bytes(self) -> &'call [u8] {
        // SAFETY: an `Arg` is made only from the running call's argv (`Call::arg`), whose
        // strings live unchanged for the call.
        unsafe { string_bytes(self.string) }
    }
}

/// The context of one command call.
pub struct Call {
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
    /// The command's declaration.
    command: &'static Command,
    /// The context flags, asked of Redis once per call (a batch reply consults them per ID).
    flags: Cell<Option<c_int>>,
    /// Whether the call runs inside a script, once known (a batch reply asks per ID).
    from_script: Cell<Option<bool>>,
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
        command: &'static Command,
    ) -> Self {
        Call {
            ctx,
            argv,
            argc: usize::try_from(argc).unwrap_or(0),
            command,
            flags: Cell::new(None),
            from_script: Cell::new(None),
        }
    }

    /// The running command's declaration.
    pub fn command(&self) -> &'static Command {
        self.command
    }

    /// Number of arguments, the command name included.
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// Argument `index` (which must be below `argc`; a larger index panics, and the panic
    /// is answered as an internal error).
    pub fn arg(&self, index: usize) -> Arg<'_> {
        assert!(index < self.argc, "argument {index} of {}", self.argc);
        // SAFETY: Redis guarantees argv holds argc valid strings for the call's duration.
        let string = unsafe { *self.argv.add(index) };
        Arg {
            string: NonNull::new(string).expect("Redis passes non-null arguments"),
            _call: PhantomData,
        }
    }

    /// The bytes of argument `index`.
    pub fn arg_bytes(&self, index: usize) -> &[u8] {
        self.arg(index).bytes()
    }

    /// Argument `index` as an integer, using Redis's own strict parser.
    pub fn arg_integer(&self, index: usize) -> Option<i64> {
        let mut value: c_longlong = 0;
        // SAFETY: the argument is a valid RedisModuleString for the call's duration.
        let status = unsafe {
            raw::RedisModule_StringToLongLong.unwrap()(self.arg(index).string.as_ptr(), &mut value)
        };
        (status == raw::REDISMODULE_OK as c_int).then_some(value)
    }

    /// The database the calling client has selected.
    pub fn selected_db(&self) -> i32 {
        // SAFETY: ctx is the running command's context.
        unsafe { raw::RedisModule_GetSelectedDb.unwrap()(self.ctx) }
    }

    /// The context flags (replica, loading, replicated from master, in a script…). They
    /// cannot change while a command runs, so Redis is asked once.
    pub fn flags(&self) -> ContextFlags {
        if let Some(bits) = self.flags.get() {
            return ContextFlags::from_bits_truncate(bits);
        }
        // redis-module's `Context::get_flags` (`RedisModule_GetContextFlags`, typed) on the
        // running command's context.
        let flags = Context::new(self.ctx).get_flags();
        self.flags.set(Some(flags.bits()));
        flags
    }

    /// Whether the call comes from the master's replication stream or from loading a file,
    /// rather than from a client.
    pub fn is_replicated_or_loading(&self) -> bool {
        self.flags()
            .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    }

    /// Whether the call comes from a Lua script or function, where numbers are doubles
    /// that cannot hold a 63-bit ID exactly. A client known to have a connection is never
    /// in a script (see `connected_clients`), which spares asking for the context flags.
    #[inline(always)]
    pub fn is_from_script(&self) -> bool {
        match self.from_script.get() {
            Some(known) => known,
            None => {
                let client_id = self.client_id();
                let from_script = if connected_clients::is_known(client_id) {
                    false
                } else {
                    self.ask_whether_from_script(client_id)
                };
                self.from_script.set(Some(from_script));
                from_script
            }
        }
    }

    /// The first call of client `client_id`, or a script's: asks the context flags, and
    /// remembers a client with a connection.
    #[cold]
    #[inline(never)]
    fn ask_whether_from_script(&self, client_id: u64) -> bool {
        let from_script = self.flags().contains(ContextFlags::LUA);
        if !from_script && self.client_has_connection(client_id) {
            connected_clients::remember(client_id);
        }
        from_script
    }

    /// The calling client's ID (0 where the context has no client).
    fn client_id(&self) -> u64 {
        // SAFETY: ctx is the running command's context.
        unsafe { raw::RedisModule_GetClientId.unwrap()(self.ctx) }
    }

    /// Whether the client `client_id` has a network connection: the server's client index,
    /// which `RedisModule_GetClientInfoById` searches, holds only those.
    fn client_has_connection(&self, client_id: u64) -> bool {
        // SAFETY: a null info pointer asks only whether the client exists.
        let status =
            unsafe { raw::RedisModule_GetClientInfoById.unwrap()(std::ptr::null_mut(), client_id) };
        status == raw::REDISMODULE_OK as c_int
    }

    /// Replies with a snowflake ID: an integer, or a string inside scripts so that Lua
    /// does not round it to a double.
    #[inline(always)]
    pub fn reply_id(&self, id: u64) {
        if self.is_from_script() {
            self.reply_bulk(itoa::Buffer::new().format(id));
        } else {
            self.reply_integer(id as i64);
        }
    }

    /// Replies with a snowflake ID as [`Call::reply_id`] does, or as a string in `format`
    /// (`FORMAT decimal|base32|base62`).
    #[inline(always)]
    pub fn reply_id_in(&self, id: u64, format: Option<IdFormat>) {
        match format {
            None => self.reply_id(id),
            Some(format) => self.reply_bulk(&format.encode(id)),
        }
    }

    /// Whether this instance is a replica.
    pub fn is_replica(&self) -> bool {
        self.flags().contains(ContextFlags::SLAVE)
    }

    /// Writes `text` to the server log at warning level.
    pub fn log_warning(&self, text: &str) {
        redis_module::Context::new(self.ctx).log_warning(text);
    }

    /// Propagates `command key value` to replicas and the AOF, in place of this call.
    pub fn replicate_key_value(&self, command: &CStr, key: Arg<'_>, value: i64) {
        // SAFETY: format "sl" takes a RedisModuleString and a long long, given in order.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                self.ctx,
                command.as_ptr(),
                c"sl".as_ptr(),
                key.string.as_ptr(),
                value as c_longlong,
            );
        }
    }

    /// Propagates `command key first second` to replicas and the AOF, in place of this call.
    pub fn replicate_key_values(&self, command: &CStr, key: Arg<'_>, first: i64, second: i64) {
        // SAFETY: format "sll" takes a RedisModuleString and two long longs, given in order.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                self.ctx,
                command.as_ptr(),
                c"sll".as_ptr(),
                key.string.as_ptr(),
                first as c_longlong,
                second as c_longlong,
            );
        }
    }

    /// Propagates `command key i0 i1 i2 i3 i4 bytes` to replicas and the AOF, in place of
    /// this call (a lease pool's worker id: `LEASE.SETWORKER`).
    pub fn replicate_key_five_and_bytes(
        &self,
        command: &CStr,
        key: Arg<'_>,
        ints: [i64; 5],
        bytes: &[u8],
    ) {
        // SAFETY: format "slllllb" takes a RedisModuleString, five long longs and a buffer as
        // pointer and length, given in order; Redis copies the buffer before returning.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                self.ctx,
                command.as_ptr(),
                c"slllllb".as_ptr(),
                key.string.as_ptr(),
                ints[0] as c_longlong,
                ints[1] as c_longlong,
                ints[2] as c_longlong,
                ints[3] as c_longlong,
                ints[4] as c_longlong,
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            );
        }
    }

    /// Fires the command's keyspace notification (its declared event) of `class` for `key`.
    pub fn notify(&self, class: raw::NotifyEvent, key: Arg<'_>) {
        let Some(event) = self.command.event else {
            return;
        };
        // SAFETY: all pointers are valid for the call.
        unsafe {
            raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
                self.ctx,
                class.bits(),
                event.as_ptr(),
                key.string.as_ptr(),
            );
        }
    }

    /// Replies with an integer.
    #[inline]
    pub fn reply_integer(&self, value: i64) {
        // Called directly rather than through redis-module's `reply_with_long_long`, whose
        // status conversion is an out-of-line call on every reply (the status is always OK).
        // SAFETY: ctx is the running command's context.
        unsafe { raw::RedisModule_ReplyWithLongLong.unwrap()(self.ctx, value) };
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

/// The bytes of a Redis string.
///
/// # Safety
/// `string` must be a valid Redis string that lives, unchanged, for `'a`.
unsafe fn string_bytes<'a>(string: NonNull<raw::RedisModuleString>) -> &'a [u8] {
    let mut len = 0;
    let ptr = raw::string_ptr_len(string.as_ptr(), &mut len);
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: Redis returns a pointer to `len` bytes that live as long as the string.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}
