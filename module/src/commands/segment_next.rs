//! `SEGMENT.NEXT key [COUNT n] [FORMAT decimal]`.

use idgen_core::commands::OptionValue;
use idgen_core::{parse_redis_integer, reserve, ReservationPolicy, SegmentRange, SegmentRequest};
use redis_module::raw;

use crate::commands::args::parse_options;
use crate::commands::issuing::{refuse_on_conflict, refuse_on_replica};
use crate::ffi::call::Call;
use crate::ffi::keyspace::{Key, Keyspace, Read, Write};
use crate::ffi::refusal::{wrong_type, Refusal};
use crate::state::clock;
use crate::state::failback_marks;
use crate::state::instance;
use crate::state::reservations;
use crate::state::stats;

/// Hands out the COUNT smallest values above the key's integer that belong to this
/// instance's residue class.
///
/// Most calls are served from the key's reservation in memory and write nothing: the key
/// already holds a value at or above them (`state::reservations`). Otherwise the call takes its
/// range above the key's value — skipping the segment fence on the key's first use after a
/// start, and above a value this instance handed out before a full sync replaced its data
/// (`state::failback_marks`) — and writes a new reservation's top into the key (replicated as
/// `SET`) before it answers.
pub fn next(call: &Call, keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let [asked, decimal] = parse_options(call, 2)?;
    let asked = asked.and_then(OptionValue::integer);
    refuse_on_replica(call)?;
    refuse_on_conflict(call)?;
    let config = instance::config();
    let count = asked.unwrap_or(1);
    let held = counter_value(&keys.open::<Read>(key_name))?;
    let (db, key_bytes) = (call.selected_db(), call.arg_bytes(1));
    let range = match reservations::take(db, key_bytes, held, count, config.identity.step) {
        Some(range) => range,
        None => write_ahead(call, keys, held, count)?,
    };
    stats::SEGMENT_CALLS.add(1);
    stats::SEGMENT_IDS.add(range.count);
    // FORMAT decimal: the same numbers as strings, which JavaScript clients keep whole.
    let reply = |value: i64| match decimal {
        None => call.reply_integer(value),
        Some(_) => call.reply_bulk(itoa::Buffer::new().format(value)),
    };
    if asked.is_none() {
        reply(range.first);
    } else {
        call.reply_array(3);
        reply(range.first);
        reply(range.last);
        reply(range.step as i64);
    }
    Ok(())
}

/// A call the key's reservation cannot serve: takes the range and writes the new
/// reservation's top into the key, replicated and notified, before the values are answered.
fn write_ahead(
    call: &Call,
    keys: &mut Keyspace<'_>,
    held: i64,
    count: u64,
) -> Result<SegmentRange, Refusal> {
    let config = instance::config();
    let (db, key_bytes) = (call.selected_db(), call.arg_bytes(1));
    let previous = reservations::get(db, key_bytes);
    let fence = if previous.is_none() {
        config.segment_fence
    } else {
        0
    };
    let remembered = failback_marks::get(db, key_bytes);
    let request = SegmentRequest {
        identity: config.identity,
        count,
        fence,
        remembered,
        now_ms: clock::monotonic_ms(),
        policy: ReservationPolicy::for_fence(config.segment_fence),
    };
    let step = config.identity.step;
    let lowered = previous.filter(|previous| previous.lowered_by(held, step));
    let (range, reservation) = reserve(held, previous.as_ref(), request)?;
    if let Some(previous) = lowered {
        report_lowered(call, held, previous.handed_out_up_to(step), range.first);
    }
    let key_name = call.arg(1);
    keys.open::<Write>(key_name)
        .set_integer(reservation.top())?;
    reservations::store(db, key_bytes, reservation);
    if fence > 0 {
        stats::FENCES_APPLIED.add(1);
    }
    if remembered.is_some() {
        failback_marks::forget(db, key_bytes);
    }
    call.replicate_key_value(c"SET", key_name, reservation.top());
    call.notify(raw::NotifyEvent::STRING, key_name);
    stats::SEGMENT_WRITES.add(1);
    Ok(range)
}

/// How many lowered counters are logged one by one; later ones are counted only.
const LOWERED_LOGGED: u64 = 10;

/// Counts a key found lowered below values this instance handed out, and logs the first few.
#[cold]
#[inline(never)]
fn report_lowered(call: &Call, held: i64, handed_out: i64, first: i64) {
    stats::SEGMENT_COUNTERS_LOWERED.add(1);
    let seen = stats::SEGMENT_COUNTERS_LOWERED.get();
    if seen > LOWERED_LOGGED {
        return;
    }
    let key = String::from_utf8_lossy(call.arg_bytes(1));
    let more = if seen == LOWERED_LOGGED {
        " (further ones are only counted in idgen_segment_counters_lowered)"
    } else {
        ""
    };
    call.log_warning(&format!(
        "segment counter '{key}' was set to {held}, below the {handed_out} this instance \
         already handed out; SEGMENT.NEXT continues above it (from {first}) so no value is \
         handed out twice. To restart a counter lower on purpose, DEL it first{more}"
    ));
}

/// The integer a segment key holds (0 when missing); refuses any other value.
fn counter_value(key: &Key<'_, Read>) -> Result<i64, Refusal> {
    match key.string() {
        Ok(None) => Ok(0),
        Ok(Some(text)) => parse_redis_integer(text).ok_or_else(|| {
            Refusal::new(
                "ERR",
                format!(
                    "the key holds '{}', not an integer; SEGMENT.NEXT continues from a plain \
                     integer (SET it to a number, or use another key)",
                    String::from_utf8_lossy(&text[..text.len().min(40)])
                ),
            )
        }),
        Err(_) => Err(wrong_type()),
    }
}
