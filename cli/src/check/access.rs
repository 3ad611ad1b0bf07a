//! The connecting user's permissions for the commands an application needs
//! (see crate::permissions for how they are tried without effect).

use super::{Finding, Level};
use crate::node::NodeFacts;
use crate::permissions::Outcome;

/// One finding per node.
pub fn finding(facts: &NodeFacts, probe_key: &str) -> Finding {
    let node = Some(facts.address.as_str());
    let denied: Vec<String> = facts
        .permissions
        .iter()
        .filter(|probe| probe.outcome == Outcome::DeniedCommand)
        .map(|probe| format!("{} ({})", probe.name, probe.grant))
        .collect();
    let key_denied: Vec<&str> = facts
        .permissions
        .iter()
        .filter(|probe| probe.outcome == Outcome::DeniedKey)
        .map(|probe| probe.name)
        .collect();
    let unclear: Vec<String> = facts
        .permissions
        .iter()
        .filter_map(|probe| match &probe.outcome {
            Outcome::Unclear(error) => Some(format!("{}: {error}", probe.name)),
            _ => None,
        })
        .collect();
    let unknown = facts
        .permissions
        .iter()
        .any(|probe| probe.outcome == Outcome::UnknownCommand);
    if !denied.is_empty() {
        return Finding::new(
            Level::Fail,
            "permissions",
            node,
            format!("the user may not run {}: grant them", denied.join(", ")),
        );
    }
    if !key_denied.is_empty() {
        return Finding::new(
            Level::Warn,
            "permissions",
            node,
            format!(
                "the user may run {} but not on the key {probe_key:?}: pass --probe-key with \
                 one of the application's keys",
                key_denied.join(", ")
            ),
        );
    }
    if !unclear.is_empty() {
        return Finding::new(Level::Warn, "permissions", node, unclear.join("; "));
    }
    let names: Vec<&str> = facts.permissions.iter().map(|probe| probe.name).collect();
    Finding::new(
        Level::Pass,
        "permissions",
        node,
        format!(
            "the user may run {} on {probe_key:?}{}",
            names.join(", "),
            if unknown {
                " (the ID commands are unknown here: see the module finding)"
            } else {
                ""
            }
        ),
    )
}
