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

#[cfg(test)]
mod tests {
    use idgen_core::commands::{
        Command, SNOWFLAKE_BOUND, SNOWFLAKE_NEXT, SNOWFLAKE_SETBOUND, SNOWFLAKE_SETLAST,
    };
    use idgen_core::KeyRecord;

    use super::{bound, set_bound};
    use crate::commands::args::fake::{main_thread, run, FakeCall, FakeKeys};
    use crate::commands::snowflake_next;
    use crate::datatype::snowflake_key::SnowflakeKey;

    /// An ID of about now, issued on a scratch key.
    fn recent_id() -> u64 {
        let mut scratch = FakeKeys::new();
        let call = FakeCall::new(&SNOWFLAKE_NEXT, &["sb:scratch"]);
        let reply = run(snowflake_next::next, &call, &mut scratch);
        reply.strip_prefix("int ").unwrap().parse().unwrap()
    }

    fn set(command: &'static Command, args: &[&str]) -> FakeCall {
        FakeCall::new(command, args)
    }

    fn record(keys: &FakeKeys, name: &str) -> Option<KeyRecord> {
        keys.module::<SnowflakeKey>(name).map(|value| value.record)
    }

    #[test]
    fn bound_answers_nil_for_a_missing_key_and_the_bound_once_set() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let read = || FakeCall::new(&SNOWFLAKE_BOUND, &["sb:read"]);
        assert_eq!(run(bound, &read(), &mut keys), "null");
        let id = recent_id();
        let record = KeyRecord {
            bound: id,
            owner: 9,
        };
        keys.set_module("sb:read", SnowflakeKey::from_record(record));
        assert_eq!(run(bound, &read(), &mut keys), format!("int {id}"));
        keys.set_string("sb:text", "1");
        let wrong = FakeCall::new(&SNOWFLAKE_BOUND, &["sb:text"]);
        assert_eq!(
            run(bound, &wrong, &mut keys),
            "error WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }

    /// From a client: a bound with no owner, only forward, within the drift bound; it is
    /// replicated with owner 0.
    #[test]
    fn a_client_moves_a_bound_forward_only_and_without_an_owner() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let id = recent_id();
        let first = set(&SNOWFLAKE_SETBOUND, &["sb:client", &id.to_string()]);
        assert_eq!(run(set_bound, &first, &mut keys), "simple OK");
        assert_eq!(
            first.effected(),
            format!("replicate SNOWFLAKE.SETBOUND sb:client {id} 0")
        );
        assert_eq!(
            record(&keys, "sb:client"),
            Some(KeyRecord {
                bound: id,
                owner: 0
            })
        );
        let unchanged = Some(KeyRecord {
            bound: id,
            owner: 0,
        });
        for (command, name) in [
            (&SNOWFLAKE_SETBOUND, "SNOWFLAKE.SETBOUND"),
            (&SNOWFLAKE_SETLAST, "SNOWFLAKE.SETLAST"),
        ] {
            for back in [id, id - 1] {
                let refused = set(command, &["sb:client", &back.to_string()]);
                assert_eq!(
                    run(set_bound, &refused, &mut keys),
                    format!("error ERR {name} only moves a key's bound forward; it is {id}")
                );
                assert_eq!(refused.effected(), "");
            }
        }
        let with_owner = set(
            &SNOWFLAKE_SETBOUND,
            &["sb:client", &(id + 5).to_string(), "77"],
        );
        assert_eq!(
            run(set_bound, &with_owner, &mut keys),
            "error ERR the owner is written by replication and the AOF only; a client sets a \
             bound with no owner: SNOWFLAKE.SETBOUND key bound"
        );
        let far = id + (60_000 << 22);
        let too_far = set(&SNOWFLAKE_SETBOUND, &["sb:client", &far.to_string()]);
        let reply = run(set_bound, &too_far, &mut keys);
        assert!(
            reply.starts_with(&format!("error DRIFT bound {far} is ")),
            "{reply}"
        );
        assert!(reply.contains("the key was not changed"), "{reply}");
        assert_eq!(record(&keys, "sb:client"), unchanged);
        let forward = set(&SNOWFLAKE_SETLAST, &["sb:client", &(id + 1).to_string()]);
        assert_eq!(run(set_bound, &forward, &mut keys), "simple OK");
        assert_eq!(record(&keys, "sb:client").unwrap().bound, id + 1);
    }

    #[test]
    fn bad_bounds_and_argument_counts_are_refused() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        keys.set_string("sb:text", "1");
        let id = recent_id().to_string();
        for (args, refusal) in [
            (
                &["sb:bad", "x"][..],
                "error ERR the bound must be an integer (an ID)",
            ),
            (
                &["sb:bad", "-3"],
                "error ERR not an ID of this layout: -3 is not positive",
            ),
            (
                &["sb:bad", "1", "2", "3"],
                "error ERR wrong number of arguments for SNOWFLAKE.SETBOUND: key bound [owner]",
            ),
            (
                &["sb:text", &id],
                "error WRONGTYPE Operation against a key holding the wrong kind of value",
            ),
        ] {
            assert_eq!(
                run(set_bound, &set(&SNOWFLAKE_SETBOUND, args), &mut keys),
                refusal
            );
        }
        assert!(record(&keys, "sb:bad").is_none());
        assert_eq!(keys.string("sb:text").as_deref(), Some("1"));
    }

    /// From the master or the AOF: the owner is recorded, and a bound may go back (it
    /// replays what the master wrote, whatever this clock says).
    #[test]
    fn a_replicated_bound_keeps_its_owner_and_may_go_back() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        let id = recent_id();
        let replayed = set(&SNOWFLAKE_SETBOUND, &["sb:replayed", &id.to_string(), "77"]);
        assert_eq!(
            run(set_bound, &replayed.replicated(), &mut keys),
            "simple OK"
        );
        assert_eq!(
            record(&keys, "sb:replayed"),
            Some(KeyRecord {
                bound: id,
                owner: 77
            })
        );
        let back = set(
            &SNOWFLAKE_SETBOUND,
            &["sb:replayed", &(id - 9).to_string(), "78"],
        );
        let back = back.replicated();
        assert_eq!(run(set_bound, &back, &mut keys), "simple OK");
        assert_eq!(
            back.effected(),
            format!("replicate SNOWFLAKE.SETBOUND sb:replayed {} 78", id - 9)
        );
        assert_eq!(
            record(&keys, "sb:replayed"),
            Some(KeyRecord {
                bound: id - 9,
                owner: 78
            })
        );
        let on_replica = set(&SNOWFLAKE_SETBOUND, &["sb:replica", &id.to_string()]).on_replica();
        assert_eq!(
            run(set_bound, &on_replica, &mut keys),
            "error READONLY this instance is a replica; IDs are issued only by masters"
        );
        assert!(record(&keys, "sb:replica").is_none());
    }
}
