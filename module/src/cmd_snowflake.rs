//! `SNOWFLAKE.NEXT`, `SNOWFLAKE.BOUND` and `SNOWFLAKE.SETBOUND` (and `SNOWFLAKE.SETLAST`, its
//! old name, kept so that AOF files written by earlier versions still load).

use std::cell::Cell;

use idgen_core::{Clocks, IdError, KeyRecord, KeyState};
use redis_module::raw;

use crate::args::{id_format, parse_options, COUNT, FORMAT, SHARD};
use crate::call::Call;
use crate::key::{Keyspace, Read, Write};
use crate::refusal::Refusal;
use crate::snowflake_type::SnowflakeKey;
use crate::{clock, counters, pacing, role, state};

/// Refuses to issue on a replica: only masters issue, so that a replica promoted later
/// continues from its own offset without having handed anything out.
pub fn refuse_on_replica(call: &Call) -> Result<(), Refusal> {
    if role::may_be_replica() && call.is_replica() && !call.is_replicated_or_loading() {
        return Err(Refusal::new(
            "READONLY",
            "this instance is a replica; IDs are issued only by masters",
        ));
    }
    Ok(())
}

/// `SNOWFLAKE.NEXT key [COUNT n] [SHARD s] [FORMAT decimal|base32|base62]`
pub fn next(call: &Call, keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let [count, shard, format] =
        parse_options(call, "SNOWFLAKE.NEXT", 2, [&COUNT, &SHARD, &FORMAT])?;
    let format = format.map(id_format);
    refuse_on_replica(call)?;
    let config = state::config();
    // Opened for reading: most calls issue within the key's bound as its owner and change
    // only the in-memory last ID, which is not data (not saved, replicated or digested), so
    // Redis need not learn of a change. A call that extends the bound reopens it to write.
    let key = keys.open::<Read>(key_name);
    let value = key.value::<SnowflakeKey>()?;
    let state = value.map_or(KeyState::default(), SnowflakeKey::state);
    let shard = shard.unwrap_or(config.default_shard);
    let reply = |id: u64| call.reply_id_in(id, format);
    // Almost every call: one ID for a key this instance owns, under its bound, in the same
    // millisecond as the call before. The general rule below gives the same answer for it
    // (idgen-core property-tests that); this path skips its bookkeeping.
    //
    // It takes the server's time for the command without asking whether the call is in a
    // transaction or script, where that time stands still: the path issues only in the wall
    // millisecond the previous call saw, never borrowing ahead, so a time standing still
    // makes it answer `None` once that millisecond's sequence is used up, and the general
    // rule then asks and reads the clock itself.
    if let (None, Some(value)) = (count, value) {
        let me = state::incarnation();
        let wall_unix_ms = clock::command_wall_unix_ms();
        let fast = state::with_sequence(|sequence| {
            sequence.issue_one_owned(wall_unix_ms, shard, state, me)
        });
        if let Some(id) = fast {
            value.last_issued.set(Some(id));
            // Within the drift bound: the clock is not running ahead.
            pacing::observe(None);
            counters::SNOWFLAKE_CALLS.add(1);
            counters::SNOWFLAKE_IDS.add(1);
            reply(id);
            return Ok(());
        }
    }
    let clocks = clock::CallClocks::read(call.is_in_transaction_or_script());
    let wall_unix_ms = clocks.wall_unix_ms();
    let (issue, pacing) = state::with_sequence(|sequence| {
        let issue = sequence.issue_for_key(
            &clocks,
            count.unwrap_or(1),
            shard,
            state,
            state::incarnation(),
            config.snowflake_lease_ms(),
        )?;
        let pacing = sequence
            .is_pacing(wall_unix_ms)
            .then(|| sequence.ahead_of_wall_ms(wall_unix_ms));
        Ok::<_, IdError>((issue, pacing))
    })
    .inspect_err(|error| {
        if matches!(error, IdError::Drift { .. }) {
            counters::DRIFT_REFUSALS.add(1);
        }
    })?;
    let batch = issue.batch;
    pacing::observe(pacing);
    let last_issued = Some(batch.last_id());
    match issue.extend {
        // Within the key's bound, as its owner: only the in-memory last ID changes. Nothing
        // is written to the dataset, replicas or the AOF.
        None => {
            if let Some(value) = value {
                value.last_issued.set(last_issued);
            }
        }
        Some(extended) => {
            drop(key);
            let mut key = keys.open::<Write>(key_name);
            key.store(SnowflakeKey {
                record: extended,
                last_issued: Cell::new(last_issued),
            })?;
            drop(key);
            // The bound reaches replicas and the AOF before any ID under it is answered.
            call.replicate_key_values(
                c"SNOWFLAKE.SETBOUND",
                key_name,
                extended.bound as i64,
                extended.owner as i64,
            );
            counters::SNOWFLAKE_BOUND_WRITES.add(1);
            // Like WATCH, a keyspace notification marks a change to the key's data: the
            // bound, not the in-memory last ID (docs/commands.md).
            call.notify(raw::NotifyEvent::MODULE, c"snowflake.next", key_name);
        }
    }

    counters::SNOWFLAKE_CALLS.add(1);
    counters::SNOWFLAKE_IDS.add(batch.count);
    if batch.borrowed_ms != 0 {
        counters::BORROWED_MS.add(batch.borrowed_ms);
    }
    if batch.clock_stepped_back {
        counters::CLOCK_STEP_BACKS.add(1);
    }
    if count.is_none() {
        reply(batch.first_id());
    } else {
        call.reply_array(batch.count as usize);
        batch.ids().for_each(reply);
    }
    Ok(())
}

/// `SNOWFLAKE.BOUND key`: the key's bound (every ID issued for it is at most this), or nil.
pub fn bound(call: &Call, keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
    let key = keys.open::<Read>(call.arg(1));
    match key.value::<SnowflakeKey>()? {
        Some(value) => call.reply_id(value.record.bound),
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
pub fn set_bound(call: &Call, keys: &mut Keyspace<'_>) -> Result<(), Refusal> {
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
    let mut key = keys.open::<Write>(key_name);
    let current = key.value::<SnowflakeKey>()?.map(|value| value.record.bound);
    if let Some(current) = current.filter(|&current| from_client && bound <= current) {
        return Err(Refusal::new(
            "ERR",
            format!("SNOWFLAKE.SETBOUND only moves a key's bound forward; it is {current}"),
        ));
    }
    // Replayed from the AOF or the master: raise the floor whatever the clock says, since
    // IDs up to the bound may exist. From a client: refuse a bound too far ahead.
    state::with_sequence(|sequence| sequence.accept_bound(bound, clock::now(), from_client))?;
    key.store(SnowflakeKey::from_record(KeyRecord { bound, owner }))?;
    drop(key);
    call.replicate_key_values(c"SNOWFLAKE.SETBOUND", key_name, bound as i64, owner as i64);
    call.reply_simple(c"OK");
    Ok(())
}
