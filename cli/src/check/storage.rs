//! Persistence and eviction against docs/guarantees.md: what a crash or `maxmemory` can
//! take away from the counters.

use super::{Finding, Level};
use crate::info::number;
use crate::node::NodeFacts;

/// The persistence and the eviction finding of one node.
pub fn findings(facts: &NodeFacts) -> Vec<Finding> {
    vec![persistence(facts), eviction(facts)]
}

fn setting(facts: &NodeFacts, name: &str) -> Option<String> {
    facts.config.as_ref()?.get(name).cloned()
}

fn persistence(facts: &NodeFacts) -> Finding {
    let node = Some(facts.address.as_str());
    let finding = |level, message: String| Finding::new(level, "persistence", node, message);
    let idgen = facts.info.as_ref().ok();
    let fences_on = idgen.is_some_and(|info| {
        number(info, "idgen_snowflake_restart_fence") == Some(1)
            && number(info, "idgen_segment_fence").is_some_and(|fence| fence > 0)
    });
    let Some(aof) = setting(facts, "appendonly") else {
        // Without CONFIG: INFO tells whether AOF is on, not the fsync policy or RDB saves.
        return match facts.info_field("aof_enabled") {
            Some("1") => finding(
                Level::Pass,
                "AOF on (appendfsync not readable without CONFIG; the module's own \
                 idgen_warnings below cover it)"
                    .to_string(),
            ),
            Some(_) => finding(
                Level::Warn,
                "AOF off (RDB settings not readable without CONFIG): a crash loses the writes \
                 since the last snapshot; enable appendonly (docs/guarantees.md)"
                    .to_string(),
            ),
            None => finding(
                Level::Warn,
                "cannot read the persistence settings (neither CONFIG nor INFO allowed)"
                    .to_string(),
            ),
        };
    };
    let fsync = setting(facts, "appendfsync").unwrap_or_default();
    let saves = !setting(facts, "save").unwrap_or_default().trim().is_empty();
    match (aof.as_str(), fsync.as_str()) {
        ("yes", "always") => finding(
            Level::Pass,
            "appendonly yes, appendfsync always: a crash loses nothing acknowledged".to_string(),
        ),
        ("yes", "everysec") if fences_on => finding(
            Level::Pass,
            "appendonly yes, appendfsync everysec: safe with the restart and segment fences, \
             which are on"
                .to_string(),
        ),
        ("yes", policy) => finding(
            Level::Warn,
            format!(
                "appendonly yes, appendfsync {policy}{}: a crash can lose acknowledged writes; \
                 use appendfsync everysec with the default fences, or always",
                if fences_on { "" } else { " with a fence off" }
            ),
        ),
        _ if saves => finding(
            Level::Warn,
            "RDB snapshots only (appendonly no): a crash loses everything since the last \
             snapshot, covered by the fences except in a crash loop; enable appendonly"
                .to_string(),
        ),
        _ => finding(
            Level::Fail,
            "no persistence (appendonly no, save \"\"): after a restart segment counters \
             start again from 0 and hand out values already issued; enable appendonly"
                .to_string(),
        ),
    }
}

fn eviction(facts: &NodeFacts) -> Finding {
    let node = Some(facts.address.as_str());
    let policy = setting(facts, "maxmemory-policy")
        .or_else(|| facts.info_field("maxmemory_policy").map(str::to_string));
    let Some(policy) = policy else {
        return Finding::new(
            Level::Warn,
            "eviction",
            node,
            "cannot read maxmemory-policy (neither CONFIG nor INFO allowed)".to_string(),
        );
    };
    let (level, message) = if policy.starts_with("allkeys-") {
        (
            Level::Fail,
            format!(
                "maxmemory-policy {policy} may evict counter keys, which then start again \
                 from 0: use noeviction (or a volatile-* policy with no TTL on counter keys)"
            ),
        )
    } else if policy.starts_with("volatile-") {
        (
            Level::Pass,
            format!("maxmemory-policy {policy}: counter keys are safe while they have no TTL"),
        )
    } else {
        (
            Level::Pass,
            format!("maxmemory-policy {policy}: keys are never evicted"),
        )
    };
    Finding::new(level, "eviction", node, message)
}
