//! The raw side of the module's `INFO` section: the callback Redis calls, and a writer of
//! fields that only exists while that callback runs.

use std::ffi::c_int;
use std::marker::PhantomData;

use redis_module::{raw, Context};

use crate::ffi::guard;

/// The fields of the section being written; lent to [`InfoSection::write`] only.
pub struct InfoFields<'info> {
    ctx: *mut raw::RedisModuleInfoCtx,
    _callback: PhantomData<&'info ()>,
}

impl InfoFields<'_> {
    /// Adds `name:value` (Redis prefixes the module's name: `idgen_<name>`).
    pub fn number(&self, name: &str, value: u64) {
        raw::add_info_field_unsigned_long_long(self.ctx, name, value);
    }

    /// Adds `name:text`.
    pub fn text(&self, name: &str, value: &str) {
        raw::add_info_field_str(self.ctx, name, value);
    }
}

/// The module's one `INFO` section, named after the module (`# idgen`).
pub trait InfoSection {
    /// Writes every field of the section.
    fn write(fields: &InfoFields<'_>);
}

/// Makes `S` the module's `INFO` section.
pub fn register<S: InfoSection>(ctx: &Context) -> Result<(), String> {
    match raw::register_info_function(ctx.ctx, Some(add_info::<S>)) {
        raw::Status::Ok => Ok(()),
        raw::Status::Err => Err("could not register the INFO section".into()),
    }
}

/// Redis calls this for `INFO`, `INFO idgen`, `INFO modules` and crash reports.
///
/// # Safety
/// Called by Redis only, with the INFO context of the command (or crash report) running.
unsafe extern "C" fn add_info<S: InfoSection>(
    ctx: *mut raw::RedisModuleInfoCtx,
    _for_crash_report: c_int,
) {
    guard::or_log("writing INFO idgen", (), || {
        // Section name NULL: the section is named after the module, `# idgen`.
        raw::add_info_section(ctx, None);
        S::write(&InfoFields {
            ctx,
            _callback: PhantomData,
        });
    });
}
