//! The module's commands, each declared once: name, arity, key, flags, ACL categories,
//! positional arguments, options with their words and limits, and the docs. The module
//! registers and parses from these declarations; the client builds its commands from them.

use std::ffi::CStr;

use crate::IdFormat;

/// How a command uses its one key (the argument after the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAccess {
    /// Reads the key only.
    ReadOnly,
    /// Reads, returns data derived from, and updates the key (like INCR).
    ReadWriteUpdate,
}

/// What a positional argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// The command's key.
    Key,
    /// An integer.
    Integer,
    /// A string (a name such as a lease holder).
    String,
}

/// A positional argument, for COMMAND DOCS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    /// Its name in the docs.
    pub name: &'static str,
    /// What it is.
    pub kind: ArgKind,
    /// Whether it may be left out (only at the end).
    pub optional: bool,
}

const fn arg(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        optional: false,
    }
}

const KEY: Arg = arg("key", ArgKind::Key);
const POOL: Arg = arg("pool", ArgKind::Key);
const HOLDER: Arg = arg("holder", ArgKind::String);
const WORKER_ID: Arg = arg("worker-id", ArgKind::Integer);

/// What an option's value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// An integer of at least `min`; `meaning` says which in an error ("a positive
    /// integer"). Upper limits are the generators' to check (they depend on the layout).
    Integer {
        /// The smallest value allowed.
        min: i64,
        /// The allowed values, in words.
        meaning: &'static str,
    },
    /// One of these ID formats, named by [`IdFormat::name`].
    Format(&'static [IdFormat]),
}

/// An option: a word and its value (`COUNT 10`, `FORMAT base62`), in any order after the
/// positional arguments, each at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandOption {
    /// The word, upper case (matched without regard to case).
    pub word: &'static str,
    /// What its value may be.
    pub kind: OptionKind,
}

/// `COUNT n`: how many IDs or values.
pub const COUNT: CommandOption = CommandOption {
    word: "COUNT",
    kind: OptionKind::Integer {
        min: 1,
        meaning: "a positive integer",
    },
};
/// `SHARD s`: the snowflake shard field.
pub const SHARD: CommandOption = CommandOption {
    word: "SHARD",
    kind: OptionKind::Integer {
        min: 0,
        meaning: "an integer of 0 or more",
    },
};
/// `FORMAT decimal|base32|base62`: IDs as strings.
pub const FORMAT: CommandOption = CommandOption {
    word: "FORMAT",
    kind: OptionKind::Format(&IdFormat::ALL),
};
/// `FORMAT decimal`: segment values as strings of their digits.
pub const FORMAT_DECIMAL: CommandOption = CommandOption {
    word: "FORMAT",
    kind: OptionKind::Format(&[IdFormat::Decimal]),
};
/// `DURATION ms`: how long a lease window should last from now.
pub const DURATION: CommandOption = CommandOption {
    word: "DURATION",
    kind: OptionKind::Integer {
        min: 1,
        meaning: "a positive number of milliseconds",
    },
};

/// An option's value as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionValue {
    /// The value of an integer option.
    Integer(u64),
    /// The value of a format option.
    Format(IdFormat),
}

impl OptionValue {
    /// The integer, if this is one.
    pub fn integer(self) -> Option<u64> {
        match self {
            OptionValue::Integer(value) => Some(value),
            OptionValue::Format(_) => None,
        }
    }

    /// The format, if this is one.
    pub fn format(self) -> Option<IdFormat> {
        match self {
            OptionValue::Format(format) => Some(format),
            OptionValue::Integer(_) => None,
        }
    }
}

impl CommandOption {
    /// How the option reads in an error: `COUNT n`, `FORMAT decimal|base32`.
    fn usage(&self) -> String {
        match self.kind {
            OptionKind::Integer { .. } => format!("{} n", self.word),
            OptionKind::Format(formats) => {
                let names: Vec<&str> = formats.iter().map(|format| format.name()).collect();
                format!("{} {}", self.word, names.join("|"))
            }
        }
    }

