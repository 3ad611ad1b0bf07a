//! `SNOWFLAKE.NEXT`, `SNOWFLAKE.BOUND` and `SNOWFLAKE.SETBOUND` (and `SNOWFLAKE.SETLAST`, its
//! old name, kept so that AOF files written by earlier versions still load).

use std::ptr::NonNull;

use idgen_core::{IdError, KeyRecord, KeyState};
use redis_module::raw;

use crate::args::{parse_options, COUNT, SHARD};
use crate::ffi::{wrong_type, Call, Key, KeyKind, Refusal};
use crate::snowflake_type::{raise_floor_for, raw_type, SnowflakeKey};
use crate::{clock, counters, pacing, state};

/// Refuses to issue on a replica: only masters issue, so that a replica promoted later
/// continues from its own offset without having handed anything out.
pub fn refuse_on_replica(call: &Call) -> Result<(), Refusal> {
    if call.is_replica() && !call.is_replicated_or_loading() {
        return Err(Refusal::new(
            "READONLY",
            "this instance is a replica; IDs are issued only by masters",
        ));
    }
    Ok(())
}

/// The key's recorded value, if it is a snowflake key; `Ok(None)` if it is empty.
fn snowflake_value(key: &Key) -> Result<Option<NonNull<SnowflakeKey>>, Refusal> {
    match key.kind() {
        KeyKind::Empty => Ok(None),
        KeyKind::Module(kind) if kind == raw_type() => Ok(key.module_value::<SnowflakeKey>()),
        _ => Err(wrong_type()),
    }
}

/// Writes `record` as the key's record, creating the key if needed.
fn record(
    key: &Key,
    existing: Option<NonNull<SnowflakeKey>>,
    record: KeyRecord,
    last_issued: Option<u64>,
) -> Result<(), Refusal> {
    let value = SnowflakeKey {
        record,
        last_issued,
    };
    match existing {
        // SAFETY: the value belongs to the open key and nothing else refers to it now.
        Some(mut current) => unsafe { *current.as_mut() = value },
        None => key.set_module_value(raw_type(), Box::new(value))?,
    }
    Ok(())
}

/// `SNOWFLAKE.NEXT key [COUNT n] [SHARD s]`
pub fn next(call: &Call) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let [count, shard] = parse_options(call, "SNOWFLAKE.NEXT", 2, [&COUNT, &SHARD])?;
    refuse_on_replica(call)?;
    let config = state::config();
    let key = call.open_key(key_name, true);
    let existing = snowflake_value(&key)?;
    // SAFETY: the value belongs to the open key.
    let state = existing.map_or(KeyState::default(), |value| {
        let value = unsafe { value.as_ref() };
        KeyState {
            record: Some(value.record),
            last_issued: value.last_issued,
        }
    });
    let now = clock::now();
    let (issue, pacing) = state::with_sequence(|sequence| {
        let issue = sequence.issue_for_key(
            now,
            count.unwrap_or(1),
            shard.unwrap_or(config.default_shard),
            state,
            state::incarnation(),
            config.snowflake_lease_ms(),
        )?;
        Ok::<_, IdError>((issue, sequence.is_pacing(now)))
    })
    .inspect_err(|error| {
        if matches!(error, IdError::Drift { .. }) {
            counters::DRIFT_REFUSALS.add(1);
        }
    })?;
    let batch = issue.batch;
    pacing::observe(pacing, batch.last.time_ms, now);
    match (issue.extend, existing) {
        // Within the key's bound, as its owner: only the in-memory last ID changes. Nothing
        // is written to the dataset, replicas or the AOF.
        // SAFETY: the value belongs to the open key and nothing else refers to it now.
        (None, Some(mut value)) => unsafe { value.as_mut().last_issued = Some(batch.last_id()) },
        (extend, _) => {
            let extended = extend.unwrap_or_else(|| KeyRecord {
                bound: batch.last_id(),
                owner: state::incarnation(),
            });
            record(&key, existing, extended, Some(batch.last_id()))?;
            drop(key);
            // The bound reaches replicas and the AOF before any ID under it is answered.
            call.replicate_key_values(
                c"SNOWFLAKE.SETBOUND",
                key_name,
                extended.bound as i64,
                extended.owner as i64,
            );
            counters::SNOWFLAKE_BOUND_WRITES.add(1);
        }
    }

    call.notify(raw::NotifyEvent::MODULE, c"snowflake.next", key_name);
    counters::SNOWFLAKE_CALLS.add(1);
    counters::SNOWFLAKE_IDS.add(batch.count);
    counters::BORROWED_MS.add(batch.borrowed_ms);
    counters::CLOCK_STEP_BACKS.add(u64::from(batch.clock_stepped_back));
    if count.is_none() {
        call.reply_id(batch.first_id());
    } else {
        call.reply_array(batch.count as usize);
        for id in batch.ids() {
            call.reply_id(id);
        }
    }
    Ok(())
}

