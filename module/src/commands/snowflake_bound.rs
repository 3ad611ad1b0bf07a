//! `SNOWFLAKE.BOUND key` and `SNOWFLAKE.SETBOUND key bound [owner]` (and
//! `SNOWFLAKE.SETLAST key id`, its old name, kept so that AOF files written by earlier
//! versions still load): a snowflake key's bound, read and recorded.

use idgen_core::commands::SNOWFLAKE_SETBOUND;
use idgen_core::KeyRecord;

use crate::commands::issuing::refuse_on_replica;
use crate::datatype::snowflake_key::SnowflakeKey;
use crate::ffi::call::Request;
use crate::ffi::keyspace::{KeyRead, KeyWrite, Keys};
use crate::ffi::refusal::Refusal;
use crate::state::clock;
use crate::state::instance;

/// `SNOWFLAKE.BOUND key`: the key's bound (every ID issued for it is at most this), or nil.
pub fn bound<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let key = keys.open_read(call.arg(1));
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
pub fn set_bound<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let key_name = call.arg(1);
    let config = instance::config();
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
                format!(
                    "wrong number of arguments for {}: key bound [owner]",
                    call.command().name()
                ),
            ))
        }
    };
    refuse_on_replica(call)?;
    let mut key = keys.open_write(key_name);
    let current = key.value::<SnowflakeKey>()?.map(|value| value.record.bound);
    if let Some(current) = current.filter(|&current| from_client && bound <= current) {
        return Err(Refusal::new(
            "ERR",
            format!(
                "{} only moves a key's bound forward; it is {current}",
                call.command().name()
            ),
        ));
    }
    // Replayed from the AOF or the master: raise the floor whatever the clock says, since
    // IDs up to the bound may exist. From a client: refuse a bound too far ahead.
    instance::with_sequence(|sequence| sequence.accept_bound(bound, clock::now(), from_client))?;
    key.store(SnowflakeKey::from_record(KeyRecord { bound, owner }))?;
    drop(key);
    call.replicate_key_values(
        SNOWFLAKE_SETBOUND.name,
        key_name,
        bound as i64,
        owner as i64,
    );
    call.reply_simple(c"OK");
    Ok(())
}