    /// Reads the option's value, or says why it cannot be one.
    fn value(&self, given: &[u8]) -> Result<OptionValue, String> {
        let text = || String::from_utf8_lossy(given);
        match self.kind {
            OptionKind::Integer { min, meaning } => crate::parse_redis_integer(given)
                .filter(|&value| value >= min)
                .map(|value| OptionValue::Integer(value as u64))
                .ok_or_else(|| format!("{} must be {meaning}, got '{}'", self.word, text())),
            OptionKind::Format(formats) => formats
                .iter()
                .find(|format| given.eq_ignore_ascii_case(format.name().as_bytes()))
                .map(|&format| OptionValue::Format(format))
                .ok_or_else(|| {
                    let names: Vec<&str> = formats.iter().map(|format| format.name()).collect();
                    format!(
                        "{} must be one of {}, got '{}'",
                        self.word,
                        names.join(", "),
                        text()
                    )
                }),
        }
    }
}

/// One command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    /// The name, upper case, as messages, replication and clients write it (a C string,
    /// so that the module hands it to Redis as it is).
    pub name: &'static CStr,
    /// The keyspace event it fires when it writes, if it fires one.
    pub event: Option<&'static CStr>,
    /// Exact argument count (the name included) if positive, the least if negative.
    pub arity: i32,
    /// How it uses its key (at position 1), or `None` for a keyless command.
    pub key: Option<KeyAccess>,
    /// Redis command flags.
    pub flags: &'static str,
    /// ACL categories (Redis 7.2+).
    pub acl_categories: &'static str,
    /// One sentence on what it does (COMMAND DOCS).
    pub summary: &'static str,
    /// Time complexity (COMMAND DOCS).
    pub complexity: &'static str,
    /// Redis command tips, or `None`.
    pub tips: Option<&'static str>,
    /// The positional arguments after the name.
    pub args: &'static [Arg],
    /// The options after the positional arguments.
    pub options: &'static [CommandOption],
}

impl Command {
    /// The name as text.
    pub const fn name(&self) -> &'static str {
        match self.name.to_str() {
            Ok(name) => name,
            Err(_) => panic!("command names are ASCII"),
        }
    }

    /// Reads the options from argument `first` to `argc` (`arg(i)` is argument `i`):
    /// each of [`Command::options`]' value, or `None` when absent, in their order. `N` must
    /// be the number of options.
    pub fn parse_options<'a, const N: usize>(
        &self,
        first: usize,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8],
    ) -> Result<[Option<OptionValue>; N], String> {
        let mut values = [None; N];
        if N != self.options.len() {
            return Err(format!(
                "{} reads {N} options of {}",
                self.name(),
                self.options.len()
            ));
        }
        let mut index = first;
        while index < argc {
            let word = arg(index);
            let Some(which) = self
                .options
                .iter()
                .position(|option| word.eq_ignore_ascii_case(option.word.as_bytes()))
            else {
                let known: Vec<String> = self.options.iter().map(CommandOption::usage).collect();
                return Err(format!(
                    "unknown option '{}' for {}; it takes {}",
                    String::from_utf8_lossy(word),
                    self.name(),
                    known.join(" and ")
                ));
            };
            let option = &self.options[which];
            if values[which].is_some() {
                return Err(format!("{} is given more than once", option.word));
            }
            if index + 1 >= argc {
                return Err(format!("{} needs a value: {}", option.word, option.usage()));
            }
            values[which] = Some(option.value(arg(index + 1))?);
            index += 2;
        }
        Ok(values)
    }
}

const fn command(name: &'static CStr, arity: i32, summary: &'static str) -> Command {
    Command {
        name,
        event: None,
        arity,
        key: None,
        flags: "readonly fast allow-stale",
        acl_categories: "read fast",
        summary,
        complexity: "O(1).",
        tips: None,
        args: &[],
        options: &[],
    }
}

