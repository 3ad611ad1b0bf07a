//! `SNOWFLAKE.DECODE id`.

use idgen_core::utc::format_unix_ms;

use crate::ffi::{Call, Refusal};
use crate::state;

/// Replies with the parts of an ID as field/value pairs (a map for RESP3 clients).
pub fn decode(call: &Call) -> Result<(), Refusal> {
    let config = state::config();
    let id = call.arg_integer(1).ok_or_else(|| {
        Refusal::new(
            "ERR",
            format!(
                "'{}' is not an ID: an ID is a positive integer",
                String::from_utf8_lossy(call.arg_bytes(1))
            ),
        )
    })?;
    let parts = config.layout.decode(id, config.identity.step)?;
    call.reply_map(6);
    call.reply_bulk("unix_ms");
    call.reply_integer(parts.unix_ms as i64);
    call.reply_bulk("utc");
    call.reply_bulk(&format_unix_ms(parts.unix_ms));
    call.reply_bulk("time_ms");
    call.reply_integer(parts.time_ms as i64);
    call.reply_bulk("shard");
    call.reply_integer(parts.shard as i64);
    call.reply_bulk("sequence");
    call.reply_integer(parts.sequence as i64);
    call.reply_bulk("offset");
    call.reply_integer(parts.offset as i64);
    Ok(())
}
