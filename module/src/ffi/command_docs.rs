//! COMMAND DOCS, arity and key specs, through `RedisModule_SetCommandInfo` (Redis 7.0+).
//!
//! Key specs let `redis-cli -c`, cluster clients and ACL key patterns find the key of each
//! command.

use std::ffi::{c_int, CStr, CString};

use idgen_core::commands::{ArgKind, Command, KeyAccess, OptionKind};
use redis_module::raw;

/// A key access's key-spec flags.
fn key_flags(access: KeyAccess) -> u64 {
    match access {
        KeyAccess::ReadOnly => {
            (raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS) as u64
        }
        KeyAccess::ReadWriteUpdate => {
            (raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE) as u64
        }
    }
}

/// One documented argument: a positional one, or an option (`COUNT n`) with its word as
/// token.
struct ArgDoc {
    name: CString,
    kind: raw::RedisModuleCommandArgType,
    token: Option<CString>,
    optional: bool,
}

/// The documented arguments of `command`: its positional ones, then its options.
fn arg_docs(command: &Command) -> Result<Vec<ArgDoc>, String> {
    let text = |text: &str| CString::new(text).map_err(|e| e.to_string());
    let mut docs = Vec::new();
    for arg in command.args {
        docs.push(ArgDoc {
            name: text(arg.name)?,
            kind: match arg.kind {
                ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            },
            token: None,
            optional: arg.optional,
        });
    }
    for option in command.options {
        docs.push(ArgDoc {
            name: text(&option.word.to_ascii_lowercase())?,
            kind: match option.kind {
                OptionKind::Integer { .. } => {
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER
                }
                OptionKind::Format(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            },
            token: Some(text(option.word)?),
            optional: true,
        });
    }
    Ok(docs)
}

/// The struct-size header Redis uses to read the info (the C header's
/// `REDISMODULE_COMMAND_INFO_VERSION`).
static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Hands `declared`'s docs, arity and key spec to Redis for the created `command`.
pub fn apply(
    command: *mut raw::RedisModuleCommand,
    declared: &Command,
    since: &CStr,
) -> Result<(), String> {
    // Redis copies what it needs; these buffers only have to outlive the call.
    let text = |text: &str| CString::new(text).map_err(|e| e.to_string());
    let (summary, complexity) = (text(declared.summary)?, text(declared.complexity)?);
    let tips = declared.tips.map(text).transpose()?;
    let docs = arg_docs(declared)?;
    let mut args: Vec<raw::RedisModuleCommandArg> = docs
        .iter()
        .map(|arg| {
            // SAFETY: an all-zero RedisModuleCommandArg is the C header's "unset".
            let mut raw_arg: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            raw_arg.name = arg.name.as_ptr();
            raw_arg.type_ = arg.kind;
            raw_arg.key_spec_index =
                if arg.kind == raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY {
                    0
                } else {
                    -1
                };
            raw_arg.token = arg
                .token
                .as_ref()
                .map_or(std::ptr::null(), |token| token.as_ptr());
            raw_arg.flags = if arg.optional {
                raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int
            } else {
                raw::REDISMODULE_CMD_ARG_NONE as c_int
            };
            raw_arg
        })
        .collect();
    // SAFETY: zeroed entries terminate the arrays, as the C API expects.
    args.push(unsafe { std::mem::zeroed() });
    let mut key_specs: Vec<raw::RedisModuleCommandKeySpec> = Vec::new();
    if let Some(access) = declared.key {
        // SAFETY: zero is "unset" for every field; the unions are set below.
        let mut spec: raw::RedisModuleCommandKeySpec = unsafe { std::mem::zeroed() };
        spec.flags = key_flags(access);
        spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        spec.bs.index.pos = 1;
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        spec.fk.range.lastkey = 0;
        spec.fk.range.keystep = 1;
        spec.fk.range.limit = 0;
        key_specs.push(spec);
        // SAFETY: as above.
        key_specs.push(unsafe { std::mem::zeroed() });
    }
    let info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: summary.as_ptr(),
        complexity: complexity.as_ptr(),
        since: since.as_ptr(),
        history: std::ptr::null_mut(),
        tips: tips.as_ref().map_or(std::ptr::null(), |tips| tips.as_ptr()),
        arity: declared.arity,
        key_specs: if key_specs.is_empty() {
            std::ptr::null_mut()
        } else {
            key_specs.as_mut_ptr()
        },
        args: if docs.is_empty() {
            std::ptr::null_mut()
        } else {
            args.as_mut_ptr()
        },
    };
    // SAFETY: every pointer in `info` is valid until this call returns.
    let status = unsafe { raw::RedisModule_SetCommandInfo.unwrap()(command, &info) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("Redis refused the command info (SetCommandInfo)".into());
    }
    Ok(())
}