/// `SNOWFLAKE.NEXT key [COUNT n] [SHARD s] [FORMAT decimal|base32|base62]`
pub const SNOWFLAKE_NEXT: Command = Command {
    key: Some(KeyAccess::ReadWriteUpdate),
    // Not `fast`: the work grows with COUNT (up to 100,000 IDs).
    flags: "write deny-oom",
    acl_categories: "write",
    complexity: "O(N) where N is COUNT (1 without COUNT).",
    tips: Some("nondeterministic_output"),
    event: Some(c"snowflake.next"),
    args: &[KEY],
    options: &[COUNT, SHARD, FORMAT],
    ..command(
        c"SNOWFLAKE.NEXT",
        -2,
        "Issues snowflake IDs (time | shard | sequence) that are unique across keys and \
         instances and increase per key; FORMAT decimal, base32 or base62 replies strings \
         (JavaScript keeps them whole; base32 and base62 sort like the numbers).",
    )
};

/// `SEGMENT.NEXT key [COUNT n] [FORMAT decimal]`
pub const SEGMENT_NEXT: Command = Command {
    key: Some(KeyAccess::ReadWriteUpdate),
    // O(1) whatever COUNT is: the reply is a range, never COUNT integers.
    flags: "write deny-oom fast",
    acl_categories: "write fast",
    tips: Some("nondeterministic_output"),
    event: Some(c"segment.next"),
    args: &[KEY],
    options: &[COUNT, FORMAT_DECIMAL],
    ..command(
        c"SEGMENT.NEXT",
        -2,
        "Takes the next values of this instance's step-offset class above the key's integer; \
         with COUNT, a range [first, last, step]; FORMAT decimal replies strings.",
    )
};

/// `SNOWFLAKE.DECODE id [FORMAT decimal|base32|base62]`
pub const SNOWFLAKE_DECODE: Command = Command {
    args: &[arg("id", ArgKind::Integer)],
    options: &[FORMAT],
    ..command(
        c"SNOWFLAKE.DECODE",
        -2,
        "Splits a snowflake ID (an integer, or a string in FORMAT decimal, base32 or base62) \
         into unix time, shard, sequence and the issuing instance's offset.",
    )
};

/// `SNOWFLAKE.RANGE from-unix-ms to-unix-ms [FORMAT …]`
pub const SNOWFLAKE_RANGE: Command = Command {
    args: &[
        arg("from-unix-ms", ArgKind::Integer),
        arg("to-unix-ms", ArgKind::Integer),
    ],
    options: &[FORMAT],
    ..command(
        c"SNOWFLAKE.RANGE",
        -3,
        "Returns the lowest and the highest ID whose time lies in a window of unix \
         milliseconds (both ends included), for WHERE id BETWEEN queries.",
    )
};

/// `SNOWFLAKE.COMPOSE unix-ms shard sequence [FORMAT …]`
pub const SNOWFLAKE_COMPOSE: Command = Command {
    args: &[
        arg("unix-ms", ArgKind::Integer),
        arg("shard", ArgKind::Integer),
        arg("sequence", ArgKind::Integer),
    ],
    options: &[FORMAT],
    ..command(
        c"SNOWFLAKE.COMPOSE",
        -4,
        "Returns the ID with the given unix milliseconds, shard and sequence in this \
         instance's layout, refusing fields outside it (for backfills and tests).",
    )
};

/// `IDGEN.IDENTITY`
pub const IDGEN_IDENTITY: Command = command(
    c"IDGEN.IDENTITY",
    1,
    "Returns this node's identity (step, offset, snowflake layout, module version), so that \
     clients can check a deployment without CONFIG.",
);

/// `SNOWFLAKE.BOUND key`
pub const SNOWFLAKE_BOUND: Command = Command {
    key: Some(KeyAccess::ReadOnly),
    flags: "readonly fast",
    args: &[KEY],
    ..command(
        c"SNOWFLAKE.BOUND",
        2,
        "Returns a snowflake key's bound: every ID issued for the key is at most this. Nil \
         for a missing key.",
    )
};

