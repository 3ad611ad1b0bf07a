//! `SNOWFLAKE.NEXT`: IDs from the instance's sequence, a key's bound extended (and
//! replicated as `SNOWFLAKE.SETBOUND`) only when it must move.

use std::cell::Cell;

use idgen_core::commands::{OptionValue, SNOWFLAKE_SETBOUND};
use idgen_core::{Batch, Clocks, IdError, IdFormat, KeyIssue, KeyRecord, KeyState};
use redis_module::raw;

use crate::commands::args::parse_options;
use crate::commands::issuing::{refuse_on_conflict, refuse_on_replica};
use crate::datatype::snowflake_key::SnowflakeKey;
use crate::ffi::call::Request;
use crate::ffi::keyspace::{KeyRead, KeyWrite, Keys};
use crate::ffi::refusal::Refusal;
use crate::state::clock;
use crate::state::instance;
use crate::state::leases;
use crate::state::pacing;
use crate::state::stats;

/// `SNOWFLAKE.NEXT key [COUNT n] [SHARD s] [FORMAT decimal|base32|base62]`
pub fn next<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let options = NextOptions::parse(call)?;
    refuse_on_replica(call)?;
    refuse_on_conflict(call)?;
    // Opened for reading: most calls issue within the key's bound as its owner and change
    // only the in-memory last ID, which is not data (not saved, replicated or digested), so
    // Redis need not learn of a change. A call that extends the bound reopens it to write.
    let key = keys.open_read(key_name);
    let value = key.value::<SnowflakeKey>()?;
    if let (None, Some(value)) = (options.count, value) {
        if let Some(id) = issue_one_from_memory(value, options.shard) {
            call.reply_id_in(id, options.format);
            return Ok(());
        }
    }
    let issued = issue_by_general_rule(value, options)?;
    drop(key);
    if let Some(extended) = issued.extend {
        write_bound(call, keys, key_name, extended, issued.batch.last_id())?;
    }
    reply_batch(call, &issued.batch, options);
    Ok(())
}

/// `SNOWFLAKE.NEXT`'s options.
#[derive(Clone, Copy)]
struct NextOptions {
    /// `COUNT n`: `None` for one ID, replied as a single value rather than an array.
    count: Option<u64>,
    /// `SHARD s`, or the configured default.
    shard: u64,
    /// `FORMAT`: `None` for the integer (a string inside scripts).
    format: Option<IdFormat>,
}

impl NextOptions {
    #[inline(always)]
    fn parse(call: &impl Request) -> Result<Self, Refusal> {
        let [count, shard, format] = parse_options(call, 2)?;
        let shard = shard.and_then(OptionValue::integer);
        if let Some(shard) = shard.filter(|&shard| leases::reserved(shard)) {
            return Err(leases::reserved_shard_refusal(shard));
        }
        Ok(NextOptions {
            count: count.and_then(OptionValue::integer),
            shard: shard.unwrap_or_else(|| instance::config().default_shard),
            format: format.and_then(OptionValue::format),
        })
    }
}

/// Almost every call: one ID for a key this instance owns, under its bound, in the same
/// millisecond as the call before; `None`, with nothing changed, for any other. The general
/// rule ([`issue_by_general_rule`]) gives the same answer for it (idgen-core property-tests
/// that); this path skips its bookkeeping, and stays small enough to run inline.
///
/// It takes the server's time for the command without asking whether the call is in a
/// transaction or script, where that time stands still: the path issues only in the wall
/// millisecond the previous call saw, never borrowing ahead, so a time standing still makes
/// it answer `None` once that millisecond's sequence is used up, and the general rule then
/// reads the clock itself.
#[inline(always)]
fn issue_one_from_memory(value: &SnowflakeKey, shard: u64) -> Option<u64> {
    let me = instance::incarnation();
    let wall_unix_ms = clock::command_wall_unix_ms();
    let state = value.state();
    let id = instance::with_sequence(|sequence| {
        sequence.issue_one_owned(wall_unix_ms, shard, state, me)
    })?;
    value.last_issued.set(Some(id));
    // Within the drift bound: the clock is not running ahead.
    pacing::observe(None);
    stats::SNOWFLAKE_CALLS.add(1);
    stats::SNOWFLAKE_IDS.add(1);
    Some(id)
}

