//! `LEASE.ACQUIRE`, `LEASE.RENEW`, `LEASE.RELEASE`, `LEASE.LIST` and `LEASE.SETWORKER`:
//! worker ids leased from a pool as time windows (docs/leases.md; the rules are
//! `idgen_core::LeasePool`'s).

use idgen_core::commands::{
    OptionValue, LEASE_ACQUIRE, LEASE_RELEASE, LEASE_RENEW, LEASE_SETWORKER,
};
use idgen_core::{Grant, LeaseError, LeasePool, WorkerLease};

use crate::commands::args::parse_options;
use crate::commands::issuing::{refuse_on_conflict, refuse_on_replica};
use crate::datatype::lease_pool::{set_worker_args, worker_from_fields, LeasePoolKey};
use crate::ffi::call::Request;
use crate::ffi::keyspace::{KeyRead, KeyWrite, Keys};
use crate::ffi::refusal::Refusal;
use crate::state::clock;
use crate::state::instance;
use crate::state::leases;
use crate::state::stats;

/// The longest holder name accepted.
const MAX_HOLDER_LEN: usize = 256;

/// `LEASE.ACQUIRE pool holder [DURATION ms]`: a free worker id and its window.
pub fn acquire<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let pool_name = call.arg(1);
    let holder = holder(call, 2)?;
    let duration = duration_units(call, 3)?;
    refuse_on_replica(call)?;
    refuse_on_conflict(call)?;
    let setup = leases::setup();
    if setup.band.count == 0 {
        return Err(Refusal::new(
            "LEASESOFF",
            "leases are off on this deployment: load the module with `lease-workers N` on \
             every node to reserve the top N shard values as leased worker ids (SNOWFLAKE.NEXT \
             then refuses those SHARD values; see docs/leases.md)",
        ));
    }
    let identity = instance::config().identity;
    let now = leases::now_units();
    let mut key = keys.open_write(pool_name);
    let granted = match key.value_mut::<LeasePoolKey>()? {
        Some(existing) => grant(&mut existing.pool, holder, now, duration, identity)?,
        None => {
            let mut pool = LeasePool::new();
            let granted = grant(&mut pool, holder, now, duration, identity)?;
            key.store(LeasePoolKey { pool })?;
            granted
        }
    };
    stats::LEASE_GRANTS.add(1);
    leases::note_pool_use(call.selected_db(), call.arg_bytes(1), now);
    if granted.0.took_expired {
        stats::LEASE_EXPIRIES.add(1);
    }
    drop(key);
    replicate_worker(call, pool_name, &granted.1);
    reply_grant(call, &granted.0, holder);
    Ok(())
}

fn grant(
    pool: &mut LeasePool,
    holder: &[u8],
    now: u64,
    duration: u64,
    identity: idgen_core::Identity,
) -> Result<(Grant, WorkerLease), Refusal> {
    let rules = leases::setup().rules;
    let grant = leases::with_fences(|fences| {
        pool.acquire(
            fences,
            rules,
            holder,
            now,
            duration,
            leases::workers_of(identity),
        )
    })
    .map_err(refused)?;
    let lease = pool.lease(grant.worker).expect("just granted").clone();
    Ok((grant, lease))
}

/// `LEASE.RENEW pool worker holder [DURATION ms]`: extends the holder's window.
pub fn renew<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let pool_name = call.arg(1);
    let worker = worker(call, 2)?;
    let holder = holder(call, 3)?;
    let duration = duration_units(call, 4)?;
    refuse_on_replica(call)?;
    refuse_on_conflict(call)?;
    let rules = leases::setup().rules;
    let now = leases::now_units();
    let mut key = keys.open_write(pool_name);
    let Some(existing) = key.value_mut::<LeasePoolKey>()? else {
        return Err(refused(LeaseError::NotHeld { worker }));
    };
    let grant = leases::with_fences(|fences| {
        existing
            .pool
            .renew(fences, rules, worker, holder, now, duration)
    })
    .map_err(refused)?;
    let lease = existing.pool.lease(worker).expect("just renewed").clone();
    stats::LEASE_RENEWALS.add(1);
    leases::note_pool_use(call.selected_db(), call.arg_bytes(1), now);
    drop(key);
    replicate_worker(call, pool_name, &lease);
    reply_grant(call, &grant, holder);
    Ok(())
}