/// `SNOWFLAKE.BOUND key`: the key's bound (every ID issued for it is at most this), or nil.
pub fn bound(call: &Call) -> Result<(), Refusal> {
    let key = call.open_key(call.arg(1), false);
    match snowflake_value(&key)? {
        // SAFETY: the value belongs to the open key.
        Some(value) => call.reply_id(unsafe { value.as_ref().record.bound }),
        None => call.reply_null(),
    }
    Ok(())
}

/// `SNOWFLAKE.SETBOUND key bound [owner]`: records a key's bound.
///
/// This is the form in which `SNOWFLAKE.NEXT` reaches replicas and the AOF (with the
/// owner). From a client it is an operator's write: it only moves a bound forward, no
/// further ahead than the drift bound, and records no owner — every instance then continues
/// above it. `SNOWFLAKE.SETLAST key id`, its old name, does the same without an owner.
pub fn set_bound(call: &Call) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let config = state::config();
    let bound = call
        .arg_integer(2)
        .ok_or_else(|| Refusal::new("ERR", "the bound must be an integer (an ID)"))?;
    config.layout.decode(bound, config.identity.step)?;
    let bound = bound as u64;
    let from_client = !call.is_replicated_or_loading();
    let owner = match (call.argc(), from_client) {
        (3, _) => 0,
        (4, false) => call
            .arg_integer(3)
            .ok_or_else(|| Refusal::new("ERR", "the owner must be an integer"))?
            as u64,
        (4, true) => {
            return Err(Refusal::new(
                "ERR",
                "the owner is written by replication and the AOF only; a client sets a bound \
                 with no owner: SNOWFLAKE.SETBOUND key bound",
            ))
        }
        _ => {
            return Err(Refusal::new(
                "ERR",
                "wrong number of arguments for SNOWFLAKE.SETBOUND: key bound [owner]",
            ))
        }
    };
    refuse_on_replica(call)?;
    let key = call.open_key(key_name, true);
    let existing = snowflake_value(&key)?;
    if from_client {
        // SAFETY: the value belongs to the open key.
        if let Some(current) = existing.map(|value| unsafe { value.as_ref().record.bound }) {
            if bound <= current {
                return Err(Refusal::new(
                    "ERR",
                    format!("SNOWFLAKE.SETBOUND only moves a key's bound forward; it is {current}"),
                ));
            }
        }
    }
    // Replayed from the AOF or the master: raise the floor whatever the clock says, since
    // IDs up to the bound may exist. From a client: refuse a bound too far ahead.
    if !raise_floor_for(bound, from_client) {
        return Err(Refusal::new(
            "DRIFT",
            format!(
                "bound {bound} is more than idgen.max-drift-ms ({} ms) ahead of this server's clock",
                config.max_drift_ms
            ),
        ));
    }
    record(&key, existing, KeyRecord { bound, owner }, None)?;
    drop(key);
    call.replicate_key_values(c"SNOWFLAKE.SETBOUND", key_name, bound as i64, owner as i64);
    call.reply_simple(c"OK");
    Ok(())
}
