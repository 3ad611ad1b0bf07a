//! Parsing of a command's `NAME value` options, as its declaration lists them.

use idgen_core::commands::OptionValue;

use crate::ffi::call::Request;
use crate::ffi::refusal::Refusal;

/// Reads the running command's options from argument `first` to the end: each declared
/// option's value (or `None` when absent), in the declaration's order.
#[inline]
pub fn parse_options<const N: usize>(
    call: &impl Request,
    first: usize,
) -> Result<[Option<OptionValue>; N], Refusal> {
    // Most calls give no option: answered here, without the parser's call.
    if call.argc() <= first {
        return Ok([None; N]);
    }
    parse_given_options(call, first)
}

#[inline(never)]
fn parse_given_options<const N: usize>(
    call: &impl Request,
    first: usize,
) -> Result<[Option<OptionValue>; N], Refusal> {
    call.command()
        .parse_options(first, call.argc(), |index| call.arg_bytes(index))
        .map_err(|message| Refusal::new("ERR", message))
}

/// A stand-in for the running call, for handler unit tests: arguments given as text,
/// replies recorded as text (`int 5`, `bulk x`, `array 2`, `map 6`), and the module's
/// configuration installed once with the defaults.
#[cfg(test)]
pub mod fake {
    use std::cell::RefCell;

    use idgen_core::commands::Command;
    use idgen_core::{Config, IdFormat, Now};

    use crate::ffi::call::Request;
    use crate::state::{instance, leases};

    /// A call of `command` with `args` (the name not included).
    pub struct FakeCall {
        command: &'static Command,
        args: Vec<Vec<u8>>,
        /// What the handler replied, in order.
        pub replies: RefCell<Vec<String>>,
    }

    impl FakeCall {
        /// A call of `command` with these arguments, on an instance with the default
        /// configuration.
        pub fn new(command: &'static Command, args: &[&str]) -> Self {
            static INSTALLED: std::sync::Once = std::sync::Once::new();
            INSTALLED.call_once(|| {
                let config = Config::default();
                instance::install(config, Now::from(1_800_000_000_000));
                leases::install(config, (0, 10_000)).unwrap();
            });
            let mut words = vec![command.name().as_bytes().to_vec()];
            words.extend(args.iter().map(|arg| arg.as_bytes().to_vec()));
            FakeCall {
                command,
                args: words,
                replies: RefCell::new(Vec::new()),
            }
        }

        fn record(&self, reply: String) {
            self.replies.borrow_mut().push(reply);
        }

        /// The replies, joined by `, `.
        pub fn replied(&self) -> String {
            self.replies.borrow().join(", ")
        }
    }

    impl Request for FakeCall {
        fn command(&self) -> &'static Command {
            self.command
        }
        fn argc(&self) -> usize {
            self.args.len()
        }
        fn arg_bytes(&self, index: usize) -> &[u8] {
            &self.args[index]
        }
        fn arg_integer(&self, index: usize) -> Option<i64> {
            idgen_core::parse_redis_integer(&self.args[index])
        }
        fn reply_integer(&self, value: i64) {
            self.record(format!("int {value}"));
        }
        fn reply_bulk(&self, text: &str) {
            self.record(format!("bulk {text}"));
        }
        fn reply_array(&self, len: usize) {
            self.record(format!("array {len}"));
        }
        fn reply_map(&self, len: usize) {
            self.record(format!("map {len}"));
        }
        fn reply_id_in(&self, id: u64, format: Option<IdFormat>) {
            match format {
                None => self.reply_integer(id as i64),
                Some(format) => self.reply_bulk(&format.encode(id)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use idgen_core::commands::{OptionValue, LEASE_ACQUIRE, SEGMENT_NEXT, SNOWFLAKE_NEXT};
    use idgen_core::IdFormat;

    use super::fake::FakeCall;
    use super::parse_options;

    fn refusal<const N: usize>(call: FakeCall, first: usize) -> String {
        parse_options::<N>(&call, first).unwrap_err().0
    }

    #[test]
    fn options_come_back_in_the_declarations_order() {
        let call = FakeCall::new(&SNOWFLAKE_NEXT, &["k", "FORMAT", "base32", "shard", "7"]);
        let [count, shard, format] = parse_options(&call, 2).unwrap();
        assert_eq!(count, None);
        assert_eq!(shard.and_then(OptionValue::integer), Some(7));
        assert_eq!(format.and_then(OptionValue::format), Some(IdFormat::Base32));
        let none = FakeCall::new(&SEGMENT_NEXT, &["k"]);
        assert_eq!(parse_options::<2>(&none, 2).unwrap(), [None, None]);
    }

    #[test]
    fn each_command_names_itself_in_its_refusals() {
        assert_eq!(
            refusal::<2>(FakeCall::new(&SEGMENT_NEXT, &["k", "SHARD", "1"]), 2),
            "ERR unknown option 'SHARD' for SEGMENT.NEXT; it takes COUNT n and FORMAT decimal"
        );
        assert_eq!(
            refusal::<3>(FakeCall::new(&SNOWFLAKE_NEXT, &["k", "COUNT", "-1"]), 2),
            "ERR COUNT must be a positive integer, got '-1'"
        );
        assert_eq!(
            refusal::<1>(FakeCall::new(&LEASE_ACQUIRE, &["p", "h", "DURATION"]), 3),
            "ERR DURATION needs a value: DURATION n"
        );
    }
}
