//! `SNOWFLAKE.NEXT`, `SNOWFLAKE.LAST` and `SNOWFLAKE.SETLAST`.

use std::ptr::NonNull;

use idgen_core::{IdError, Request};
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

/// Records `last_id` as the key's last ID, creating the key if needed.
fn record(key: &Key, existing: Option<NonNull<SnowflakeKey>>, last_id: u64) -> Result<(), Refusal> {
    match existing {
        // SAFETY: the value belongs to the open key and nothing else refers to it now.
        Some(mut value) => unsafe { value.as_mut().last_id = last_id },
        None => key.set_module_value(raw_type(), Box::new(SnowflakeKey { last_id }))?,
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
    let request = Request {
        count: count.unwrap_or(1),
        shard: shard.unwrap_or(config.default_shard),
        // SAFETY: the value belongs to the open key.
        above: existing.map(|value| unsafe { value.as_ref().last_id }),
    };
    let now = clock::now();
    let (batch, pacing) = state::with_sequence(|sequence| {
        let batch = sequence.issue(now, request)?;
        Ok::<_, IdError>((batch, sequence.is_pacing(now)))
    })
    .inspect_err(|error| {
        if matches!(error, IdError::Drift { .. }) {
            counters::DRIFT_REFUSALS.add(1);
        }
    })?;
    pacing::observe(pacing, batch.last.time_ms, now);
    record(&key, existing, batch.last_id())?;
    drop(key);

    call.replicate_key_value(c"SNOWFLAKE.SETLAST", key_name, batch.last_id() as i64);
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

/// `SNOWFLAKE.LAST key`: the last ID issued for the key, or nil.
pub fn last(call: &Call) -> Result<(), Refusal> {
    let key = call.open_key(call.arg(1), false);
    match snowflake_value(&key)? {
        // SAFETY: the value belongs to the open key.
        Some(value) => call.reply_id(unsafe { value.as_ref().last_id }),
        None => call.reply_null(),
    }
    Ok(())
}

/// `SNOWFLAKE.SETLAST key id`: records `id` as the key's last ID.
///
/// This is the form in which `SNOWFLAKE.NEXT` reaches replicas and the AOF. From a client it
/// only moves a key forward, and only to an ID no further ahead than the drift bound.
pub fn set_last(call: &Call) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let config = state::config();
    let id = call
        .arg_integer(2)
        .ok_or_else(|| Refusal::new("ERR", "the ID must be an integer"))?;
    config.layout.decode(id, config.identity.step)?;
    let id = id as u64;
    refuse_on_replica(call)?;
    let from_client = !call.is_replicated_or_loading();
    let key = call.open_key(key_name, true);
    let existing = snowflake_value(&key)?;
    if from_client {
        // SAFETY: the value belongs to the open key.
        if let Some(current) = existing.map(|value| unsafe { value.as_ref().last_id }) {
            if id <= current {
                return Err(Refusal::new(
                    "ERR",
                    format!("SNOWFLAKE.SETLAST only moves a key forward; it records {current}"),
                ));
            }
        }
    }
    // Replayed from the AOF or the master: raise the floor whatever the clock says, since
    // these IDs exist. From a client: refuse an ID too far ahead.
    if !raise_floor_for(id, from_client) {
        return Err(Refusal::new(
            "DRIFT",
            format!(
                "ID {id} is more than idgen.max-drift-ms ({} ms) ahead of this server's clock",
                config.max_drift_ms
            ),
        ));
    }
    record(&key, existing, id)?;
    drop(key);
    call.replicate_key_value(c"SNOWFLAKE.SETLAST", key_name, id as i64);
    call.reply_simple(c"OK");
    Ok(())
}
