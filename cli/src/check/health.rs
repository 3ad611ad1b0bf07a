//! What each node reports about itself: the guarantees its settings put at risk
//! (`idgen_warnings`) and identity conflicts it heard of from other nodes
//! (`idgen_conflicts`, from module versions that compare identities over the cluster bus).

use super::{Finding, Level};
use crate::node::{IdentityAnswer, NodeFacts};

/// The warnings and the conflicts finding of one node (none without the module).
pub fn findings(facts: &NodeFacts) -> Vec<Finding> {
    if !matches!(facts.identity, IdentityAnswer::Known(_)) {
        return Vec::new();
    }
    let node = Some(facts.address.as_str());
    let info = match &facts.info {
        Ok(info) => info,
        Err(error) => {
            return vec![Finding::new(
                Level::Warn,
                "warnings",
                node,
                format!("cannot read INFO idgen ({error}): grant +info to the checking user"),
            )]
        }
    };
    let warnings = match info.get("idgen_warnings").map(String::as_str) {
        Some("none") => Finding::new(Level::Pass, "warnings", node, "none".to_string()),
        Some(text) => Finding::new(Level::Warn, "warnings", node, text.to_string()),
        None => Finding::new(
            Level::Warn,
            "warnings",
            node,
            "INFO idgen has no idgen_warnings field".to_string(),
        ),
    };
    let conflicts = match info.get("idgen_conflicts") {
        None => Finding::new(
            Level::Pass,
            "conflicts",
            node,
            "not reported by this module version (the offsets check above compares the \
             nodes given)"
                .to_string(),
        ),
        Some(count) if count == "0" => Finding::new(
            Level::Pass,
            "conflicts",
            node,
            format!(
                "none heard of{}",
                info.get("idgen_peers")
                    .map(|peers| format!(" ({peers} peers known)"))
                    .unwrap_or_default()
            ),
        ),
        Some(count) => {
            let detail = info
                .get("idgen_conflict_detail")
                .map(String::as_str)
                .unwrap_or("no detail");
            let refusing = info.get("idgen_issuing_refused").map(String::as_str) == Some("1");
            let policy = info
                .get("idgen_identity_policy")
                .map(String::as_str)
                .unwrap_or("?");
            Finding::new(
                Level::Fail,
                "conflicts",
                node,
                format!(
                    "{count} identity conflicts: {detail}; this node {} (identity-conflicts \
                     {policy}); fix the offset, step or layout named and restart that node",
                    if refusing {
                        "refuses to issue"
                    } else {
                        "still issues"
                    }
                ),
            )
        }
    };
    vec![warnings, conflicts]
}
