//! What every command that issues or records values checks before it does.

use crate::ffi::call::Request;
use crate::ffi::refusal::Refusal;
use crate::state::peer_identities;
use crate::state::replica_role;
use crate::state::stats;

/// Refuses to issue on a replica: only masters issue, so that a replica promoted later
/// continues from its own offset without having handed anything out.
pub fn refuse_on_replica(call: &impl Request) -> Result<(), Refusal> {
    if replica_role::may_be_replica() && call.is_replica() && !call.is_replicated_or_loading() {
        return Err(Refusal::new(
            "READONLY",
            "this instance is a replica; IDs are issued only by masters",
        ));
    }
    Ok(())
}

/// Refuses to issue while an identity conflict (a shared offset, another step or layout)
/// names this node under the `refuse` policy, or while it still compares identities after a
/// start in a cluster: one load of a flag.
#[inline(always)]
pub fn refuse_on_conflict(call: &impl Request) -> Result<(), Refusal> {
    if peer_identities::issuing_refused() {
        return refuse_for_conflict(call);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn refuse_for_conflict(call: &impl Request) -> Result<(), Refusal> {
    if call.is_replicated_or_loading() {
        return Ok(());
    }
    if peer_identities::comparing() {
        return Err(Refusal::new(
            "TRYAGAIN",
            "idgen started moments ago and is still comparing its identity with the other \
             cluster nodes (at most 5 s); try again",
        ));
    }
    stats::CONFLICT_REFUSALS.add(1);
    Err(Refusal::new("CONFLICT", peer_identities::refusal()))
}
