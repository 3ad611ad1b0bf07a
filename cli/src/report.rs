//! Printing `idgen check`'s findings: aligned lines for people, or one JSON document.

use serde_json::json;

use crate::check::{Level, Report};

/// The report as lines: `PASS  offsets    -               3 nodes, distinct offsets (0, 1, 2)`,
/// then a summary line.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let width = report
        .findings
        .iter()
        .map(|f| f.node.as_deref().unwrap_or("deployment").len())
        .max()
        .unwrap_or(10);
    for finding in &report.findings {
        out.push_str(&format!(
            "{:<4}  {:<11}  {:<width$}  {}\n",
            finding.level.name().to_uppercase(),
            finding.check,
            finding.node.as_deref().unwrap_or("deployment"),
            finding.message
        ));
    }
    let count = |level| report.findings.iter().filter(|f| f.level == level).count();
    out.push_str(&format!(
        "idgen check: {} pass, {} warn, {} fail{}\n",
        count(Level::Pass),
        count(Level::Warn),
        count(Level::Fail),
        if report.unreachable {
            "; a node could not be reached"
        } else {
            ""
        }
    ));
    out
}

/// The report as one JSON document: `{"exit_code", "unreachable", "counts", "findings"}`,
/// each finding `{"level", "check", "node", "message"}` (`node` null for the deployment).
pub fn json(report: &Report) -> String {
    let findings: Vec<_> = report
        .findings
        .iter()
        .map(|finding| {
            json!({
                "level": finding.level.name(),
                "check": finding.check,
                "node": finding.node,
                "message": finding.message,
            })
        })
        .collect();
    let count = |level| report.findings.iter().filter(|f| f.level == level).count();
    json!({
        "exit_code": report.exit_code(),
        "unreachable": report.unreachable,
        "counts": {"pass": count(Level::Pass), "warn": count(Level::Warn), "fail": count(Level::Fail)},
        "findings": findings,
    })
    .to_string()
}
