//! Parsing of a command's `NAME value` options.

use crate::ffi::{Call, Refusal};

/// An option a command accepts, and what its value may be.
pub struct OptionSpec {
    /// The option's name, upper case (matched without regard to case).
    pub name: &'static str,
    /// The smallest value allowed.
    pub min: i64,
    /// How the allowed values read in an error, e.g. "a positive integer".
    pub meaning: &'static str,
}

/// `COUNT n`: how many IDs; at least 1 (the upper bound is the generator's to check).
pub const COUNT: OptionSpec = OptionSpec {
    name: "COUNT",
    min: 1,
    meaning: "a positive integer",
};

/// `SHARD s`: the snowflake shard field.
pub const SHARD: OptionSpec = OptionSpec {
    name: "SHARD",
    min: 0,
    meaning: "an integer of 0 or more",
};

/// Reads the options from argument `first` to the end. Returns each spec's value (or
/// `None` when absent), in the order of `specs`.
pub fn parse_options<const N: usize>(
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
            let known: Vec<String> = specs
                .iter()
                .map(|spec| format!("{} n", spec.name))
                .collect();
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
                format!("{} needs a value: {} n", spec.name, spec.name),
            ));
        }
        let value = call
            .arg_integer(index + 1)
            .filter(|&value| value >= spec.min)
            .ok_or_else(|| {
                Refusal::new(
                    "ERR",
                    format!(
                        "{} must be {}, got '{}'",
                        spec.name,
                        spec.meaning,
                        String::from_utf8_lossy(call.arg_bytes(index + 1))
                    ),
                )
            })?;
        values[which] = Some(value as u64);
        index += 2;
    }
    Ok(values)
}
