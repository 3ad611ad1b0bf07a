//! Redis Cluster: slot coverage (a slot without a master means keys nobody can serve), and
//! whether the module follows the way the servers can move slots.

use std::collections::HashMap;

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

/// The atomic slot migration a server has, from its `INFO server`: Redis 8.4+'s `CLUSTER
/// MIGRATION` or Valkey 9's `CLUSTER MIGRATESLOTS`; `None` for a server that has none
/// (slots then move with `MIGRATE`).
pub fn atomic_migration_of(info: &HashMap<String, String>) -> Option<&'static str> {
    let version = |field: &str| -> (u32, u32) {
        let mut parts = info
            .get(field)
            .map(String::as_str)
            .unwrap_or("0")
            .split('.')
            .map(|part| part.parse().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    };
    if info.get("server_name").map(String::as_str) == Some("valkey") {
        (version("valkey_version") >= (9, 0)).then_some("CLUSTER MIGRATESLOTS")
    } else {
        (version("redis_version") >= (8, 4)).then_some("CLUSTER MIGRATION")
    }
}

/// Whether every node's module follows the atomic slot migration its server has (Redis
/// 8.4+, Valkey 9): a module release that does not cannot be relied on while slots move
/// that way (and Valkey refuses `CLUSTER MIGRATESLOTS` outright). Migrations that failed or
/// were cancelled are counted in the message.
pub fn resharding_finding(nodes: &[NodeFacts]) -> Finding {
    let mut unfollowed = Vec::new();
    let mut offered = Vec::new();
    let mut failed = 0;
    for facts in nodes {
        let Ok(info) = &facts.info else { continue };
        failed += number(info, "idgen_slot_imports_failed").unwrap_or(0);
        let Some(migration) = atomic_migration_of(info) else {
            continue;
        };
        if !offered.contains(&migration) {
            offered.push(migration);
        }
        if info.get("idgen_atomic_slot_migration").map(String::as_str) != Some("handled") {
            unfollowed.push(format!("{} ({migration})", facts.address));
        }
    }
    if !unfollowed.is_empty() {
        return Finding::new(
            Level::Warn,
            "resharding",
            None,
            format!(
                "the module on {} does not follow its server's atomic slot migration: upgrade \
                 idgen on every node before moving slots that way; MIGRATE (redis-cli \
                 --cluster reshard) needs nothing from the module",
                unfollowed.join(", ")
            ),
        );
    }
    let how = if offered.is_empty() {
        "slots move with MIGRATE (redis-cli --cluster reshard); this server has no atomic \
         slot migration"
            .to_string()
    } else {
        format!(
            "slots move with {} or MIGRATE; the module on every node follows both",
            offered.join(" / ")
        )
    };
    let failures = if failed > 0 {
        format!(" ({failed} imports failed or were cancelled since the nodes started)")
    } else {
        String::new()
    };
    Finding::new(Level::Pass, "resharding", None, format!("{how}{failures}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(field, value)| (field.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn the_server_says_which_atomic_migration_it_has() {
        let of = |pairs: &[(&str, &str)]| atomic_migration_of(&info(pairs));
        assert_eq!(of(&[("redis_version", "7.0.15")]), None);
        assert_eq!(of(&[("redis_version", "8.2.3")]), None);
        assert_eq!(of(&[("redis_version", "8.4.0")]), Some("CLUSTER MIGRATION"));
        assert_eq!(of(&[("redis_version", "8.6.2")]), Some("CLUSTER MIGRATION"));
        assert_eq!(
            of(&[("redis_version", "10.0.1")]),
            Some("CLUSTER MIGRATION")
        );
        // Valkey reports a Redis version of its own (7.2.4): its name decides.
        let valkey = |version| {
            of(&[
                ("server_name", "valkey"),
                ("redis_version", "7.2.4"),
                ("valkey_version", version),
            ])
        };
        assert_eq!(valkey("8.1.8"), None);
        assert_eq!(valkey("9.1.2"), Some("CLUSTER MIGRATESLOTS"));
    }
}