/// `LEASE.RELEASE pool worker holder`: frees the worker id (its next holder still starts
/// after the window's end).
pub fn release<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    if call.argc() != 4 {
        return Err(Refusal::new(
            "ERR",
            "wrong number of arguments for LEASE.RELEASE: pool worker-id holder",
        ));
    }
    let pool_name = call.arg(1);
    let worker = worker(call, 2)?;
    let holder = holder(call, 3)?;
    refuse_on_replica(call)?;
    let mut key = keys.open_write(pool_name);
    let Some(existing) = key.value_mut::<LeasePoolKey>()? else {
        return Err(refused(LeaseError::NotHeld { worker }));
    };
    let lease = existing.pool.release(worker, holder).map_err(refused)?;
    stats::LEASE_RELEASES.add(1);
    drop(key);
    replicate_worker(call, pool_name, &lease);
    call.reply_simple(c"OK");
    Ok(())
}

/// `LEASE.LIST pool`: every worker id the pool granted, with holder, state and window.
pub fn list<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    let key = keys.open_read(call.arg(1));
    let Some(existing) = key.value::<LeasePoolKey>()? else {
        call.reply_array(0);
        return Ok(());
    };
    let now = leases::now_units();
    let fenced_until = leases::with_fences(|fences| fences.fenced_until());
    let leases: Vec<&WorkerLease> = existing.pool.leases().collect();
    call.reply_array(leases.len());
    for lease in leases {
        let state = match (&lease.holder, lease.window.end >= now) {
            (Some(_), true) => "held",
            (Some(_), false) => "ended",
            (None, _) => "released",
        };
        call.reply_map(8);
        call.reply_bulk("worker");
        call.reply_integer(lease.worker as i64);
        call.reply_bulk("holder");
        match &lease.holder {
            Some(holder) => call.reply_bulk(&String::from_utf8_lossy(holder)),
            None => call.reply_null(),
        }
        call.reply_bulk("state");
        call.reply_bulk(state);
        call.reply_bulk("start_unix_ms");
        call.reply_integer(unit_start_ms(lease.window.start) as i64);
        call.reply_bulk("end_unix_ms");
        call.reply_integer(unit_last_ms(lease.window.end) as i64);
        call.reply_bulk("fence_unix_ms");
        call.reply_integer(unit_last_ms(lease.fence.max(fenced_until)) as i64);
        call.reply_bulk("renewed_unix_ms");
        call.reply_integer(unit_start_ms(lease.renewed_at) as i64);
        call.reply_bulk("renewable");
        call.reply_integer(i64::from(
            state == "held" && lease.fence.max(fenced_until) <= lease.window.end,
        ));
    }
    Ok(())
}