const WRITE_FAST: Command = Command {
    key: Some(KeyAccess::ReadWriteUpdate),
    flags: "write deny-oom fast",
    acl_categories: "write fast",
    ..command(c"", 0, "")
};

/// `SNOWFLAKE.SETBOUND key bound [owner]`
pub const SNOWFLAKE_SETBOUND: Command = Command {
    name: c"SNOWFLAKE.SETBOUND",
    arity: -3,
    summary: "Records a snowflake key's bound (and, from replication and the AOF, its owner): \
              how SNOWFLAKE.NEXT reaches replicas and the AOF. From clients it only moves a \
              bound forward.",
    args: &[
        KEY,
        arg("bound", ArgKind::Integer),
        Arg {
            optional: true,
            ..arg("owner", ArgKind::Integer)
        },
    ],
    ..WRITE_FAST
};

/// `SNOWFLAKE.SETLAST key id`: the old name of `SNOWFLAKE.SETBOUND key bound`, kept so
/// that AOF files written before 0.1.0 still load.
pub const SNOWFLAKE_SETLAST: Command = Command {
    name: c"SNOWFLAKE.SETLAST",
    arity: 3,
    summary: "Deprecated name of SNOWFLAKE.SETBOUND key bound (what AOF files of idgen before \
              0.1.0 contain).",
    args: &[KEY, arg("id", ArgKind::Integer)],
    ..WRITE_FAST
};

/// `LEASE.ACQUIRE pool holder [DURATION ms]`
pub const LEASE_ACQUIRE: Command = Command {
    name: c"LEASE.ACQUIRE",
    arity: -3,
    // Not `fast`: it looks through the worker ids of the instance (up to the band).
    flags: "write deny-oom",
    acl_categories: "write",
    summary: "Leases a free worker id of the pool to a holder for a time window (DURATION \
              ms, at most idgen.lease-max-ms): the holder may issue snowflake IDs with that \
              worker id as shard and a time inside the window. Replies the worker id, the \
              window and the layout.",
    complexity: "O(N) where N is the number of worker ids this instance may lease.",
    tips: Some("nondeterministic_output"),
    args: &[POOL, HOLDER],
    options: &[DURATION],
    ..WRITE_FAST
};

/// `LEASE.RENEW pool worker-id holder [DURATION ms]`
pub const LEASE_RENEW: Command = Command {
    name: c"LEASE.RENEW",
    arity: -4,
    summary: "Extends the holder's window of a worker id to DURATION ms from now (never \
              shortening it); refused once the window ended or after a restart or failover \
              fenced it.",
    complexity: POOL_LOG_N,
    tips: Some("nondeterministic_output"),
    args: &[POOL, WORKER_ID, HOLDER],
    options: &[DURATION],
    ..WRITE_FAST
};

const POOL_LOG_N: &str = "O(log N) where N is the number of worker ids in the pool.";

/// `LEASE.RELEASE pool worker-id holder`
pub const LEASE_RELEASE: Command = Command {
    name: c"LEASE.RELEASE",
    arity: 4,
    summary: "Frees the holder's worker id; its next holder still starts after the window \
              granted.",
    complexity: POOL_LOG_N,
    args: &[POOL, WORKER_ID, HOLDER],
    ..WRITE_FAST
};

/// `LEASE.LIST pool`
pub const LEASE_LIST: Command = Command {
    key: Some(KeyAccess::ReadOnly),
    flags: "readonly",
    acl_categories: "read",
    complexity: "O(N) where N is the number of worker ids in the pool.",
    tips: Some("nondeterministic_output"),
    args: &[POOL],
    ..command(
        c"LEASE.LIST",
        2,
        "Lists the pool's worker ids: holder, state (held, ended, released), window, fence \
         and last renewal, in unix ms.",
    )
};

