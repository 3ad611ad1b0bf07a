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