/// `LEASE.SETWORKER pool worker start end fence renewed holder`: how the other commands
/// reach replicas and the AOF (an empty holder is a released worker id). Refused from
/// clients: a window or fence set back by hand could overlap one already granted.
pub fn set_worker<R: Request, K: Keys<R>>(call: &R, keys: &mut K) -> Result<(), Refusal> {
    if !call.is_replicated_or_loading() {
        return Err(Refusal::new(
            "ERR",
            format!(
                "{} is written by replication and the AOF only; clients use {}, {} and {}",
                call.command().name(),
                LEASE_ACQUIRE.name(),
                LEASE_RENEW.name(),
                LEASE_RELEASE.name()
            ),
        ));
    }
    let mut fields = [0u64; 5];
    for (index, field) in fields.iter_mut().enumerate() {
        *field = call
            .arg_integer(index + 2)
            .and_then(|value| u64::try_from(value).ok())
            .ok_or_else(|| {
                let name = call.command().name();
                Refusal::new("ERR", format!("{name} takes non-negative integers"))
            })?;
    }
    let lease = worker_from_fields(fields, call.arg_bytes(7));
    let pool_name = call.arg(1);
    let mut key = keys.open_write(pool_name);
    leases::with_fences(|fences| -> Result<(), Refusal> {
        match key.value_mut::<LeasePoolKey>()? {
            Some(existing) => existing.pool.put(lease.clone(), fences),
            None => {
                let mut pool = LeasePool::new();
                pool.put(lease.clone(), fences);
                key.store(LeasePoolKey { pool })?;
            }
        }
        Ok(())
    })?;
    drop(key);
    replicate_worker(call, pool_name, &lease);
    call.reply_simple(c"OK");
    Ok(())
}

/// Tells replicas and the AOF the worker id's new state.
fn replicate_worker<R: Request>(call: &R, pool_name: R::Arg<'_>, lease: &WorkerLease) {
    let (fields, holder) = set_worker_args(lease);
    call.replicate_key_five_and_bytes(LEASE_SETWORKER.name, pool_name, fields, &holder);
}

/// A lease error as the reply, counted.
fn refused(error: LeaseError) -> Refusal {
    stats::LEASE_REFUSALS.add(1);
    let layout = instance::config().layout;
    let code = error.code();
    let text = match error {
        LeaseError::Exhausted {
            held,
            workers,
            retry_at,
        } => format!(
            "no worker id free: {held} of this instance's {workers} worker ids are held and \
             the others are fenced (for max-drift-ms + lease-max-ms after a start or a \
             promotion, or by windows granted before); one can be granted in {} ms; release \
             unused leases, or raise idgen.lease-workers (docs/leases.md)",
            unit_start_ms(retry_at).saturating_sub(clock::wall_unix_ms())
        ),
        LeaseError::Duration { max_units, .. } => format!(
            "DURATION is above idgen.lease-max-ms ({} ms)",
            layout.ms_of_units(max_units)
        ),
        other => other.to_string(),
    };
    Refusal::new(code, text)
}

/// The holder argument: 1 to 256 bytes.
fn holder(call: &impl Request, index: usize) -> Result<&[u8], Refusal> {
    if index >= call.argc() {
        return Err(Refusal::new("ERR", "a holder name is needed"));
    }
    let holder = call.arg_bytes(index);
    if holder.is_empty() || holder.len() > MAX_HOLDER_LEN {
        return Err(Refusal::new(
            "ERR",
            format!(
                "the holder must be 1 to {MAX_HOLDER_LEN} bytes, unique per process (such as \
                 host:pid:random); got {} bytes",
                holder.len()
            ),
        ));
    }
    Ok(holder)
}

/// The worker id argument: an integer of 0 or more.
fn worker(call: &impl Request, index: usize) -> Result<u64, Refusal> {
    if index >= call.argc() {
        return Err(Refusal::new("ERR", "a worker id is needed"));
    }
    call.arg_integer(index)
        .and_then(|value| u64::try_from(value).ok())
        .ok_or_else(|| {
            Refusal::new(
                "ERR",
                format!(
                    "the worker id must be an integer of 0 or more, got '{}'",
                    String::from_utf8_lossy(call.arg_bytes(index))
                ),
            )
        })
}

/// `DURATION ms` (the longest lease when absent), in time units (at least one).
fn duration_units(call: &impl Request, first: usize) -> Result<u64, Refusal> {
    let [duration] = parse_options(call, first)?;
    let setup = leases::setup();
    let ms = duration
        .and_then(OptionValue::integer)
        .unwrap_or(setup.max_ms);
    if ms > setup.max_ms {
        return Err(Refusal::new(
            "ERR",
            format!(
                "DURATION {ms} ms is above idgen.lease-max-ms ({} ms)",
                setup.max_ms
            ),
        ));
    }
    let layout = instance::config().layout;
    Ok(layout.units_of_ms(ms).clamp(1, setup.rules.max_units))
}

