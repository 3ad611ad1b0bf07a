//! Visiting every string key of every database from a server-event callback (the FFI part
//! of remembering segment values before a full sync erases them).

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use crate::ffi::guard;

/// The context Redis passes to a server-event callback, which comes with a temporary client
/// of its own (so it can select databases and scan them).
pub struct EventContext {
    ctx: *mut raw::RedisModuleCtx,
}

/// A visitor of `(database, key, value)`.
type StringVisitor<'a> = &'a mut dyn FnMut(i32, &[u8], &[u8]);

/// What the scan callback needs: the visitor, the database being scanned, and whether the
/// visitor panicked (then it is not called again).
struct ScanState<'a> {
    visit: StringVisitor<'a>,
    max_len: usize,
    db: i32,
    panicked: bool,
}

impl EventContext {
    /// Wraps the context of a server-event callback.
    ///
    /// # Safety
    /// `ctx` must be the context Redis passed to the running server-event callback (other
    /// than the client-change event, whose context has no temporary client).
    pub unsafe fn new(ctx: *mut raw::RedisModuleCtx) -> Self {
        EventContext { ctx }
    }

    /// Whether this instance is a replica right now.
    pub fn is_replica(&self) -> bool {
        // SAFETY: ctx is a live event context (see `new`).
        let flags = unsafe { raw::RedisModule_GetContextFlags.unwrap()(self.ctx) } as u32;
        flags & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0
    }

    /// Calls `visit(db, key, value)` for every key holding a string of at most `max_len`
    /// bytes, in every database. Returns false if the visitor panicked (the scan then
    /// stopped calling it).
    ///
    /// Reading a string through a key handle makes Redis store a short or integer-encoded
    /// string as a plain one (`RM_StringDMA` unshares it): the length filter, which reads
    /// nothing, keeps that to the strings the caller wants.
    pub fn for_each_string(
        &self,
        max_len: usize,
        mut visit: impl FnMut(i32, &[u8], &[u8]),
    ) -> bool {
        let mut state = ScanState {
            visit: &mut visit,
            max_len,
            db: 0,
            panicked: false,
        };
        // SelectDb refuses an index past the last database: that ends the loop.
        // SAFETY: ctx is a live event context with a temporary client (see `new`).
        while unsafe { raw::RedisModule_SelectDb.unwrap()(self.ctx, state.db) }
            == raw::REDISMODULE_OK as c_int
        {
            // SAFETY: the cursor is created, used with this context only, and destroyed
            // here; `state` outlives every callback, which Redis makes during `Scan` only.
            unsafe {
                let cursor = raw::RedisModule_ScanCursorCreate.unwrap()();
                let privdata = (&mut state as *mut ScanState).cast::<c_void>();
                while raw::RedisModule_Scan.unwrap()(self.ctx, cursor, Some(visit_key), privdata)
                    != 0
                {}
                raw::RedisModule_ScanCursorDestroy.unwrap()(cursor);
            }
            state.db += 1;
        }
        !state.panicked
    }
}

/// The scan callback: reads a string key's bytes and hands them to the visitor.
///
/// # Safety
/// Called by Redis only, from `RedisModule_Scan` in `for_each_string`: `privdata` is the
/// `ScanState` given there, `keyname` and `key` are valid for the duration of the call.
unsafe extern "C" fn visit_key(
    _ctx: *mut raw::RedisModuleCtx,
    keyname: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    privdata: *mut c_void,
) {
    guard::or_log("scanning string keys", (), || {
        // SAFETY: privdata is the exclusive &mut ScanState that for_each_string passed in.
        let state = unsafe { &mut *privdata.cast::<ScanState>() };
        // SAFETY: key is the open handle Redis gives the callback (it may be null).
        if state.panicked
            || key.is_null()
            || unsafe { raw::RedisModule_KeyType.unwrap()(key) } as isize
                != raw::REDISMODULE_KEYTYPE_STRING
        {
            return;
        }
        // SAFETY: as above; the length of a string value is read without changing it.
        if unsafe { raw::RedisModule_ValueLength.unwrap()(key) } > state.max_len {
            return;
        }
        let mut value_len = 0;
        let value = raw::string_dma(key, &mut value_len, raw::KeyMode::READ);
        let mut name_len = 0;
        let name = raw::string_ptr_len(keyname, &mut name_len);
        if value.is_null() || name.is_null() {
            return;
        }
        // SAFETY: both pointers address that many bytes, alive until this callback returns
        // (nothing writes to the key meanwhile); the slices do not escape it.
        let (name, value) = unsafe {
            (
                std::slice::from_raw_parts(name.cast::<u8>(), name_len),
                std::slice::from_raw_parts(value.cast::<u8>(), value_len),
            )
        };
        let db = state.db;
        let visit = &mut state.visit;
        if catch_unwind(AssertUnwindSafe(|| visit(db, name, value))).is_err() {
            state.panicked = true;
        }
    });
}
