//! Slot coverage in Redis Cluster: a slot without a master means keys nobody can serve.

use super::{Finding, Level};
use crate::info::number;
use crate::node::NodeFacts;

/// The whole-cluster finding, from the worst `CLUSTER INFO` any node gave.
pub fn slot_finding(nodes: &[NodeFacts]) -> Finding {
    let mut worst: Option<Finding> = None;
    for facts in nodes {
        let Some(answer) = &facts.cluster_info else {
            continue;
        };
        let finding = match answer {
            Err(error) => Finding::new(
                Level::Warn,
                "slots",
                None,
                format!("{} does not answer CLUSTER INFO: {error}", facts.address),
            ),
            Ok(info) => {
                let state = info.get("cluster_state").map(String::as_str).unwrap_or("?");
                let assigned = number(info, "cluster_slots_assigned").unwrap_or(0);
                let failing = number(info, "cluster_slots_fail").unwrap_or(0);
                let possibly = number(info, "cluster_slots_pfail").unwrap_or(0);
                if state == "ok" && assigned == 16384 && failing == 0 && possibly == 0 {
                    Finding::new(
                        Level::Pass,
                        "slots",
                        None,
                        "all 16384 slots are assigned and served (cluster_state ok)".to_string(),
                    )
                } else {
                    Finding::new(
                        Level::Fail,
                        "slots",
                        None,
                        format!(
                            "{} sees cluster_state {state}, {assigned} of 16384 slots assigned, \
                             {failing} failing, {possibly} possibly failing: keys in those \
                             slots get no IDs",
                            facts.address
                        ),
                    )
                }
            }
        };
        if worst.as_ref().is_none_or(|w| finding.level > w.level) {
            worst = Some(finding);
        }
    }
    worst.unwrap_or_else(|| {
        Finding::new(
            Level::Fail,
            "slots",
            None,
            "no cluster node answered".to_string(),
        )
    })
}
