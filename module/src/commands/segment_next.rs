//! `SEGMENT.NEXT key [COUNT n] [FORMAT decimal]`.

use idgen_core::commands::OptionValue;
use idgen_core::{parse_redis_integer, reserve, ReservationPolicy, SegmentRange, SegmentRequest};
use redis_module::raw;

use crate::commands::args::parse_options;
use crate::commands::issuing::{refuse_on_conflict, refuse_on_replica};
use crate::ffi::call::Request;
use crate::ffi::keyspace::{KeyRead, KeyWrite, Keys};
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
pub fn next<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let [asked, decimal] = parse_options(call, 2)?;
    let asked = asked.and_then(OptionValue::integer);
    refuse_on_replica(call)?;
    refuse_on_conflict(call)?;
    let config = instance::config();
    let count = asked.unwrap_or(1);
    let held = counter_value(&keys.open_read(key_name))?;
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
fn write_ahead<R: Request, K: Keys<R>>(
    call: &R,
    keys: &mut K,
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
    keys.open_write(key_name).set_integer(reservation.top())?;
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
fn report_lowered(call: &impl Request, held: i64, handed_out: i64, first: i64) {
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
fn counter_value(key: &impl KeyRead) -> Result<i64, Refusal> {
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

#[cfg(test)]
mod tests {
    use idgen_core::commands::SEGMENT_NEXT;
    use idgen_core::{KeyRecord, DEFAULT_SEGMENT_FENCE};

    use super::next;
    use crate::commands::args::fake::{main_thread, run, FakeCall, FakeKeys};
    use crate::datatype::snowflake_key::SnowflakeKey;
    use crate::state::{failback_marks, reservations};

    // Each test names its own keys: the instance's reservations are shared by the tests.

    fn call(args: &[&str]) -> FakeCall {
        FakeCall::new(&SEGMENT_NEXT, args)
    }

    /// The first use after a start skips the fence above the key's value, and the new top is
    /// written into the key and replicated as `SET` before the value is answered.
    #[test]
    fn the_first_call_skips_the_fence_above_the_seeded_value() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_string("seg:seeded", "41");
        let first = call(&["seg:seeded"]);
        let expected = 41 + DEFAULT_SEGMENT_FENCE as i64 + 1;
        assert_eq!(run(next, &first, &mut keys), format!("int {expected}"));
        let top = keys.string("seg:seeded").unwrap();
        assert!(top.parse::<i64>().unwrap() >= expected, "{top}");
        assert_eq!(
            first.effected(),
            format!(
                "replicate SET seg:seeded {top}; \
                 notify segment.next seg:seeded (NotifyEvent(STRING))"
            )
        );
        // The next values follow one by one, each under what the key holds.
        let mut last = expected;
        for _ in 0..5 {
            let again = call(&["seg:seeded"]);
            let value: i64 = run(next, &again, &mut keys)
                .strip_prefix("int ")
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(value, last + 1);
            let top: i64 = keys.string("seg:seeded").unwrap().parse().unwrap();
            assert!(value <= top, "{value} above the key's {top}");
            if !again.effected().is_empty() {
                assert!(again
                    .effected()
                    .starts_with(&format!("replicate SET seg:seeded {top};")));
            }
            last = value;
        }
    }

    #[test]
    fn a_missing_key_counts_from_zero() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let expected = DEFAULT_SEGMENT_FENCE as i64 + 1;
        assert_eq!(
            run(next, &call(&["seg:new"]), &mut keys),
            format!("int {expected}")
        );
        assert!(keys.string("seg:new").is_some());
    }

    #[test]
    fn count_answers_first_last_and_step_and_format_decimal_answers_strings() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_string("seg:count", "0");
        let base = DEFAULT_SEGMENT_FENCE as i64;
        assert_eq!(
            run(next, &call(&["seg:count", "COUNT", "3"]), &mut keys),
            format!("array 3, int {}, int {}, int 1", base + 1, base + 3)
        );
        assert_eq!(
            run(next, &call(&["seg:count", "format", "DECIMAL"]), &mut keys),
            format!("bulk {}", base + 4)
        );
        assert_eq!(
            run(
                next,
                &call(&["seg:count", "COUNT", "2", "FORMAT", "decimal"]),
                &mut keys
            ),
            format!("array 3, bulk {}, bulk {}, bulk 1", base + 5, base + 6)
        );
    }

    #[test]
    fn bad_options_are_refused_and_the_key_is_unchanged() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_string("seg:options", "7");
        for (args, refusal) in [
            (
                &["seg:options", "COUNT", "0"][..],
                "error ERR COUNT must be a positive integer, got '0'",
            ),
            (
                &["seg:options", "FORMAT", "base32"],
                "error ERR FORMAT must be one of decimal, got 'base32'",
            ),
            (
                &["seg:options", "SHARD", "1"],
                "error ERR unknown option 'SHARD' for SEGMENT.NEXT; it takes COUNT n and \
                 FORMAT decimal",
            ),
        ] {
            let refused = call(args);
            assert_eq!(run(next, &refused, &mut keys), refusal);
            assert_eq!(refused.effected(), "");
        }
        assert_eq!(keys.string("seg:options").as_deref(), Some("7"));
    }

    #[test]
    fn a_key_of_another_kind_is_refused_and_kept() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_other("seg:list");
        keys.set_string("seg:text", "hello");
        let record = KeyRecord { bound: 1, owner: 0 };
        keys.set_module("seg:snowflake", SnowflakeKey::from_record(record));
        let wrong_type = "error WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(run(next, &call(&["seg:list"]), &mut keys), wrong_type);
        assert_eq!(run(next, &call(&["seg:snowflake"]), &mut keys), wrong_type);
        assert_eq!(
            run(next, &call(&["seg:text"]), &mut keys),
            "error ERR the key holds 'hello', not an integer; SEGMENT.NEXT continues from a \
             plain integer (SET it to a number, or use another key)"
        );
        assert_eq!(keys.string("seg:text").as_deref(), Some("hello"));
        assert!(keys.module::<SnowflakeKey>("seg:snowflake").is_some());
    }

    #[test]
    fn a_counter_at_the_top_of_the_integers_is_refused_and_kept() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let near_top = (i64::MAX - 10).to_string();
        keys.set_string("seg:top", &near_top);
        let refused = call(&["seg:top"]);
        let reply = run(next, &refused, &mut keys);
        assert!(
            reply.starts_with(&format!(
                "error OVERFLOW the counter holds {near_top}; the first call for a key after a \
                 start skips idgen.segment-fence"
            )),
            "{reply}"
        );
        assert!(reply.contains("nothing was handed out"), "{reply}");
        assert_eq!(refused.effected(), "");
        assert_eq!(keys.string("seg:top"), Some(near_top));
    }

    #[test]
    fn a_replica_refuses_and_a_replicated_call_is_not_refused() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_string("seg:replica", "3");
        let on_replica = call(&["seg:replica"]).on_replica();
        assert_eq!(
            run(next, &on_replica, &mut keys),
            "error READONLY this instance is a replica; IDs are issued only by masters"
        );
        assert_eq!(keys.string("seg:replica").as_deref(), Some("3"));
        let from_master = call(&["seg:replica"]).on_replica().replicated();
        assert!(run(next, &from_master, &mut keys).starts_with("int "));
    }

    /// A counter set below values this instance handed out continues above them, and says
    /// so in the log.
    #[test]
    fn a_lowered_counter_continues_above_what_was_handed_out() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let first: i64 = run(next, &call(&["seg:lowered"]), &mut keys)
            .strip_prefix("int ")
            .unwrap()
            .parse()
            .unwrap();
        keys.set_string("seg:lowered", "5");
        let lowered = call(&["seg:lowered"]);
        assert_eq!(run(next, &lowered, &mut keys), format!("int {}", first + 1));
        let effects = lowered.effected();
        assert!(
            effects.starts_with(&format!(
                "log segment counter 'seg:lowered' was set to 5, below the {first} this \
                 instance already handed out"
            )),
            "{effects}"
        );
    }

    /// After a full sync erased values this instance handed out (remembered when the sync
    /// flushed the data), the key's next use as master continues above them, writes that
    /// into the key, and forgets the mark.
    #[test]
    fn values_erased_by_a_full_sync_are_continued_above() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let first: i64 = run(next, &call(&["seg:failback"]), &mut keys)
            .strip_prefix("int ")
            .unwrap()
            .parse()
            .unwrap();
        // The sync: the mark, the reservation voided, the new master's lower value.
        failback_marks::remember(0, b"seg:failback", first + 100);
        reservations::void(0, b"seg:failback");
        keys.set_string("seg:failback", "3");
        let after = call(&["seg:failback"]);
        assert_eq!(run(next, &after, &mut keys), format!("int {}", first + 101));
        let top: i64 = keys.string("seg:failback").unwrap().parse().unwrap();
        assert!(top > first + 100, "{top}");
        assert!(after
            .effected()
            .starts_with(&format!("replicate SET seg:failback {top};")));
        assert_eq!(failback_marks::get(0, b"seg:failback"), None);
    }
}
