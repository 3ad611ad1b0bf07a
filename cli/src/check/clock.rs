//! Each node's clock against this machine's and against the other nodes': snowflake IDs
//! carry the issuing node's time, and a node more than `max-drift-ms` off runs paced.

use super::{Finding, Level};
use crate::info::number;
use crate::node::NodeFacts;

/// The module's default `max-drift-ms`, for nodes whose INFO cannot be read.
const DEFAULT_MAX_DRIFT_MS: u64 = 2000;

fn max_drift(facts: &NodeFacts) -> u64 {
    facts
        .info
        .as_ref()
        .ok()
        .and_then(|info| number(info, "idgen_max_drift_ms"))
        .unwrap_or(DEFAULT_MAX_DRIFT_MS)
}

/// One finding per node, and one for the spread between nodes.
pub fn findings(nodes: &[NodeFacts]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut readings = Vec::new();
    for facts in nodes {
        let node = Some(facts.address.as_str());
        let Some(clock) = facts.clock else {
            findings.push(Finding::new(
                Level::Warn,
                "clock",
                node,
                "cannot read the node's clock (TIME not allowed)".to_string(),
            ));
            continue;
        };
        readings.push((facts.address.as_str(), clock.offset_ms, max_drift(facts)));
        let limit = max_drift(facts);
        // The reading is uncertain by the round trip.
        let off = clock
            .offset_ms
            .unsigned_abs()
            .saturating_sub(clock.round_trip_ms);
        let paced = facts.info_field("idgen_clock_paced") == Some("1");
        let ahead = facts.info_field("idgen_clock_ahead_ms").unwrap_or("?");
        let (level, message) = if off > limit {
            (
                Level::Warn,
                format!(
                    "clock {:+} ms from this machine's, beyond max-drift-ms {limit}: check NTP \
                     on both",
                    clock.offset_ms
                ),
            )
        } else if paced {
            (
                Level::Warn,
                format!(
                    "the snowflake clock runs {ahead} ms ahead and is paced (the wall clock \
                     stepped back, or a restart while ahead): IDs are unique, their time \
                     field is ahead until the wall clock catches up"
                ),
            )
        } else {
            (
                Level::Pass,
                format!(
                    "clock {:+} ms from this machine's (round trip {} ms), snowflake clock {ahead} \
                     ms ahead",
                    clock.offset_ms, clock.round_trip_ms
                ),
            )
        };
        findings.push(Finding::new(level, "clock", node, message));
    }
    if readings.len() > 1 {
        let (slow, slow_ms, _) = readings
            .iter()
            .min_by_key(|r| r.1)
            .copied()
            .unwrap_or_default();
        let (fast, fast_ms, _) = readings
            .iter()
            .max_by_key(|r| r.1)
            .copied()
            .unwrap_or_default();
        let limit = readings
            .iter()
            .map(|r| r.2)
            .min()
            .unwrap_or(DEFAULT_MAX_DRIFT_MS);
        let spread = fast_ms.abs_diff(slow_ms);
        findings.push(if spread > limit {
            Finding::new(
                Level::Warn,
                "clocks",
                None,
                format!(
                    "{fast} is {spread} ms ahead of {slow}, beyond max-drift-ms {limit}: IDs \
                     from the two are not k-sorted by time; check NTP"
                ),
            )
        } else {
            Finding::new(
                Level::Pass,
                "clocks",
                None,
                format!("the nodes' clocks agree within {spread} ms (max-drift-ms {limit})"),
            )
        });
    }
    findings
}
