//! The identity check at connect: every node must have the module loaded, all must share
//! step and layout, and no two may share an offset.

use std::collections::HashMap;

use idgen_core::Layout;

use crate::error::{Error, Result};

/// One node's identity, as `IDGEN.IDENTITY` reports it.
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
    /// Shard values the node reserves for leased worker ids (`lease-workers`; 0 when off,
    /// and from releases before leases).
    pub lease_workers: u64,
    /// The idgen module's version on this node (`0.2.0`). Not compared: nodes may run
    /// different versions during a rolling upgrade.
    pub module_version: String,
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
    /// Reads a node's identity from its `IDGEN.IDENTITY` reply (field/value pairs).
    pub fn from_fields(address: &str, fields: &HashMap<String, String>) -> Result<Self> {
        let number = |name: &str| -> Result<u64> {
            fields
                .get(name)
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| {
                    Error::Deployment(format!(
                        "{address} answered IDGEN.IDENTITY without a usable `{name}`"
                    ))
                })
        };
        let width = |name: &str| -> Result<u32> {
            let value = number(name)?;
            u32::try_from(value).map_err(|_| {
                Error::Deployment(format!("{address} reports {name} {value}, not a bit width"))
            })
        };
        Ok(NodeIdentity {
            address: address.to_string(),
            step: number("step")?,
            offset: number("offset")?,
            layout: Layout {
                time_bits: width("time-bits")?,
                shard_bits: width("shard-bits")?,
                sequence_bits: width("sequence-bits")?,
                epoch_unix_ms: number("epoch")?,
                // Release 0.1.0 counts milliseconds and does not report a unit.
                time_unit_ms: match fields.get("time-unit-ms") {
                    None => 1,
                    Some(_) => number("time-unit-ms")?,
                },
            },
            id_bits: width("id-bits")?,
            lease_workers: match fields.get("lease-workers") {
                None => 0,
                Some(_) => number("lease-workers")?,
            },
            module_version: fields.get("version").cloned().unwrap_or_default(),
        })
    }
}

/// The deployment rule, used at connect and for every node met later: `node` fits beside
/// `members` if it has their step and layout and an offset none of them has. The error names
/// `node` and the member it clashes with.
pub(crate) fn fits<'a>(
    node: &NodeIdentity,
    members: impl IntoIterator<Item = &'a NodeIdentity>,
) -> std::result::Result<(), String> {
    for member in members {
        if node.step != member.step {
            return Err(format!(
                "{} has step {} but {} has step {}: every node needs the same step",
                node.address, node.step, member.address, member.step
            ));
        }
        if node.layout != member.layout || node.id_bits != member.id_bits {
            return Err(format!(
                "{} has the snowflake layout {:?} ({} bits) but {} has {:?} ({} bits): every \
                 node needs the same layout",
                node.address,
                node.layout,
                node.id_bits,
                member.address,
                member.layout,
                member.id_bits
            ));
        }
        if node.lease_workers != member.lease_workers {
            return Err(format!(
                "{} reserves {} shard values for leased worker ids but {} reserves {}: every \
                 node needs the same lease-workers",
                node.address, node.lease_workers, member.address, member.lease_workers
            ));
        }
        if node.offset == member.offset {
            return Err(format!(
                "{} and {} share offset {}: every node, replicas included, needs its own",
                member.address, node.address, node.offset
            ));
        }
    }
    Ok(())
}

/// Checks that `nodes` form one deployment (the rule every node met later is held to, each
/// node beside those before it); the
/// error names the nodes that disagree.
pub fn check(nodes: Vec<NodeIdentity>) -> Result<Deployment> {
    let Some(first) = nodes.first().cloned() else {
        return Err(Error::Deployment(
            "no node could be reached to check".into(),
        ));
    };
    for (index, node) in nodes.iter().enumerate() {
        fits(node, &nodes[..index]).map_err(Error::Deployment)?;
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
        lease_workers: 0,
        module_version: "0.1.0".into(),
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
        assert!(step.contains("b:2 has step 4 but a:1 has step 3"), "{step}");
        let mut other_layout = node("b:2", 3, 1);
        other_layout.layout.epoch_unix_ms += 1;
        let layout = check(vec![node("a:1", 3, 0), other_layout])
            .unwrap_err()
            .to_string();
        assert!(
            layout.contains("b:2 has the snowflake layout") && layout.contains("same layout"),
            "{layout}"
        );
        let mut leasing = node("b:2", 3, 1);
        leasing.lease_workers = 16;
        let band = check(vec![node("a:1", 3, 0), leasing])
            .unwrap_err()
            .to_string();
        assert!(band.contains("same lease-workers"), "{band}");
    }

    #[test]
    fn an_identity_reply_is_read_by_field_name() {
        let fields: HashMap<String, String> = [
            ("step", "6"),
            ("offset", "2"),
            ("epoch", "1704067200000"),
            ("time-bits", "41"),
            ("shard-bits", "10"),
            ("sequence-bits", "12"),
            ("id-bits", "63"),
            ("version", "0.1.0"),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        let identity = NodeIdentity::from_fields("x:9", &fields).unwrap();
        assert_eq!(identity, {
            let mut expected = node("x:9", 6, 2);
            expected.module_version = "0.1.0".into();
            expected
        });
        let mut missing = fields.clone();
        missing.remove("offset");
        let error = NodeIdentity::from_fields("x:9", &missing)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("x:9 answered IDGEN.IDENTITY without a usable `offset`"),
            "{error}"
        );
        // A module that counts in other units says so, and it is part of the layout.
        let mut seconds = fields.clone();
        seconds.insert("time-unit-ms".into(), "1000".into());
        let identity = NodeIdentity::from_fields("x:9", &seconds).unwrap();
        assert_eq!(identity.layout.time_unit_ms, 1000);
        let mixed = check(vec![node("a:1", 6, 0), identity])
            .unwrap_err()
            .to_string();
        assert!(mixed.contains("same layout"), "{mixed}");
    }
}
