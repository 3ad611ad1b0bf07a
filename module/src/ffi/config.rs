//! Registering the settings with Redis as module configs (`CONFIG GET/SET idgen.*`, config
//! file lines), from their declarations in `idgen_core::SETTINGS`, each stored in one atomic.

use std::ffi::{c_char, c_int, c_longlong, c_uint, c_void, CString};
use std::sync::atomic::{AtomicI64, Ordering};

use idgen_core::{Setting, SettingKind};
use redis_module::{raw, Context};

/// Where Redis reads and writes a config: the atomic passed as private data.
///
/// # Safety
/// `privdata` must be the private data a config was registered with by [`register`].
unsafe fn slot(privdata: *mut c_void) -> &'static AtomicI64 {
    // SAFETY: every config is registered with a `&'static AtomicI64` as its private data.
    unsafe { &*(privdata as *const AtomicI64) }
}

unsafe extern "C" fn get_number(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    // SAFETY: Redis passes the private data the config was registered with.
    unsafe { slot(privdata) }.load(Ordering::Relaxed)
}

unsafe extern "C" fn set_number(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: Redis passes the private data the config was registered with.
    unsafe { slot(privdata) }.store(value, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn get_small(_name: *const c_char, privdata: *mut c_void) -> c_int {
    // SAFETY: Redis passes the private data the config was registered with.
    unsafe { slot(privdata) }.load(Ordering::Relaxed) as c_int
}

unsafe extern "C" fn set_small(
    _name: *const c_char,
    value: c_int,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: Redis passes the private data the config was registered with.
    unsafe { slot(privdata) }.store(i64::from(value), Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// Registers each setting with its slot (`slots[i]` holds `settings[i]`, set to its default
/// here), then has Redis apply the config file's values.
pub fn register(
    ctx: &Context,
    settings: &'static [Setting],
    slots: &'static [AtomicI64],
) -> Result<(), String> {
    for (setting, slot) in settings.iter().zip(slots) {
        slot.store(setting.default, Ordering::Relaxed);
        let name = CString::new(setting.name).map_err(|e| e.to_string())?;
        let mut flags = if setting.runtime {
            raw::REDISMODULE_CONFIG_PROTECTED
        } else {
            raw::REDISMODULE_CONFIG_IMMUTABLE
        };
        if !setting.listed {
            flags |= raw::REDISMODULE_CONFIG_HIDDEN;
        }
        let flags = flags as c_uint;
        let privdata = slot as *const AtomicI64 as *mut c_void;
        // SAFETY: ctx is the loading context; Redis copies the names; the slot is static.
        let status = unsafe {
            match setting.kind {
                SettingKind::Integer { min, max } => raw::RedisModule_RegisterNumericConfig
                    .unwrap()(
                    ctx.ctx,
                    name.as_ptr(),
                    setting.default,
                    flags,
                    min,
                    max,
                    Some(get_number),
                    Some(set_number),
                    None,
                    privdata,
                ),
                SettingKind::YesNo => raw::RedisModule_RegisterBoolConfig.unwrap()(
                    ctx.ctx,
                    name.as_ptr(),
                    setting.default as c_int,
                    flags,
                    Some(get_small),
                    Some(set_small),
                    None,
                    privdata,
                ),
                SettingKind::Choice(words) => {
                    let words: Vec<CString> = words
                        .iter()
                        .map(|word| CString::new(*word).map_err(|e| e.to_string()))
                        .collect::<Result<_, _>>()?;
                    let mut pointers: Vec<*const c_char> =
                        words.iter().map(|word| word.as_ptr()).collect();
                    let values: Vec<c_int> = (0..words.len() as c_int).collect();
                    raw::RedisModule_RegisterEnumConfig.unwrap()(
                        ctx.ctx,
                        name.as_ptr(),
                        setting.default as c_int,
                        flags,
                        pointers.as_mut_ptr(),
                        values.as_ptr(),
                        values.len() as c_int,
                        Some(get_small),
                        Some(set_small),
                        None,
                        privdata,
                    )
                }
            }
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not register config idgen.{}", setting.name));
        }
    }
    // SAFETY: called from the module's load, after every config is registered.
    let loaded = unsafe { raw::RedisModule_LoadConfigs.unwrap()(ctx.ctx) };
    if loaded != raw::REDISMODULE_OK as c_int {
        return Err("Redis refused the config file's idgen.* values".into());
    }
    Ok(())
}