/// The general rule, for every call the in-memory path does not answer: a batch, a new
/// millisecond, a key this instance does not own (yet), a bound to extend, a clock that
/// stepped. Records the last ID in the key's memory when the bound stays; the issue says
/// which bound to write when it must be extended.
#[inline(never)]
fn issue_by_general_rule(
    value: Option<&SnowflakeKey>,
    options: NextOptions,
) -> Result<KeyIssue, Refusal> {
    let state = value.map_or(KeyState::default(), SnowflakeKey::state);
    let clocks = clock::CallClocks::read();
    let wall_unix_ms = clocks.wall_unix_ms();
    let (issue, pacing) = instance::with_sequence(|sequence| {
        let issue = sequence.issue_for_key(
            &clocks,
            options.count.unwrap_or(1),
            options.shard,
            state,
            instance::incarnation(),
            instance::config().snowflake_lease_ms(),
        )?;
        let pacing = sequence
            .is_pacing(wall_unix_ms)
            .then(|| sequence.ahead_of_wall_ms(wall_unix_ms));
        Ok::<_, IdError>((issue, pacing))
    })
    .inspect_err(|error| {
        if matches!(error, IdError::Drift { .. }) {
            stats::DRIFT_REFUSALS.add(1);
        }
    })?;
    let batch = &issue.batch;
    pacing::observe(pacing);
    // Within the key's bound, as its owner: only the in-memory last ID changes. Nothing is
    // written to the dataset, replicas or the AOF.
    if let (None, Some(value)) = (issue.extend, value) {
        value.last_issued.set(Some(batch.last_id()));
    }
    Ok(issue)
}

/// Writes the key's extended bound (with the batch's last ID in memory), and sends it to
/// replicas and the AOF before any ID under it is answered.
#[inline(never)]
fn write_bound<R: Request, K: Keys<R>>(
    call: &R,
    keys: &mut K,
    key_name: R::Arg<'_>,
    extended: KeyRecord,
    last_id: u64,
) -> Result<(), Refusal> {
    let mut key = keys.open_write(key_name);
    key.store(SnowflakeKey {
        record: extended,
        last_issued: Cell::new(Some(last_id)),
    })?;
    drop(key);
    call.replicate_key_values(
        SNOWFLAKE_SETBOUND.name,
        key_name,
        extended.bound as i64,
        extended.owner as i64,
    );
    stats::SNOWFLAKE_BOUND_WRITES.add(1);
    // Like WATCH, a keyspace notification marks a change to the key's data: the bound, not
    // the in-memory last ID (docs/commands.md).
    call.notify(raw::NotifyEvent::MODULE, key_name);
    Ok(())
}

/// Counts the batch in `INFO idgen` and replies with it: its one ID, or an array of them
/// for `COUNT`.
fn reply_batch(call: &impl Request, batch: &Batch, options: NextOptions) {
    stats::SNOWFLAKE_CALLS.add(1);
    stats::SNOWFLAKE_IDS.add(batch.count);
    if batch.borrowed_ms != 0 {
        stats::BORROWED_MS.add(batch.borrowed_ms);
    }
    if batch.clock_stepped_back {
        stats::CLOCK_STEP_BACKS.add(1);
    }
    let reply = |id: u64| call.reply_id_in(id, options.format);
    if options.count.is_none() {
        reply(batch.first_id());
    } else {
        call.reply_array(batch.count as usize);
        batch.ids().for_each(reply);
    }
}

#[cfg(test)]
mod tests {
    use idgen_core::commands::SNOWFLAKE_NEXT;
    use idgen_core::{IdFormat, KeyRecord};

    use super::next;
    use crate::commands::args::fake::{main_thread, run, FakeCall, FakeKeys};
    use crate::datatype::snowflake_key::SnowflakeKey;
    use crate::state::instance;

    // Each test names its own keys; the instance's sequence is shared by the tests.

    fn call(args: &[&str]) -> FakeCall {
        FakeCall::new(&SNOWFLAKE_NEXT, args)
    }

    /// The IDs of a reply of integers (`int a` or `array n, int a, …`).
    fn ids(reply: &str) -> Vec<u64> {
        reply
            .split(", ")
            .filter_map(|part| part.strip_prefix("int "))
            .map(|id| id.parse().unwrap())
            .collect()
    }

    fn record(keys: &FakeKeys, name: &str) -> KeyRecord {
        keys.module::<SnowflakeKey>(name).unwrap().record
    }