/// The unix ms at which time unit `unit` starts.
fn unit_start_ms(unit: u64) -> u64 {
    let layout = instance::config().layout;
    layout
        .epoch_unix_ms
        .saturating_add(layout.ms_of_units(unit))
}

/// The last unix ms of time unit `unit`.
fn unit_last_ms(unit: u64) -> u64 {
    unit_start_ms(unit.saturating_add(1)).saturating_sub(1)
}

/// The reply to a grant or renewal: the worker id, the window, and what a client needs to
/// build IDs in it.
fn reply_grant(call: &impl Request, grant: &Grant, holder: &[u8]) {
    let config = instance::config();
    let layout = config.layout;
    call.reply_map(13);
    call.reply_bulk("worker");
    call.reply_integer(grant.worker as i64);
    call.reply_bulk("holder");
    call.reply_bulk(&String::from_utf8_lossy(holder));
    call.reply_bulk("start_unit");
    call.reply_integer(grant.window.start as i64);
    call.reply_bulk("end_unit");
    call.reply_integer(grant.window.end as i64);
    call.reply_bulk("start_unix_ms");
    call.reply_integer(unit_start_ms(grant.window.start) as i64);
    call.reply_bulk("end_unix_ms");
    call.reply_integer(unit_last_ms(grant.window.end) as i64);
    call.reply_bulk("now_unix_ms");
    call.reply_integer(clock::wall_unix_ms() as i64);
    call.reply_bulk("epoch_ms");
    call.reply_integer(layout.epoch_unix_ms as i64);
    call.reply_bulk("time_unit_ms");
    call.reply_integer(layout.time_unit_ms as i64);
    call.reply_bulk("time_bits");
    call.reply_integer(i64::from(layout.time_bits));
    call.reply_bulk("shard_bits");
    call.reply_integer(i64::from(layout.shard_bits));
    call.reply_bulk("sequence_bits");
    call.reply_integer(i64::from(layout.sequence_bits));
    call.reply_bulk("max_lease_ms");
    call.reply_integer(leases::setup().max_ms as i64);
}

#[cfg(test)]
mod tests {
    use idgen_core::commands::{
        Command, LEASE_ACQUIRE, LEASE_LIST, LEASE_RELEASE, LEASE_RENEW, LEASE_SETWORKER,
    };
    use idgen_core::LeaseFences;

    use super::{acquire, list, release, renew, set_worker};
    use crate::commands::args::fake::{main_thread, run, FakeCall, FakeKeys, LEASE_WORKERS};
    use crate::datatype::lease_pool::LeasePoolKey;
    use crate::state::leases;

    // The test instance leases shard values 1020 to 1023. Its fences are shared: each test
    // clears them (as if the instance had run longer than max-drift-ms + lease-max-ms).

    fn call(command: &'static Command, args: &[&str]) -> FakeCall {
        FakeCall::new(command, args)
    }

    fn clear_fences() {
        leases::with_fences(|fences| *fences = LeaseFences::new());
    }

    /// The start of a grant's reply, up to its window.
    fn granted(worker: u64, holder: &str) -> String {
        format!(
            "map 13, bulk worker, int {worker}, bulk holder, bulk {holder}, bulk start_unit, int "
        )
    }

