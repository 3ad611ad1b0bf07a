//! What every command that issues or records values checks before it does.

use crate::ffi::call::Call;
use crate::ffi::refusal::Refusal;
use crate::state::replica_role;

/// Refuses to issue on a replica: only masters issue, so that a replica promoted later
/// continues from its own offset without having handed anything out.
pub fn refuse_on_replica(call: &Call) -> Result<(), Refusal> {
    if replica_role::may_be_replica() && call.is_replica() && !call.is_replicated_or_loading() {
        return Err(Refusal::new(
            "READONLY",
            "this instance is a replica; IDs are issued only by masters",
        ));
    }
    Ok(())
}
