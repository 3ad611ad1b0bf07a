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

/// Stand-ins for the running call and its keyspace, for handler unit tests: arguments given
/// as text, replies, replication, notifications and log lines recorded as text (`int 5`,
/// `bulk x`, `array 2`, `map 6`, `replicate SET k 5`, …), keys held in memory, and the
/// module's configuration installed once with the defaults (and four leased worker ids).
#[cfg(test)]
pub mod fake {
    use std::any::Any;
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::ffi::CStr;

    use idgen_core::commands::Command;
    use idgen_core::{Config, IdFormat};
    use redis_module::raw;

    use crate::ffi::call::Request;
    use crate::ffi::data_type::ModuleDataType;
    use crate::ffi::keyspace::{KeyKind, KeyRead, KeyWrite, Keys};
    use crate::ffi::main_thread::test_main::{self, MainThread};
    use crate::ffi::refusal::{wrong_type, Refusal};
    use crate::state::{clock, instance, leases, reservations};

    /// Leased worker ids of the test instance: shard values 1020 to 1023.
    pub const LEASE_WORKERS: u64 = 4;

    /// Installs the module's configuration and state, once per test process, as the
    /// tests' main thread.
    fn install() {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            let _main = test_main::become_main();
            // No restart fence, and the clocks as they are: IDs start at the wall clock, so
            // a test that moves a bound a little ahead does not make issuing pace (which
            // logs through the server).
            let config = Config {
                restart_fence: false,
                ..Config::default()
            };
            instance::install(config, clock::now());
            reservations::arm();
            leases::install(config, (LEASE_WORKERS, 10_000)).unwrap();
        });
    }

    /// For a test that runs handlers with keys: the instance installed, and the calling
    /// thread the module's main thread until the value drops (one such test at a time).
    pub fn main_thread() -> MainThread {
        install();
        test_main::become_main()
    }

    /// A call of `command` with `args` (the name not included).
    pub struct FakeCall {
        command: &'static Command,
        args: Vec<Vec<u8>>,
        /// Whether the instance is a replica.
        pub replica: bool,
        /// Whether the call comes from the master or a file being loaded.
        pub replicated: bool,
        /// What the handler replied, in order.
        pub replies: RefCell<Vec<String>>,
        /// What the handler replicated, notified and logged, in order.
        pub effects: RefCell<Vec<String>>,
    }

    impl FakeCall {
        /// A call of `command` with these arguments, from a client of a master with the
        /// default configuration.
        pub fn new(command: &'static Command, args: &[&str]) -> Self {
            install();
            let mut words = vec![command.name().as_bytes().to_vec()];
            words.extend(args.iter().map(|arg| arg.as_bytes().to_vec()));
            FakeCall {
                command,
                args: words,
                replica: false,
                replicated: false,
                replies: RefCell::new(Vec::new()),
                effects: RefCell::new(Vec::new()),
            }
        }

        /// The same call, arriving from the master's replication stream (or the AOF).
        pub fn replicated(mut self) -> Self {
            self.replicated = true;
            self
        }

        /// The same call, on a replica.
        pub fn on_replica(mut self) -> Self {
            self.replica = true;
            self
        }

        fn record(&self, reply: String) {
            self.replies.borrow_mut().push(reply);
        }

        fn effect(&self, effect: String) {
            self.effects.borrow_mut().push(effect);
        }

        /// The replies, joined by `, `.
        pub fn replied(&self) -> String {
            self.replies.borrow().join(", ")
        }

        /// The replications, notifications and log lines, joined by `; `.
        pub fn effected(&self) -> String {
            self.effects.borrow().join("; ")
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
        fn reply_simple(&self, text: &CStr) {
            self.record(format!("simple {}", text.to_string_lossy()));
        }
        fn reply_null(&self) {
            self.record("null".into());
        }

        type Arg<'a> = &'a [u8];
        fn arg(&self, index: usize) -> &[u8] {
            &self.args[index]
        }
        fn selected_db(&self) -> i32 {
            0
        }
        fn is_replica(&self) -> bool {
            self.replica
        }
        fn is_replicated_or_loading(&self) -> bool {
            self.replicated
        }
        fn log_warning(&self, text: &str) {
            self.effect(format!("log {text}"));
        }
        fn replicate_key_value(&self, command: &CStr, key: &[u8], value: i64) {
            self.effect(format!(
                "replicate {} {} {value}",
                text(command),
                lossy(key)
            ));
        }
        fn replicate_key_values(&self, command: &CStr, key: &[u8], first: i64, second: i64) {
            let (command, key) = (text(command), lossy(key));
            self.effect(format!("replicate {command} {key} {first} {second}"));
        }
        fn replicate_key_five_and_bytes(
            &self,
            command: &CStr,
            key: &[u8],
            ints: [i64; 5],
            bytes: &[u8],
        ) {
            let ints = ints.map(|int| int.to_string()).join(" ");
            let (command, key, bytes) = (text(command), lossy(key), lossy(bytes));
            self.effect(format!("replicate {command} {key} {ints} {bytes}"));
        }
        fn notify(&self, class: raw::NotifyEvent, key: &[u8]) {
            if let Some(event) = self.command.event {
                let (event, key) = (text(event), lossy(key));
                self.effect(format!("notify {event} {key} ({:?})", class));
            }
        }
    }

    fn text(text: &CStr) -> String {
        text.to_string_lossy().into_owned()
    }

    fn lossy(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// What a key holds in a [`FakeKeys`].
    pub enum FakeValue {
        /// A Redis string.
        String(Vec<u8>),
        /// A value of one of the module's types.
        Module(Box<dyn Any>),
        /// Any other Redis type (a list, say).
        Other,
    }

    /// A keyspace in memory: one database, no expiry.
    #[derive(Default)]
    pub struct FakeKeys {
        /// The keys, by name.
        pub keys: HashMap<Vec<u8>, FakeValue>,
    }

    impl FakeKeys {
        /// An empty keyspace.
        pub fn new() -> Self {
            Self::default()
        }

        /// Sets `name` to the string `value`.
        pub fn set_string(&mut self, name: &str, value: &str) {
            let value = FakeValue::String(value.as_bytes().to_vec());
            self.keys.insert(name.as_bytes().to_vec(), value);
        }

        /// Sets `name` to a value of a type other than string and the module's.
        pub fn set_other(&mut self, name: &str) {
            self.keys.insert(name.as_bytes().to_vec(), FakeValue::Other);
        }

        /// Sets `name` to `value`, of one of the module's types.
        pub fn set_module<T: ModuleDataType>(&mut self, name: &str, value: T) {
            let value = FakeValue::Module(Box::new(value));
            self.keys.insert(name.as_bytes().to_vec(), value);
        }

        /// The string `name` holds, if it holds one.
        pub fn string(&self, name: &str) -> Option<String> {
            match self.keys.get(name.as_bytes()) {
                Some(FakeValue::String(bytes)) => Some(lossy(bytes)),
                _ => None,
            }
        }

        /// The module value of type `T` that `name` holds, if it holds one.
        pub fn module<T: ModuleDataType>(&self, name: &str) -> Option<&T> {
            match self.keys.get(name.as_bytes()) {
                Some(FakeValue::Module(value)) => value.downcast_ref(),
                _ => None,
            }
        }
    }

    /// A key of a [`FakeKeys`] opened for reading.
    pub struct FakeReadKey<'k> {
        value: Option<&'k FakeValue>,
    }

    /// A key of a [`FakeKeys`] opened for writing.
    pub struct FakeWriteKey<'k> {
        keys: &'k mut HashMap<Vec<u8>, FakeValue>,
        name: Vec<u8>,
    }

    fn value_of<T: ModuleDataType>(value: Option<&FakeValue>) -> Result<Option<&T>, Refusal> {
        match value {
            None => Ok(None),
            Some(FakeValue::Module(value)) => value.downcast_ref().map(Some).ok_or_else(wrong_type),
            Some(_) => Err(wrong_type()),
        }
    }

    fn string_of(value: Option<&FakeValue>) -> Result<Option<&[u8]>, KeyKind> {
        match value {
            None => Ok(None),
            Some(FakeValue::String(bytes)) => Ok(Some(bytes)),
            Some(FakeValue::Module(_)) => Err(KeyKind::Module),
            Some(FakeValue::Other) => Err(KeyKind::Other),
        }
    }

    impl KeyRead for FakeReadKey<'_> {
        fn value<T: ModuleDataType>(&self) -> Result<Option<&T>, Refusal> {
            value_of(self.value)
        }
        fn string(&self) -> Result<Option<&[u8]>, KeyKind> {
            string_of(self.value)
        }
    }

    impl KeyRead for FakeWriteKey<'_> {
        fn value<T: ModuleDataType>(&self) -> Result<Option<&T>, Refusal> {
            value_of(self.keys.get(&self.name))
        }
        fn string(&self) -> Result<Option<&[u8]>, KeyKind> {
            string_of(self.keys.get(&self.name))
        }
    }

    impl KeyWrite for FakeWriteKey<'_> {
        fn value_mut<T: ModuleDataType>(&mut self) -> Result<Option<&mut T>, Refusal> {
            match self.keys.get_mut(&self.name) {
                None => Ok(None),
                Some(FakeValue::Module(value)) => {
                    value.downcast_mut().map(Some).ok_or_else(wrong_type)
                }
                Some(_) => Err(wrong_type()),
            }
        }
        fn store<T: ModuleDataType>(&mut self, value: T) -> Result<(), Refusal> {
            if let Some(current) = self.value_mut::<T>()? {
                *current = value;
                return Ok(());
            }
            let value = FakeValue::Module(Box::new(value));
            self.keys.insert(self.name.clone(), value);
            Ok(())
        }
        fn set_integer(&mut self, value: i64) -> Result<(), Refusal> {
            if let Some(FakeValue::Module(_) | FakeValue::Other) = self.keys.get(&self.name) {
                return Err(Refusal::new("ERR", "could not write the key"));
            }
            let digits = value.to_string().into_bytes();
            self.keys
                .insert(self.name.clone(), FakeValue::String(digits));
            Ok(())
        }
    }

    impl Keys<FakeCall> for FakeKeys {
        type Read<'k> = FakeReadKey<'k>;
        type Write<'k> = FakeWriteKey<'k>;
        fn open_read<'a>(&mut self, name: &'a [u8]) -> FakeReadKey<'_>
        where
            FakeCall: 'a,
        {
            FakeReadKey {
                value: self.keys.get(name),
            }
        }
        fn open_write<'a>(&mut self, name: &'a [u8]) -> FakeWriteKey<'_>
        where
            FakeCall: 'a,
        {
            FakeWriteKey {
                keys: &mut self.keys,
                name: name.to_vec(),
            }
        }
    }

    /// Runs a keyed handler on `call` and `keys`: what it replied, or its refusal as
    /// `error CODE message` (after which nothing may have been replied).
    pub fn run(
        handler: fn(&FakeCall, &mut FakeKeys) -> Result<(), Refusal>,
        call: &FakeCall,
        keys: &mut FakeKeys,
    ) -> String {
        match handler(call, keys) {
            Ok(()) => call.replied(),
            Err(refusal) => {
                assert!(
                    call.replied().is_empty(),
                    "replied before refusing: {}",
                    call.replied()
                );
                format!("error {}", refusal.0)
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