    #[test]
    fn a_lease_is_fenced_after_a_start_then_granted_renewed_listed_and_released() {
        let _main = main_thread();
        let mut keys = FakeKeys::new();
        leases::fence_all();
        let fenced = call(&LEASE_ACQUIRE, &["lp:flow", "h1"]);
        let reply = run(acquire, &fenced, &mut keys);
        assert!(
            reply.starts_with(
                "error EXHAUSTED no worker id free: 0 of this instance's 4 worker ids are held \
                 and the others are fenced"
            ),
            "{reply}"
        );
        assert!(keys.keys.is_empty(), "a refused grant created the pool");
        clear_fences();
        let first = call(&LEASE_ACQUIRE, &["lp:flow", "h1"]);
        let reply = run(acquire, &first, &mut keys);
        assert!(reply.starts_with(&granted(1020, "h1")), "{reply}");
        assert!(reply.ends_with("bulk max_lease_ms, int 10000"), "{reply}");
        let effects = first.effected();
        assert!(
            effects.starts_with("replicate LEASE.SETWORKER lp:flow 1020 "),
            "{effects}"
        );
        assert!(effects.ends_with(" h1"), "{effects}");
        let second = call(&LEASE_ACQUIRE, &["lp:flow", "h2", "DURATION", "500"]);
        assert!(run(acquire, &second, &mut keys).starts_with(&granted(1021, "h2")));
        let renewed = call(&LEASE_RENEW, &["lp:flow", "1020", "h1"]);
        assert!(run(renew, &renewed, &mut keys).starts_with(&granted(1020, "h1")));
        assert!(renewed
            .effected()
            .starts_with("replicate LEASE.SETWORKER lp:flow 1020 "));
        let listed = run(list, &call(&LEASE_LIST, &["lp:flow"]), &mut keys);
        assert!(
            listed.starts_with(
                "array 2, map 8, bulk worker, int 1020, bulk holder, bulk h1, bulk state, bulk \
                 held, bulk start_unix_ms, int "
            ),
            "{listed}"
        );
        assert!(
            listed.contains("map 8, bulk worker, int 1021, bulk holder, bulk h2"),
            "{listed}"
        );
        let released = call(&LEASE_RELEASE, &["lp:flow", "1020", "h1"]);
        assert_eq!(run(release, &released, &mut keys), "simple OK");
        // Replicated with an empty holder: a released worker id.
        let effects = released.effected();
        assert!(
            effects.starts_with("replicate LEASE.SETWORKER lp:flow 1020 "),
            "{effects}"
        );
        assert!(effects.ends_with(' '), "{effects}");
        let listed = run(list, &call(&LEASE_LIST, &["lp:flow"]), &mut keys);
        assert!(
            listed.contains("bulk holder, null, bulk state, bulk released"),
            "{listed}"
        );
        let not_held = "error NOTHELD worker id 1020 is not held by this holder in this pool; \
                        acquire a lease";
        assert_eq!(
            run(
                release,
                &call(&LEASE_RELEASE, &["lp:flow", "1020", "h1"]),
                &mut keys
            ),
            not_held
        );
        assert_eq!(
            run(
                renew,
                &call(&LEASE_RENEW, &["lp:flow", "1020", "h1"]),
                &mut keys
            ),
            not_held
        );
        assert_eq!(
            run(list, &call(&LEASE_LIST, &["lp:none"]), &mut keys),
            "array 0"
        );
    }

    #[test]
    fn each_worker_id_is_granted_once_then_the_pool_is_exhausted() {
        let _main = main_thread();
        clear_fences();
        let mut keys = FakeKeys::new();
        for worker in 0..LEASE_WORKERS {
            let holder = format!("holder{worker}");
            let reply = run(
                acquire,
                &call(&LEASE_ACQUIRE, &["lp:full", &holder]),
                &mut keys,
            );
            assert!(
                reply.starts_with(&granted(1020 + worker, &holder)),
                "{reply}"
            );
        }
        let refused = call(&LEASE_ACQUIRE, &["lp:full", "late"]);
        let reply = run(acquire, &refused, &mut keys);
        assert!(
            reply.starts_with("error EXHAUSTED no worker id free: 4 of this instance's 4"),
            "{reply}"
        );
        assert_eq!(refused.effected(), "");
        let pool = &keys.module::<LeasePoolKey>("lp:full").unwrap().pool;
        assert_eq!(pool.leases().count(), 4);
    }

