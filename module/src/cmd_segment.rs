//! `SEGMENT.NEXT key [COUNT n] [FORMAT decimal]`.

use idgen_core::{continue_above, next_range, parse_redis_integer};
use redis_module::raw;

use crate::args::{parse_options, COUNT, DECIMAL_FORMAT};
use crate::call::Call;
use crate::cmd_snowflake::refuse_on_replica;
use crate::key::{KeyKind, Keyspace, Write};
use crate::refusal::{wrong_type, Refusal};
use crate::{counters, fence, segment_marks, state};

/// Hands out the COUNT smallest values above the key's integer that belong to this
/// instance's residue class, and stores the largest as the key's new value.
///
/// Two things can put the start higher: the segment fence, on a key's first use after a
/// start (`fence`), and a value this instance handed out for the key before a full sync
/// replaced its data (`segment_marks`).
pub fn next(call: &Call, keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let [count, decimal] = parse_options(call, "SEGMENT.NEXT", 2, [&COUNT, &DECIMAL_FORMAT])?;
    refuse_on_replica(call)?;
    let config = state::config();
    let mut key = keys.open::<Write>(key_name);
    let current = match key.kind() {
        KeyKind::Empty => 0,
        KeyKind::String => {
            let text = key.string_value();
            parse_redis_integer(text).ok_or_else(|| {
                Refusal::new(
                    "ERR",
                    format!(
                        "the key holds '{}', not an integer; SEGMENT.NEXT continues from a plain \
                         integer (SET it to a number, or use another key)",
                        String::from_utf8_lossy(&text[..text.len().min(40)])
                    ),
                )
            })?
        }
        _ => return Err(wrong_type()),
    };
    let (db, key_bytes) = (call.selected_db(), call.arg_bytes(1));
    let fenced = config.segment_fence > 0 && fence::is_pending(db, key_bytes);
    let fence = if fenced { config.segment_fence } else { 0 };
    let remembered = segment_marks::get(db, key_bytes);
    let range = next_range(
        continue_above(current, remembered),
        config.identity,
        count.unwrap_or(1),
        fence,
    )?;
    key.set_integer(range.last)?;
    drop(key);
    if fenced {
        fence::mark_applied(db, key_bytes);
    }
    if remembered.is_some() {
        segment_marks::forget(db, key_bytes);
    }

    call.replicate_key_value(c"SET", key_name, range.last);
    call.notify(raw::NotifyEvent::STRING, c"segment.next", key_name);
    counters::SEGMENT_CALLS.add(1);
    counters::SEGMENT_IDS.add(range.count);
    // FORMAT decimal: the same numbers as strings, which JavaScript clients keep whole.
    let reply = |value: i64| match decimal {
        None => call.reply_integer(value),
        Some(_) => call.reply_bulk(&value.to_string()),
    };
    if count.is_none() {
        reply(range.first);
    } else {
        call.reply_array(3);
        reply(range.first);
        reply(range.last);
        reply(range.step as i64);
    }
    Ok(())
}
