//! Parsing of a command's `NAME value` options.

use crate::ffi::call::Call;
use crate::ffi::refusal::Refusal;

use idgen_core::IdFormat;

/// An option a command accepts, and what its value may be.
pub struct OptionSpec {
    /// The option's name, upper case (matched without regard to case).
    pub name: &'static str,
    /// What its value may be.
    pub value: OptionValue,
}

/// The values an option takes.
pub enum OptionValue {
    /// An integer of at least `min`; `meaning` is how the allowed values read in an error,
    /// e.g. "a positive integer".
    Integer {
        /// The smallest value allowed.
        min: i64,
        /// The allowed values, in words.
        meaning: &'static str,
    },
    /// One of these words, matched without regard to case; the option's value is the
    /// word's index.
    Word(&'static [&'static str]),
}

/// `COUNT n`: how many IDs; at least 1 (the upper bound is the generator's to check).
pub const COUNT: OptionSpec = OptionSpec {
    name: "COUNT",
    value: OptionValue::Integer {
        min: 1,
        meaning: "a positive integer",
    },
};

/// `SHARD s`: the snowflake shard field.
pub const SHARD: OptionSpec = OptionSpec {
    name: "SHARD",
    value: OptionValue::Integer {
        min: 0,
        meaning: "an integer of 0 or more",
    },
};

/// `FORMAT decimal|base32|base62`: snowflake IDs as strings (see [`id_format`]).
pub const FORMAT: OptionSpec = OptionSpec {
    name: "FORMAT",
    value: OptionValue::Word(&["decimal", "base32", "base62"]),
};

/// `FORMAT decimal`: segment values as strings of their digits.
pub const DECIMAL_FORMAT: OptionSpec = OptionSpec {
    name: "FORMAT",
    value: OptionValue::Word(&["decimal"]),
};

/// The ID format a parsed `FORMAT` value (an index into [`FORMAT`]'s words) names.
pub fn id_format(value: u64) -> IdFormat {
    IdFormat::ALL[value as usize]
}

impl OptionSpec {
    /// How the option reads in an error: `COUNT n`, `FORMAT decimal|base32`.
    fn usage(&self) -> String {
        match self.value {
            OptionValue::Integer { .. } => format!("{} n", self.name),
            OptionValue::Word(words) => format!("{} {}", self.name, words.join("|")),
        }
    }
}

/// Reads the options from argument `first` to the end. Returns each spec's value (or
/// `None` when absent), in the order of `specs`.
#[inline]
pub fn parse_options<const N: usize>(
    call: &Call,
    command: &str,
    first: usize,
    specs: [&OptionSpec; N],
) -> Result<[Option<u64>; N], Refusal> {
    // Most calls give no option: answered here, without the parser's call.
    if call.argc() <= first {
        return Ok([None; N]);
    }
    parse_given_options(call, command, first, specs)
}

fn parse_given_options<const N: usize>(
    call: &Call,
    command: &str,
    first: usize,
    specs: [&OptionSpec; N],
) -> Result<[Option<u64>; N], Refusal> {
    let mut values = [None; N];
    let mut index = first;
    while index < call.argc() {
        let name = call.arg_bytes(index);
        let Some(which) = specs
            .iter()
            .position(|spec| name.eq_ignore_ascii_case(spec.name.as_bytes()))
        else {
            let known: Vec<String> = specs.iter().map(|spec| spec.usage()).collect();
            return Err(Refusal::new(
                "ERR",
                format!(
                    "unknown option '{}' for {command}; it takes {}",
                    String::from_utf8_lossy(name),
                    known.join(" and ")
                ),
            ));
        };
        let spec = specs[which];
        if values[which].is_some() {
            return Err(Refusal::new(
                "ERR",
                format!("{} is given more than once", spec.name),
            ));
        }
        if index + 1 >= call.argc() {
            return Err(Refusal::new(
                "ERR",
                format!("{} needs a value: {}", spec.name, spec.usage()),
            ));
        }
        let given = call.arg_bytes(index + 1);
        let value = match spec.value {
            OptionValue::Integer { min, meaning } => call
                .arg_integer(index + 1)
                .filter(|&value| value >= min)
                .map(|value| value as u64)
                .ok_or_else(|| {
                    format!(
                        "{} must be {meaning}, got '{}'",
                        spec.name,
                        String::from_utf8_lossy(given)
                    )
                }),
            OptionValue::Word(words) => words
                .iter()
                .position(|word| given.eq_ignore_ascii_case(word.as_bytes()))
                .map(|index| index as u64)
                .ok_or_else(|| {
                    format!(
                        "{} must be one of {}, got '{}'",
                        spec.name,
                        words.join(", "),
                        String::from_utf8_lossy(given)
                    )
                }),
        }
        .map_err(|message| Refusal::new("ERR", message))?;
        values[which] = Some(value);
        index += 2;
    }
    Ok(values)
}
