//! One band of leased worker ids on every node: a node with a smaller `lease-workers` (or
//! none) would issue `SNOWFLAKE.NEXT` IDs with shard values another node leases.

use std::collections::BTreeMap;

use super::{Finding, Level};
use crate::node::NodeFacts;

/// Whether the nodes whose INFO could be read agree on `lease-workers` (a node whose module
/// predates leases counts as 0).
pub fn findings(nodes: &[NodeFacts]) -> Vec<Finding> {
    let mut bands: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for facts in nodes.iter().filter(|facts| facts.info.is_ok()) {
        let workers = facts.info_field("idgen_lease_workers").unwrap_or("0");
        bands
            .entry(workers.to_string())
            .or_default()
            .push(&facts.address);
    }
    if bands.is_empty() {
        return Vec::new();
    }
    let finding = if bands.len() == 1 {
        let workers = bands.keys().next().map(String::as_str).unwrap_or("0");
        let message = if workers == "0" {
            "leases are off on every node (lease-workers 0)".to_string()
        } else {
            format!("every node reserves the top {workers} shard values for leased worker ids")
        };
        Finding::new(Level::Pass, "leases", None, message)
    } else {
        Finding::new(
            Level::Fail,
            "leases",
            None,
            format!(
                "nodes disagree on lease-workers ({}): a node with fewer issues SNOWFLAKE.NEXT \
                 IDs with shard values another node leases; give every node the same \
                 lease-workers",
                bands
                    .iter()
                    .map(|(workers, nodes)| format!("{} has {workers}", nodes.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    };
    vec![finding]
}
