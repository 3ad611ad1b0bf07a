//! The identity check after connect. Every new pooled connection asks its node for its
//! identity again: a node the client reconnects to (after a restart, a host replaced, a
//! network cut) must still have the step, offset and layout it had at connect, and a node
//! that could not be reached at connect must fit the deployment and not share an offset.
//! A node that fails the check is not used: a restart with a wrong offset would otherwise
//! issue IDs in another node's residue class, and the two would collide.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::deployment::{fits, Deployment, NodeIdentity};

/// The identities the client trusts, by address, shared by the pools of every node.
#[derive(Debug, Default)]
pub(crate) struct IdentityGuard {
    /// Empty until the deployment passed its check at connect.
    known: Mutex<HashMap<String, NodeIdentity>>,
}

impl IdentityGuard {
    /// Trusts the nodes checked at connect.
    pub(crate) fn set(&self, deployment: &Deployment) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        for node in &deployment.nodes {
            known.insert(node.address.clone(), node.clone());
        }
    }

    /// Whether a node that reports `identity` may be used; the error says why not.
    pub(crate) fn admit(&self, identity: NodeIdentity) -> Result<(), String> {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.is_empty() {
            return Ok(()); // still connecting: the check at connect decides
        }
        if let Some(recorded) = known.get(&identity.address) {
            if *recorded == identity {
                return Ok(());
            }
            return Err(format!(
                "{} now has step {}, offset {} (layout {:?}, {} bits) but had step {}, \
                 offset {} (layout {:?}, {} bits) when the client connected; it is not used \
                 until it runs with its old configuration again",
                identity.address,
                identity.step,
                identity.offset,
                identity.layout,
                identity.id_bits,
                recorded.step,
                recorded.offset,
                recorded.layout,
                recorded.id_bits
            ));
        }
        fits(&identity, known.values()).map_err(|problem| format!("{problem}; it is not used"))?;
        known.insert(identity.address.clone(), identity);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::{check, test_node as node};

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
    fn a_known_node_must_come_back_unchanged() {
        let guard = guard_for(vec![node("a:1", 3, 0), node("b:2", 3, 1)]);
        assert!(guard.admit(node("b:2", 3, 1)).is_ok());
        let moved = guard.admit(node("b:2", 3, 0)).unwrap_err();
        assert!(
            moved.contains("b:2 now has step 3, offset 0") && moved.contains("offset 1"),
            "{moved}"
        );
        let mut relaid = node("a:1", 3, 0);
        relaid.layout.epoch_unix_ms += 1;
        assert!(guard.admit(relaid).is_err());
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
