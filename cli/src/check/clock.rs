//! Each node's clock against this machine's and against the other nodes': snowflake IDs
//! carry the issuing node's time, and a node more than `max-drift-ms` off runs paced.

use super::{Finding, Level};
use crate::info::number;
use crate::node::{ClockReading, NodeFacts};

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
        findings.push(node_finding(
            &facts.address,
            clock,
            max_drift(facts),
            facts.info_field("idgen_clock_paced") == Some("1"),
            facts.info_field("idgen_clock_ahead_ms").unwrap_or("?"),
        ));
    }
    findings.extend(spread_finding(&readings));
    findings
}

/// One node's clock against this machine's: beyond `limit` (the reading is uncertain by the
/// round trip) or paced is a warning.
fn node_finding(
    address: &str,
    clock: ClockReading,
    limit: u64,
    paced: bool,
    ahead: &str,
) -> Finding {
    let off = clock
        .offset_ms
        .unsigned_abs()
        .saturating_sub(clock.round_trip_ms);
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
                 stepped back, or a restart while ahead): IDs are unique, their time field \
                 is ahead until the wall clock catches up"
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
    Finding::new(level, "clock", Some(address), message)
}

/// The nodes' clocks against each other: `(address, offset from this machine, max-drift-ms)`.
fn spread_finding(readings: &[(&str, i64, u64)]) -> Option<Finding> {
    if readings.len() < 2 {
        return None;
    }
    let (slow, slow_ms, _) = readings.iter().min_by_key(|r| r.1).copied()?;
    let (fast, fast_ms, _) = readings.iter().max_by_key(|r| r.1).copied()?;
    let limit = readings.iter().map(|r| r.2).min()?;
    let spread = fast_ms.abs_diff(slow_ms);
    Some(if spread > limit {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(offset_ms: i64, round_trip_ms: u64) -> ClockReading {
        ClockReading {
            offset_ms,
            round_trip_ms,
        }
    }

    #[test]
    fn a_clock_beyond_max_drift_warns_allowing_for_the_round_trip() {
        let pass = node_finding("a:1", reading(2500, 600), 2000, false, "0");
        assert_eq!(pass.level, Level::Pass);
        let warn = node_finding("a:1", reading(-2600, 500), 2000, false, "0");
        assert_eq!(warn.level, Level::Warn);
        assert!(warn.message.contains("-2600 ms"), "{}", warn.message);
        let paced = node_finding("a:1", reading(0, 1), 2000, true, "3600000");
        assert_eq!(paced.level, Level::Warn);
        assert!(paced.message.contains("3600000 ms ahead and is paced"));
    }

    #[test]
    fn nodes_apart_by_more_than_max_drift_warn() {
        assert!(spread_finding(&[("a:1", 5, 2000)]).is_none());
        let close = spread_finding(&[("a:1", 5, 2000), ("b:2", -5, 2000)]).unwrap();
        assert_eq!(close.level, Level::Pass);
        let apart = spread_finding(&[("a:1", 1500, 2000), ("b:2", -1500, 1000)]).unwrap();
        assert_eq!(apart.level, Level::Warn);
        assert!(apart
            .message
            .contains("a:1 is 3000 ms ahead of b:2, beyond max-drift-ms 1000"));
    }
}
