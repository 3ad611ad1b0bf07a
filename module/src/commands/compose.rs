//! `SNOWFLAKE.RANGE from-unix-ms to-unix-ms [FORMAT …]` and
//! `SNOWFLAKE.COMPOSE unix-ms shard sequence [FORMAT …]`: IDs built from their fields with
//! this instance's layout, for time-range queries and backfills. Neither reads or writes
//! any key, nor touches the instance's sequence.

use idgen_core::commands::OptionValue;
use idgen_core::IdFormat;

use crate::commands::args::parse_options;
use crate::ffi::call::Call;
use crate::ffi::keyspace::Keyspace;
use crate::ffi::refusal::Refusal;
use crate::state::instance;
use crate::state::leases;

/// Argument `index` as an integer of 0 or more; the error names it as `what`.
fn non_negative(call: &Call, index: usize, what: &str) -> Result<u64, Refusal> {
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
fn format_option(call: &Call, first: usize) -> Result<Option<IdFormat>, Refusal> {
    let [format] = parse_options(call, first)?;
    Ok(format.and_then(OptionValue::format))
}

/// `SNOWFLAKE.RANGE from-unix-ms to-unix-ms [FORMAT …]`: the lowest and the highest ID whose
/// time lies in the window (both ends included), for `WHERE id BETWEEN lowest AND highest`.
pub fn range(call: &Call, _keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
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
pub fn compose(call: &Call, _keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
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