    /// The first call records the key's bound, owned by this instance, and replicates it as
    /// `SNOWFLAKE.SETBOUND` before answering; calls under the bound write and replicate
    /// nothing.
    #[test]
    fn the_first_call_writes_the_bound_and_later_ones_issue_under_it() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let first = call(&["sf:first"]);
        let first_id = ids(&run(next, &first, &mut keys))[0];
        let written = record(&keys, "sf:first");
        assert_eq!(written.owner, instance::incarnation());
        assert!(first_id <= written.bound);
        assert_eq!(
            first.effected(),
            format!(
                "replicate SNOWFLAKE.SETBOUND sf:first {} {}; \
                 notify snowflake.next sf:first (NotifyEvent(MODULE))",
                written.bound, written.owner as i64
            )
        );
        let mut last = first_id;
        for _ in 0..20 {
            let again = call(&["sf:first"]);
            let id = ids(&run(next, &again, &mut keys))[0];
            assert!(id > last, "{id} after {last}");
            let now = record(&keys, "sf:first");
            assert!(id <= now.bound);
            if now == written {
                assert_eq!(again.effected(), "");
            }
            last = id;
        }
    }

    #[test]
    fn count_answers_an_array_of_increasing_ids_and_format_a_string() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let reply = run(next, &call(&["sf:count", "COUNT", "3"]), &mut keys);
        assert!(reply.starts_with("array 3, int "), "{reply}");
        let batch = ids(&reply);
        assert_eq!(batch.len(), 3);
        assert!(batch.windows(2).all(|pair| pair[0] < pair[1]), "{reply}");
        assert!(batch[2] <= record(&keys, "sf:count").bound);
        let text = run(next, &call(&["sf:count", "FORMAT", "base62"]), &mut keys);
        let id = IdFormat::Base62
            .decode(text.strip_prefix("bulk ").unwrap())
            .unwrap();
        assert!(id > batch[2], "{id} after {batch:?}");
        let batch = run(
            next,
            &call(&["sf:count", "COUNT", "2", "FORMAT", "decimal"]),
            &mut keys,
        );
        assert!(batch.starts_with("array 2, bulk "), "{batch}");
    }

    #[test]
    fn shard_is_carried_in_the_id_and_leased_worker_ids_are_refused() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let id = ids(&run(next, &call(&["sf:shard", "SHARD", "5"]), &mut keys))[0];
        let config = instance::config();
        let parts = config
            .layout
            .decode(id as i64, config.identity.step)
            .unwrap();
        assert_eq!(parts.shard, 5);
        let leased = call(&["sf:shard", "SHARD", "1020"]);
        assert_eq!(
            run(next, &leased, &mut keys),
            "error ERR shard 1020 is a leased worker id: shard values 1020 to 1023 are reserved \
             by idgen.lease-workers for LEASE.ACQUIRE holders; use a shard below 1020"
        );
        assert_eq!(leased.effected(), "");
        // Past the shard field: out of range, not "leased" (the band ends at 1023).
        let too_large = run(next, &call(&["sf:shard", "SHARD", "1024"]), &mut keys);
        assert!(
            too_large.starts_with("error ") && !too_large.contains("leased"),
            "{too_large}"
        );
        assert_eq!(
            run(next, &call(&["sf:shard", "SHARD", "x"]), &mut keys),
            "error ERR SHARD must be an integer of 0 or more, got 'x'"
        );
    }

    #[test]
    fn a_key_of_another_type_is_refused_and_kept() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_string("sf:text", "12");
        keys.set_other("sf:list");
        let wrong_type = "error WRONGTYPE Operation against a key holding the wrong kind of value";
        for name in ["sf:text", "sf:list"] {
            for args in [&[name][..], &[name, "COUNT", "2"]] {
                let refused = call(args);
                assert_eq!(run(next, &refused, &mut keys), wrong_type);
                assert_eq!(refused.effected(), "");
            }
        }
        assert_eq!(keys.string("sf:text").as_deref(), Some("12"));
    }

    #[test]
    fn a_replica_refuses_and_writes_nothing() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let refused = call(&["sf:replica"]).on_replica();
        assert_eq!(
            run(next, &refused, &mut keys),
            "error READONLY this instance is a replica; IDs are issued only by masters"
        );
        assert!(keys.keys.is_empty());
        assert_eq!(refused.effected(), "");
    }

    /// A bound this instance does not own (an operator's, or another instance's) is
    /// continued above, and a new bound of its own is written and replicated.
    #[test]
    fn a_bound_set_elsewhere_is_continued_above() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let seen = ids(&run(next, &call(&["sf:elsewhere"]), &mut keys))[0];
        let bound = seen + (1 << 22);
        keys.set_module(
            "sf:elsewhere",
            SnowflakeKey::from_record(KeyRecord { bound, owner: 0 }),
        );
        let after = call(&["sf:elsewhere"]);
        let id = ids(&run(next, &after, &mut keys))[0];
        assert!(id > bound, "{id} not above {bound}");
        let written = record(&keys, "sf:elsewhere");
        assert_eq!(written.owner, instance::incarnation());
        assert!(id <= written.bound);
        assert!(after.effected().starts_with(&format!(
            "replicate SNOWFLAKE.SETBOUND sf:elsewhere {} ",
            written.bound
        )));
    }
}