/// `LEASE.SETWORKER pool worker-id start end fence renewed holder`
pub const LEASE_SETWORKER: Command = Command {
    name: c"LEASE.SETWORKER",
    arity: 8,
    summary: "Records one worker id of a pool: how the LEASE commands reach replicas and the \
              AOF. Refused from clients.",
    complexity: POOL_LOG_N,
    args: &[
        POOL,
        WORKER_ID,
        arg("start", ArgKind::Integer),
        arg("end", ArgKind::Integer),
        arg("fence", ArgKind::Integer),
        arg("renewed", ArgKind::Integer),
        HOLDER,
    ],
    ..WRITE_FAST
};

/// Every command the module registers.
pub const COMMANDS: [&Command; 14] = [
    &SNOWFLAKE_NEXT,
    &SEGMENT_NEXT,
    &SNOWFLAKE_DECODE,
    &SNOWFLAKE_RANGE,
    &SNOWFLAKE_COMPOSE,
    &IDGEN_IDENTITY,
    &SNOWFLAKE_BOUND,
    &SNOWFLAKE_SETBOUND,
    &SNOWFLAKE_SETLAST,
    &LEASE_ACQUIRE,
    &LEASE_RENEW,
    &LEASE_RELEASE,
    &LEASE_LIST,
    &LEASE_SETWORKER,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<const N: usize>(
        command: &Command,
        words: &[&str],
    ) -> Result<[Option<OptionValue>; N], String> {
        command.parse_options(0, words.len(), |i| words[i].as_bytes())
    }

    #[test]
    fn options_are_read_by_word_in_any_order() {
        let [count, shard, format] =
            parse(&SNOWFLAKE_NEXT, &["format", "BASE62", "COUNT", "3"]).unwrap();
        assert_eq!(count, Some(OptionValue::Integer(3)));
        assert_eq!(shard, None);
        assert_eq!(format.and_then(OptionValue::format), Some(IdFormat::Base62));
    }

    #[test]
    fn bad_options_are_named() {
        let error = |command, words| parse::<3>(command, words).unwrap_err();
        assert_eq!(
            error(&SNOWFLAKE_NEXT, &["COUNT", "0"]),
            "COUNT must be a positive integer, got '0'"
        );
        assert_eq!(
            error(&SNOWFLAKE_NEXT, &["COUNT", "1", "count", "2"]),
            "COUNT is given more than once"
        );
        assert_eq!(
            error(&SNOWFLAKE_NEXT, &["SHARD"]),
            "SHARD needs a value: SHARD n"
        );
        assert_eq!(
            error(&SNOWFLAKE_NEXT, &["FORMAT", "hex"]),
            "FORMAT must be one of decimal, base32, base62, got 'hex'"
        );
        assert_eq!(
            parse::<2>(&SEGMENT_NEXT, &["LIMIT", "1"]).unwrap_err(),
            "unknown option 'LIMIT' for SEGMENT.NEXT; it takes COUNT n and FORMAT decimal"
        );
        assert_eq!(
            parse::<2>(&SEGMENT_NEXT, &["FORMAT", "base32"]).unwrap_err(),
            "FORMAT must be one of decimal, got 'base32'"
        );
        assert!(parse::<1>(&SEGMENT_NEXT, &[]).is_err());
    }

    #[test]
    fn the_table_is_consistent() {
        for command in COMMANDS {
            assert!(!command.name().is_empty());
            let required = 1 + command.args.iter().filter(|a| !a.optional).count() as i32;
            let expected = if command.options.is_empty() && command.args.iter().all(|a| !a.optional)
            {
                required
            } else {
                -required
            };
            assert_eq!(command.arity, expected, "{}", command.name());
            assert_eq!(
                command.key.is_some(),
                command.args.first().is_some_and(|a| a.kind == ArgKind::Key),
                "{}",
                command.name()
            );
        }
    }
}
