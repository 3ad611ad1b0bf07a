//! The identity check after connect. Every new pooled connection asks its node for its
//! identity again: a node the client reconnects to (after a restart, a host replaced, a
//! network cut) must still have the step, offset and layout it had at connect, and a node
//! that could not be reached at connect must fit the deployment and not share an offset.
//! A node that fails the check is not used: a restart with a wrong offset would otherwise
//! issue IDs in another node's residue class, and the two would collide.
//!
//! Only what makes IDs unique is compared. The module's version is not: a rolling upgrade
//! restarts nodes one by one onto another release (or back onto the previous one), and a
//! node that comes back so is used again at once; the change is logged.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::identity::deployment::{fits, Deployment, NodeIdentity};
use crate::lock::lock;

/// The identities the client trusts, by address, shared by the pools of every node.
#[derive(Debug, Default)]
pub(crate) struct IdentityGuard {
    /// Empty until the deployment passed its check at connect.
    known: Mutex<HashMap<String, NodeIdentity>>,
}

impl IdentityGuard {
    /// Trusts the nodes checked at connect.
    pub(crate) fn set(&self, deployment: &Deployment) {
        let mut known = lock(&self.known);
        for node in &deployment.nodes {
            known.insert(node.address.clone(), node.clone());
        }
    }

    /// Whether a node that reports `identity` may be used; the error says why not.
    pub(crate) fn admit(&self, identity: NodeIdentity) -> Result<(), String> {
        let mut known = lock(&self.known);
        if known.is_empty() {
            return Ok(()); // still connecting: the check at connect decides
        }
        if let Some(recorded) = known.get_mut(&identity.address) {
            let changes = identity_changes(recorded, &identity);
            if !changes.is_empty() {
                return Err(format!(
                    "{} changed its identity since the client connected ({}); it is not used \
                     until it runs with its old configuration again",
                    identity.address,
                    changes.join(", ")
                ));
            }
            if recorded.module_version != identity.module_version {
                tracing::info!(
                    node = %identity.address,
                    was = %recorded.module_version,
                    now = %identity.module_version,
                    "node runs another idgen version (a rolling upgrade?); same identity, used again"
                );
                recorded.module_version = identity.module_version;
            }
            return Ok(());
        }
        fits(&identity, known.values()).map_err(|problem| format!("{problem}; it is not used"))?;
        known.insert(identity.address.clone(), identity);
        Ok(())
    }
}

/// What differs between two identities of one node, as `what was → now` phrases; empty when
/// the node may issue as before. The module version is not part of the identity.
fn identity_changes(was: &NodeIdentity, now: &NodeIdentity) -> Vec<String> {
    let mut changes = Vec::new();
    let mut compare = |what: &str, was: String, now: String| {
        if was != now {
            changes.push(format!("{what} {was} → {now}"));
        }
    };
    compare("step", was.step.to_string(), now.step.to_string());
    compare("offset", was.offset.to_string(), now.offset.to_string());
    compare(
        "snowflake layout",
        describe_layout(was),
        describe_layout(now),
    );
    changes
}

/// A layout as a person reads it: `41|10|12 bits from epoch 1704067200000 ms (63 bits)`, with
/// `in units of 1000 ms` where the time unit is not a millisecond.
fn describe_layout(node: &NodeIdentity) -> String {
    let layout = &node.layout;
    let unit = match layout.time_unit_ms {
        1 => String::new(),
        unit => format!(" in units of {unit} ms"),
    };
    format!(
        "{}|{}|{} bits from epoch {} ms{unit} ({} bits)",
        layout.time_bits,
        layout.shard_bits,
        layout.sequence_bits,
        layout.epoch_unix_ms,
        node.id_bits
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::deployment::{check, test_node as node};

    fn guard_for(nodes: Vec<NodeIdentity>) -> IdentityGuard {
        let guard = IdentityGuard::default();
        guard.set(&check(nodes).unwrap());
        guard
    }

    #[test]
    fn anything_is_admitted_before_the_deployment_is_checked() {
        assert!(IdentityGuard::default().admit(node("a:1", 5, 4)).is_ok());
    }

    #[test]
    fn a_known_node_must_come_back_unchanged_and_the_error_names_the_change() {
        let guard = guard_for(vec![node("a:1", 3, 0), node("b:2", 3, 1)]);
        assert!(guard.admit(node("b:2", 3, 1)).is_ok());
        let moved = guard.admit(node("b:2", 3, 0)).unwrap_err();
        assert!(
            moved.contains("b:2 changed its identity") && moved.contains("offset 1 → 0"),
            "{moved}"
        );
        assert!(
            !moved.contains("step"),
            "only what changed is named: {moved}"
        );
        let mut relaid = node("a:1", 3, 0);
        relaid.layout.epoch_unix_ms += 1;
        let relaid = guard.admit(relaid).unwrap_err();
        assert!(
            relaid.contains("snowflake layout 41|10|12 bits from epoch 1704067200000 ms (63 bits) → 41|10|12 bits from epoch 1704067200001 ms"),
            "{relaid}"
        );
        let mut coarser = node("a:1", 3, 0);
        coarser.layout.time_unit_ms = 10;
        let coarser = guard.admit(coarser).unwrap_err();
        assert!(
            coarser.contains("→ 41|10|12 bits from epoch 1704067200000 ms in units of 10 ms"),
            "{coarser}"
        );
    }

    #[test]
    fn a_node_back_on_another_module_version_is_used_both_ways() {
        let guard = guard_for(vec![node("a:1", 3, 0), node("b:2", 3, 1)]);
        let mut upgraded = node("b:2", 3, 1);
        upgraded.module_version = "0.2.0".into();
        assert_eq!(guard.admit(upgraded.clone()), Ok(()));
        assert_eq!(guard.admit(upgraded), Ok(()));
        // And back (a downgrade), still the same identity.
        assert_eq!(guard.admit(node("b:2", 3, 1)), Ok(()));
        // A new version does not excuse a new identity.
        let mut moved = node("b:2", 3, 2);
        moved.module_version = "0.2.0".into();
        assert!(guard.admit(moved).is_err());
    }

    #[test]
    fn a_node_first_seen_later_must_fit_and_then_stays_checked() {
        let guard = guard_for(vec![node("a:1", 3, 0), node("b:2", 3, 1)]);
        let clash = guard.admit(node("c:3", 3, 1)).unwrap_err();
        assert!(
            clash.contains("b:2 and c:3 share offset 1") && clash.ends_with("it is not used"),
            "{clash}"
        );
        let step = guard.admit(node("c:3", 4, 2)).unwrap_err();
        assert!(
            step.contains("c:3 has step 4 but") && step.contains("has step 3"),
            "{step}"
        );
        assert!(guard.admit(node("c:3", 3, 2)).is_ok());
        // Now known: a later change of c:3 is refused like any other.
        assert!(guard.admit(node("c:3", 3, 2)).is_ok());
        assert!(guard.admit(node("c:3", 3, 0)).is_err());
    }
}