    #[test]
    fn bad_arguments_wrong_types_and_replicas_are_refused() {
        let _main = main_thread();
        clear_fences();
        let mut keys = FakeKeys::new();
        keys.set_string("lp:text", "1");
        let long = "h".repeat(257);
        let wrong_type = "error WRONGTYPE Operation against a key holding the wrong kind of value";
        for (handler, command, args, refusal) in [
            (
                acquire as fn(&FakeCall, &mut FakeKeys) -> _,
                &LEASE_ACQUIRE,
                &["lp:bad", "h", "DURATION", "50000"][..],
                "error ERR DURATION 50000 ms is above idgen.lease-max-ms (10000 ms)",
            ),
            (
                acquire,
                &LEASE_ACQUIRE,
                &["lp:bad", ""],
                "error ERR the holder must be 1 to 256 bytes, unique per process (such as \
                 host:pid:random); got 0 bytes",
            ),
            (
                acquire,
                &LEASE_ACQUIRE,
                &["lp:bad", &long],
                "error ERR the holder must be 1 to 256 bytes, unique per process (such as \
                 host:pid:random); got 257 bytes",
            ),
            (
                renew,
                &LEASE_RENEW,
                &["lp:bad", "x", "h"],
                "error ERR the worker id must be an integer of 0 or more, got 'x'",
            ),
            (
                release,
                &LEASE_RELEASE,
                &["lp:bad", "-1", "h"],
                "error ERR the worker id must be an integer of 0 or more, got '-1'",
            ),
            (acquire, &LEASE_ACQUIRE, &["lp:text", "h"], wrong_type),
            (list, &LEASE_LIST, &["lp:text"], wrong_type),
        ] {
            let refused = call(command, args);
            assert_eq!(run(handler, &refused, &mut keys), refusal);
            assert_eq!(refused.effected(), "");
        }
        let on_replica = call(&LEASE_ACQUIRE, &["lp:bad", "h"]).on_replica();
        assert_eq!(
            run(acquire, &on_replica, &mut keys),
            "error READONLY this instance is a replica; IDs are issued only by masters"
        );
        assert!(keys.module::<LeasePoolKey>("lp:bad").is_none());
        assert_eq!(keys.string("lp:text").as_deref(), Some("1"));
    }

    /// `LEASE.SETWORKER` is how grants reach replicas and the AOF: refused from clients,
    /// applied (and passed on) from replication.
    #[test]
    fn set_worker_is_refused_from_clients_and_applied_from_replication() {
        let _main = main_thread();
        clear_fences();
        let mut keys = FakeKeys::new();
        let args = ["lp:replicated", "1022", "100", "200", "200", "100", "h9"];
        let from_client = call(&LEASE_SETWORKER, &args);
        assert_eq!(
            run(set_worker, &from_client, &mut keys),
            "error ERR LEASE.SETWORKER is written by replication and the AOF only; clients use \
             LEASE.ACQUIRE, LEASE.RENEW and LEASE.RELEASE"
        );
        assert!(keys.keys.is_empty());
        let replicated = call(&LEASE_SETWORKER, &args).replicated();
        assert_eq!(run(set_worker, &replicated, &mut keys), "simple OK");
        assert_eq!(
            replicated.effected(),
            "replicate LEASE.SETWORKER lp:replicated 1022 100 200 200 100 h9"
        );
        let listed = run(list, &call(&LEASE_LIST, &["lp:replicated"]), &mut keys);
        assert!(
            listed.starts_with("array 1, map 8, bulk worker, int 1022, bulk holder, bulk h9"),
            "{listed}"
        );
        let bad = ["lp:replicated", "1022", "x", "200", "200", "100", "h9"];
        assert_eq!(
            run(
                set_worker,
                &call(&LEASE_SETWORKER, &bad).replicated(),
                &mut keys
            ),
            "error ERR LEASE.SETWORKER takes non-negative integers"
        );
    }
}
