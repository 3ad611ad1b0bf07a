//! `SNOWFLAKE.DECODE id [FORMAT decimal|base32|base62]`.

use idgen_core::commands::OptionValue;
use idgen_core::utc::format_unix_ms;

use crate::commands::args::parse_options;
use crate::ffi::call::Request;
use crate::ffi::refusal::Refusal;
use crate::state::instance;
use crate::state::leases;

/// Replies with the parts of an ID as field/value pairs (a map for RESP3 clients). The ID
/// is an integer, or a string in the given FORMAT.
pub fn decode(call: &impl Request) -> Result<(), Refusal> {
    let config = instance::config();
    let [format] = parse_options(call, 2)?;
    let id = match format.and_then(OptionValue::format) {
        Some(format) => {
            let text = String::from_utf8_lossy(call.arg_bytes(1));
            format
                .decode(&text)
                .map_err(|error| Refusal::new("ERR", error.to_string()))? as i64
        }
        None => call.arg_integer(1).ok_or_else(|| {
            Refusal::new(
                "ERR",
                format!(
                    "'{}' is not an ID: an ID is a positive integer (for a base32 or base62 \
                     string, add FORMAT base32 or FORMAT base62)",
                    String::from_utf8_lossy(call.arg_bytes(1))
                ),
            )
        })?,
    };
    let parts = config.layout.decode(id, config.identity.step)?;
    // An ID of a leased worker id says so (its sequence says nothing of an instance).
    let leased = leases::reserved(parts.shard);
    call.reply_map(if leased { 7 } else { 6 });
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
    if leased {
        call.reply_bulk("leased_worker");
        call.reply_integer(parts.shard as i64);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use idgen_core::commands::SNOWFLAKE_DECODE;

    use super::decode;
    use crate::commands::args::fake::FakeCall;

    #[test]
    fn an_id_is_split_into_its_fields() {
        // 1 ms after the default epoch, shard 3, sequence 5.
        let id = (1u64 << 22) | (3 << 12) | 5;
        let call = FakeCall::new(&SNOWFLAKE_DECODE, &[&id.to_string()]);
        decode(&call).unwrap();
        let replied = call.replied();
        assert!(
            replied.starts_with("map 6, bulk unix_ms, int "),
            "{replied}"
        );
        assert!(
            replied.ends_with(
                "bulk time_ms, int 1, bulk shard, int 3, bulk sequence, int 5, bulk offset, int 0"
            ),
            "{replied}"
        );
    }

    #[test]
    fn text_forms_are_read_back_and_bad_ids_refused() {
        let id = (1u64 << 22) | 5;
        let text = idgen_core::IdFormat::Base62.encode(id);
        let call = FakeCall::new(&SNOWFLAKE_DECODE, &[&text, "format", "BASE62"]);
        decode(&call).unwrap();
        assert!(call.replied().contains("bulk sequence, int 5"));
        let bad = FakeCall::new(&SNOWFLAKE_DECODE, &["abc"]);
        let refusal = decode(&bad).unwrap_err().0;
        assert!(refusal.starts_with("ERR 'abc' is not an ID"), "{refusal}");
        assert!(bad.replied().is_empty());
        let negative = FakeCall::new(&SNOWFLAKE_DECODE, &["-5"]);
        assert!(decode(&negative).is_err());
    }
}
