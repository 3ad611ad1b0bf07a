//! `SNOWFLAKE.RANGE from-unix-ms to-unix-ms [FORMAT …]` and
//! `SNOWFLAKE.COMPOSE unix-ms shard sequence [FORMAT …]`: IDs built from their fields with
//! this instance's layout, for time-range queries and backfills. Neither reads or writes
//! any key, nor touches the instance's sequence.

use idgen_core::commands::OptionValue;
use idgen_core::IdFormat;

use crate::commands::args::parse_options;
use crate::ffi::call::Request;
use crate::ffi::refusal::Refusal;
use crate::state::instance;
use crate::state::leases;

/// Argument `index` as an integer of 0 or more; the error names it as `what`.
fn non_negative(call: &impl Request, index: usize, what: &str) -> Result<u64, Refusal> {
    call.arg_integer(index)
        .filter(|&value| value >= 0)
        .map(|value| value as u64)
        .ok_or_else(|| {
            Refusal::new(
                "ERR",
                format!(
                    "{what} must be an integer of 0 or more, got '{}'",
                    String::from_utf8_lossy(call.arg_bytes(index))
                ),
            )
        })
}

/// The `FORMAT` option from argument `first` on.
fn format_option(call: &impl Request, first: usize) -> Result<Option<IdFormat>, Refusal> {
    let [format] = parse_options(call, first)?;
    Ok(format.and_then(OptionValue::format))
}

/// `SNOWFLAKE.RANGE from-unix-ms to-unix-ms [FORMAT …]`: the lowest and the highest ID whose
/// time lies in the window (both ends included), for `WHERE id BETWEEN lowest AND highest`.
pub fn range(call: &impl Request) -> Result<(), Refusal> {
    let from = non_negative(call, 1, "from-unix-ms")?;
    let to = non_negative(call, 2, "to-unix-ms")?;
    let format = format_option(call, 3)?;
    let (lowest, highest) = instance::config().layout.window(from, to)?;
    call.reply_array(2);
    call.reply_id_in(lowest, format);
    call.reply_id_in(highest, format);
    Ok(())
}

/// `SNOWFLAKE.COMPOSE unix-ms shard sequence [FORMAT …]`: the ID with these fields.
pub fn compose(call: &impl Request) -> Result<(), Refusal> {
    let unix_ms = non_negative(call, 1, "unix-ms")?;
    let shard = non_negative(call, 2, "shard")?;
    let sequence = non_negative(call, 3, "sequence")?;
    let format = format_option(call, 4)?;
    if leases::reserved(shard) {
        return Err(leases::reserved_shard_refusal(shard));
    }
    let id = instance::config()
        .layout
        .compose_fields(unix_ms, shard, sequence)?;
    call.reply_id_in(id, format);
    Ok(())
}

#[cfg(test)]
mod tests {
    use idgen_core::commands::{SNOWFLAKE_COMPOSE, SNOWFLAKE_RANGE};
    use idgen_core::DEFAULT_EPOCH_UNIX_MS;

    use super::{compose, range};
    use crate::commands::args::fake::FakeCall;

    #[test]
    fn compose_builds_the_id_of_its_fields() {
        let ms = (DEFAULT_EPOCH_UNIX_MS + 1).to_string();
        let call = FakeCall::new(&SNOWFLAKE_COMPOSE, &[&ms, "3", "5"]);
        compose(&call).unwrap();
        assert_eq!(
            call.replied(),
            format!("int {}", (1u64 << 22) | (3 << 12) | 5)
        );
        let text = FakeCall::new(&SNOWFLAKE_COMPOSE, &[&ms, "0", "0", "FORMAT", "base32"]);
        compose(&text).unwrap();
        // 2^22 = 4·32^4: the digit 4, then four zeros.
        assert_eq!(text.replied(), "bulk 0000000040000");
    }

    #[test]
    fn compose_refuses_fields_outside_the_layout() {
        let ms = (DEFAULT_EPOCH_UNIX_MS + 1).to_string();
        let shard = FakeCall::new(&SNOWFLAKE_COMPOSE, &[&ms, "1024", "0"]);
        assert!(compose(&shard).is_err());
        let negative = FakeCall::new(&SNOWFLAKE_COMPOSE, &[&ms, "-1", "0"]);
        assert_eq!(
            compose(&negative).unwrap_err().0,
            "ERR shard must be an integer of 0 or more, got '-1'"
        );
        assert!(shard.replied().is_empty() && negative.replied().is_empty());
    }

    #[test]
    fn range_gives_the_lowest_and_highest_id_of_a_window() {
        let from = (DEFAULT_EPOCH_UNIX_MS + 1).to_string();
        let call = FakeCall::new(&SNOWFLAKE_RANGE, &[&from, &from]);
        range(&call).unwrap();
        assert_eq!(
            call.replied(),
            format!("array 2, int {}, int {}", 1u64 << 22, (2u64 << 22) - 1)
        );
        let backwards = FakeCall::new(&SNOWFLAKE_RANGE, &["2000000000000", "1900000000000"]);
        assert!(range(&backwards).is_err());
    }
}
