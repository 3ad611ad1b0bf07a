//! The module on every node, its version, and the identity rule: one step and layout,
//! distinct offsets, offsets left for nodes still to come.

use std::collections::BTreeMap;

use idgen_client::NodeIdentity;

use super::{Finding, Level};
use crate::node::{IdentityAnswer, NodeFacts};

/// One finding per node for the module, and one for the versions across nodes.
pub fn module_findings(nodes: &[NodeFacts]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut versions: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for facts in nodes {
        let (level, message) = match &facts.identity {
            IdentityAnswer::Known(identity) => {
                versions
                    .entry(identity.module_version.clone())
                    .or_default()
                    .push(&facts.address);
                (
                    Level::Pass,
                    format!(
                        "idgen {} loaded: step {}, offset {}",
                        identity.module_version, identity.step, identity.offset
                    ),
                )
            }
            IdentityAnswer::NotLoaded => (
                Level::Fail,
                "the idgen module is not loaded (IDGEN.IDENTITY is unknown): load it with \
                 --loadmodule /path/to/libidgen.so step N offset K, a distinct offset per node"
                    .to_string(),
            ),
            IdentityAnswer::Denied(error) => (
                Level::Fail,
                format!("the user may not run IDGEN.IDENTITY ({error}): grant +idgen.identity"),
            ),
            IdentityAnswer::Failed(error) => {
                (Level::Fail, format!("IDGEN.IDENTITY failed: {error}"))
            }
        };
        findings.push(Finding::new(level, "module", Some(&facts.address), message));
    }
    let (level, message) = match versions.len() {
        0 if nodes.is_empty() => (
            Level::Fail,
            "no node answered (see reach): no version to compare".to_string(),
        ),
        0 => (Level::Fail, "no node reported an idgen version".to_string()),
        1 => (
            Level::Pass,
            format!(
                "every node with the module runs idgen {}",
                versions.keys().next().map(String::as_str).unwrap_or("")
            ),
        ),
        _ => (
            Level::Warn,
            format!(
                "mixed module versions ({}): expected during a rolling upgrade; finish it",
                versions
                    .iter()
                    .map(|(version, nodes)| format!("{version} on {}", nodes.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ),
    };
    findings.push(Finding::new(level, "versions", None, message));
    findings
}

fn identities(nodes: &[NodeFacts]) -> Vec<(&str, &NodeIdentity)> {
    nodes
        .iter()
        .filter_map(|facts| match &facts.identity {
            IdentityAnswer::Known(identity) => Some((facts.address.as_str(), identity)),
            _ => None,
        })
        .collect()
}

fn describe_layout(identity: &NodeIdentity) -> String {
    let layout = &identity.layout;
    format!(
        "step {}, layout {}|{}|{} bits, epoch {}, time unit {} ms",
        identity.step,
        layout.time_bits,
        layout.shard_bits,
        layout.sequence_bits,
        layout.epoch_unix_ms,
        layout.time_unit_ms
    )
}

/// One step and layout; distinct offsets; room for `spare` more nodes.
pub fn deployment_findings(nodes: &[NodeFacts], node_count: usize, spare: u64) -> Vec<Finding> {
    let known = identities(nodes);
    if known.is_empty() {
        let message = if nodes.is_empty() {
            "no node answered (see reach): no identity to compare"
        } else {
            "no node reported its identity; nothing to compare"
        };
        return vec![Finding::new(
            Level::Fail,
            "identity",
            None,
            message.to_string(),
        )];
    }
    let mut findings = Vec::new();
    let mut settings: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (address, identity) in &known {
        settings
            .entry(describe_layout(identity))
            .or_default()
            .push(address);
    }
    findings.push(if settings.len() == 1 {
        Finding::new(
            Level::Pass,
            "identity",
            None,
            format!(
                "every node has {}",
                settings.keys().next().map(String::as_str).unwrap_or("")
            ),
        )
    } else {
        Finding::new(
            Level::Fail,
            "identity",
            None,
            format!(
                "nodes disagree on step or layout ({}): every node needs the same step and \
                 layout, or IDs repeat",
                settings
                    .iter()
                    .map(|(setting, nodes)| format!("{} has {setting}", nodes.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    });
    let mut offsets: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (address, identity) in &known {
        offsets.entry(identity.offset).or_default().push(address);
    }
    let shared: Vec<String> = offsets
        .iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(offset, nodes)| format!("{} share offset {offset}", nodes.join(" and ")))
        .collect();
    findings.push(if shared.is_empty() {
        Finding::new(
            Level::Pass,
            "offsets",
            None,
            format!(
                "{} nodes, distinct offsets ({})",
                known.len(),
                offsets
                    .keys()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    } else {
        Finding::new(
            Level::Fail,
            "offsets",
            None,
            format!(
                "{}: they hand out the same IDs; give every node, replicas included, its own \
                 offset in [0, step) and restart it",
                shared.join("; ")
            ),
        )
    });
    findings.push(room_finding(&known, node_count, spare));
    findings
}

fn room_finding(known: &[(&str, &NodeIdentity)], node_count: usize, spare: u64) -> Finding {
    let step = known
        .iter()
        .map(|(_, identity)| identity.step)
        .max()
        .unwrap_or(0);
    let used: Vec<u64> = known.iter().map(|(_, identity)| identity.offset).collect();
    let free: Vec<u64> = (0..step).filter(|offset| !used.contains(offset)).collect();
    // Unreachable nodes hold offsets too, unknown ones.
    let free_count = step.saturating_sub(node_count.max(used.len()) as u64);
    let listed: Vec<String> = free.iter().take(8).map(u64::to_string).collect();
    let more = if free.len() > listed.len() {
        ", …"
    } else {
        ""
    };
    if free_count >= spare {
        Finding::new(
            Level::Pass,
            "room",
            None,
            format!(
                "step {step} leaves {free_count} offsets for nodes to add (free: {}{more})",
                listed.join(", ")
            ),
        )
    } else {
        Finding::new(
            Level::Warn,
            "room",
            None,
            format!(
                "step {step} leaves {free_count} offsets for nodes to add, fewer than \
                 --spare-offsets {spare}: a new node or replica needs an offset of its own; \
                 a deployment's step cannot change, so plan a larger one for the next \
                 deployment"
            ),
        )
    }
}
