//! The identity check at connect: every node must have the module loaded, all must share
//! step and layout, and no two may share an offset.

use std::collections::HashMap;

use idgen_core::Layout;

use crate::error::{Error, Result};

/// One node's identity, as `CONFIG GET idgen.*` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// `host:port`.
    pub address: String,
    /// The deployment's step, as this node has it.
    pub step: u64,
    /// This node's offset.
    pub offset: u64,
    /// The snowflake layout, as this node has it.
    pub layout: Layout,
    /// The ID width the layout adds up to.
    pub id_bits: u32,
}

/// A deployment that passed the check: shared step and layout, distinct offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    /// The shared step.
    pub step: u64,
    /// The shared snowflake layout.
    pub layout: Layout,
    /// Every node checked.
    pub nodes: Vec<NodeIdentity>,
}

impl NodeIdentity {
    /// Reads a node's identity from its `CONFIG GET idgen.*` reply (name/value pairs).
    pub fn from_config(address: &str, pairs: &[(String, String)]) -> Result<Self> {
        let values: HashMap<&str, &str> = pairs
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        if values.is_empty() {
            return Err(Error::Deployment(format!(
                "{address} does not have the idgen module loaded (CONFIG GET idgen.* is empty)"
            )));
        }
        let number = |name: &str| -> Result<u64> {
            values
                .get(format!("idgen.{name}").as_str())
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| {
                    Error::Deployment(format!("{address} reports no usable idgen.{name}"))
                })
        };
        Ok(NodeIdentity {
            address: address.to_string(),
            step: number("step")?,
            offset: number("offset")?,
            layout: Layout {
                time_bits: number("time-bits")? as u32,
                shard_bits: number("shard-bits")? as u32,
                sequence_bits: number("sequence-bits")? as u32,
                epoch_unix_ms: number("epoch")?,
            },
            id_bits: number("id-bits")? as u32,
        })
    }
}

/// Checks that `nodes` form one deployment; the error names the nodes that disagree.
pub fn check(nodes: Vec<NodeIdentity>) -> Result<Deployment> {
    let Some(first) = nodes.first().cloned() else {
        return Err(Error::Deployment(
            "no node could be reached to check".into(),
        ));
    };
    for node in &nodes[1..] {
        if node.step != first.step {
            return Err(Error::Deployment(format!(
                "nodes disagree on step: {} has step {}, {} has step {}",
                first.address, first.step, node.address, node.step
            )));
        }
        if node.layout != first.layout || node.id_bits != first.id_bits {
            return Err(Error::Deployment(format!(
                "nodes disagree on the snowflake layout: {} has {:?} ({} bits), {} has {:?} ({} bits)",
                first.address, first.layout, first.id_bits, node.address, node.layout, node.id_bits
            )));
        }
    }
    let mut by_offset: HashMap<u64, &str> = HashMap::new();
    for node in &nodes {
        if let Some(other) = by_offset.insert(node.offset, &node.address) {
            return Err(Error::Deployment(format!(
                "{other} and {} share offset {}: every node, replicas included, needs its own",
                node.address, node.offset
            )));
        }
    }
    Ok(Deployment {
        step: first.step,
        layout: first.layout,
        nodes,
    })
}

/// A node with the default layout, for tests.
#[cfg(test)]
pub(crate) fn test_node(address: &str, step: u64, offset: u64) -> NodeIdentity {
    NodeIdentity {
        address: address.into(),
        step,
        offset,
        layout: Layout::default(),
        id_bits: 63,
    }
}

#[cfg(test)]
mod tests {
    use super::test_node as node;
    use super::*;

    #[test]
    fn a_good_deployment_passes() {
        let deployment = check(vec![
            node("a:1", 3, 0),
            node("b:2", 3, 1),
            node("c:3", 3, 2),
        ])
        .unwrap();
        assert_eq!(deployment.step, 3);
        assert_eq!(deployment.nodes.len(), 3);
    }

    #[test]
    fn shared_offsets_and_different_steps_are_refused_by_name() {
        let shared = check(vec![node("a:1", 3, 0), node("b:2", 3, 0)])
            .unwrap_err()
            .to_string();
        assert!(shared.contains("a:1 and b:2 share offset 0"), "{shared}");
        let step = check(vec![node("a:1", 3, 0), node("b:2", 4, 1)])
            .unwrap_err()
            .to_string();
        assert!(step.contains("a:1 has step 3, b:2 has step 4"), "{step}");
        let mut other_layout = node("b:2", 3, 1);
        other_layout.layout.epoch_unix_ms += 1;
        let layout = check(vec![node("a:1", 3, 0), other_layout])
            .unwrap_err()
            .to_string();
        assert!(
            layout.contains("disagree on the snowflake layout"),
            "{layout}"
        );
    }

    #[test]
    fn a_node_without_the_module_is_named() {
        let error = NodeIdentity::from_config("x:9", &[])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("x:9 does not have the idgen module loaded"),
            "{error}"
        );
    }
}
