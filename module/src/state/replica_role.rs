//! Whether this instance may be a replica, followed through the role-change events, so that
//! a command on a master need not ask Redis for its context flags (a tenth of a segment
//! call; docs/performance.md) only to learn it may issue.
//!
//! Set at load from the context flags (a server started with `replicaof` is a replica by
//! then) and at every role change. It only decides whether the flags are asked: a command
//! on an instance that may be a replica asks them and refuses exactly as before. Redis
//! itself refuses write commands on read-only replicas before the module sees them.

use std::sync::atomic::{AtomicBool, Ordering};

static MAY_BE_REPLICA: AtomicBool = AtomicBool::new(true);

/// Records the instance's role (at load, and at each role-change event).
pub fn set_replica(replica: bool) {
    MAY_BE_REPLICA.store(replica, Ordering::Relaxed);
}

/// False only while the instance is known to be a master.
pub fn may_be_replica() -> bool {
    MAY_BE_REPLICA.load(Ordering::Relaxed)
}
