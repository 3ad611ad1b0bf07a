//! COMMAND DOCS, arity and key specs, through `RedisModule_SetCommandInfo` (Redis 7.0+).
//!
//! Key specs let `redis-cli -c`, cluster clients and ACL key patterns find the key of each
//! command.

use std::ffi::{c_int, CStr, CString};

use redis_module::raw;

/// How a command uses its key, in key-spec flags.
#[derive(Clone, Copy)]
pub enum KeyAccess {
    /// Reads the key only.
    ReadOnly,
    /// Reads, returns data derived from, and updates the key (like INCR).
    ReadWriteUpdate,
}

impl KeyAccess {
    fn flags(self) -> u64 {
        match self {
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
}

/// One documented argument.
#[derive(Clone, Copy)]
pub struct ArgDoc {
    name: &'static str,
    kind: raw::RedisModuleCommandArgType,
    token: Option<&'static CStr>,
    optional: bool,
}

impl ArgDoc {
    /// The command's key (first key spec).
    pub const fn key(name: &'static str) -> Self {
        ArgDoc {
            name,
            kind: raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            token: None,
            optional: false,
        }
    }

    /// A required integer.
    pub const fn integer(name: &'static str) -> Self {
        ArgDoc {
            name,
            kind: raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            token: None,
            optional: false,
        }
    }

    /// A required string (a name such as a lease holder).
    pub const fn string(name: &'static str) -> Self {
        ArgDoc {
            name,
            kind: raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            token: None,
            optional: false,
        }
    }

    /// An optional integer, introduced by `token` (such as `COUNT n`) or positional.
    pub const fn optional_integer(name: &'static str, token: Option<&'static CStr>) -> Self {
        ArgDoc {
            name,
            kind: raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            token,
            optional: true,
        }
    }
}

impl ArgDoc {
    /// An optional word introduced by `token` (`FORMAT base32`); the summary says which.
    pub const fn optional_word(name: &'static str, token: &'static CStr) -> Self {
        ArgDoc {
            name,
            kind: raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            token: Some(token),
            optional: true,
        }
    }
}

/// What COMMAND DOCS and COMMAND INFO show for a command.
pub struct CommandDocs {
    /// One sentence on what the command does.
    pub summary: &'static CStr,
    /// Time complexity.
    pub complexity: &'static CStr,
    /// How the command uses its single key (at position 1), or `None` without a key.
    pub key_access: Option<KeyAccess>,
    /// Redis command tips, space-separated (`nondeterministic_output`), or `None`.
    pub tips: Option<&'static CStr>,
    /// The arguments after the command name.
    pub args: &'static [ArgDoc],
}

/// The struct-size header Redis uses to read the info (the C header's
/// `REDISMODULE_COMMAND_INFO_VERSION`).
static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

impl CommandDocs {
    /// Hands the docs to Redis for `command`, whose arity is `arity` (exact count if
    /// positive, minimum count if negative).
    pub fn apply(
        &self,
        command: *mut raw::RedisModuleCommand,
        arity: c_int,
        since: &CStr,
    ) -> Result<(), String> {
        // Redis copies what it needs; these buffers only have to outlive the call.
        let names: Vec<CString> = self
            .args
            .iter()
            .map(|arg| CString::new(arg.name).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let mut args: Vec<raw::RedisModuleCommandArg> = self
            .args
            .iter()
            .zip(&names)
            .map(|(arg, name)| {
                // SAFETY: an all-zero RedisModuleCommandArg is the C header's "unset".
                let mut raw_arg: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
                raw_arg.name = name.as_ptr();
                raw_arg.type_ = arg.kind;
                raw_arg.key_spec_index =
                    if arg.kind == raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY {
                        0
                    } else {
                        -1
                    };
                raw_arg.token = arg.token.map_or(std::ptr::null(), CStr::as_ptr);
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
        if let Some(access) = self.key_access {
            // SAFETY: zero is "unset" for every field; the unions are set below.
            let mut spec: raw::RedisModuleCommandKeySpec = unsafe { std::mem::zeroed() };
            spec.flags = access.flags();
            spec.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
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
            summary: self.summary.as_ptr(),
            complexity: self.complexity.as_ptr(),
            since: since.as_ptr(),
            history: std::ptr::null_mut(),
            tips: self.tips.map_or(std::ptr::null(), CStr::as_ptr),
            arity,
            key_specs: if key_specs.is_empty() {
                std::ptr::null_mut()
            } else {
                key_specs.as_mut_ptr()
            },
            args: if self.args.is_empty() {
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
}
