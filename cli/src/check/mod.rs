//! `idgen check`: asks every node, then turns what they said into findings, one line each,
//! each pass, warn or fail.

mod access;
mod clock;
mod cluster;
mod health;
mod identity;
mod leases;
mod storage;

use std::time::Duration;

use crate::args::CheckArgs;
use crate::error::{CliError, EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE};
use crate::node::{gather, NodeFacts};
use crate::permissions::{Kind, ProbeSet};
use crate::target::Target;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// As it should be.
    Pass,
    /// Works, but a guarantee or an operation is at risk.
    Warn,
    /// Unsound: IDs may repeat, or the application cannot work.
    Fail,
}

impl Level {
    /// `pass`, `warn` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Pass => "pass",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Finding {
    /// How bad.
    pub level: Level,
    /// The check's name (`offsets`, `persistence`, …).
    pub check: &'static str,
    /// The node it is about; `None` for the deployment as a whole.
    pub node: Option<String>,
    /// What was found, and what to do about it.
    pub message: String,
}

impl Finding {
    fn new(level: Level, check: &'static str, node: Option<&str>, message: String) -> Self {
        Finding {
            level,
            check,
            node: node.map(str::to_string),
            message,
        }
    }
}

/// The outcome of a check run.
#[derive(Debug)]
pub struct Report {
    /// Every finding, in the order the checks ran.
    pub findings: Vec<Finding>,
    /// Whether some node could not be reached.
    pub unreachable: bool,
}

impl Report {
    /// 0 when nothing failed, 1 when a check failed, 2 when a node could not be reached.
    pub fn exit_code(&self) -> u8 {
        if self.unreachable {
            EXIT_UNREACHABLE
        } else if self.findings.iter().any(|f| f.level == Level::Fail) {
            EXIT_FAILED
        } else {
            EXIT_OK
        }
    }
}

/// Runs every check on the deployment.
pub async fn run(target: &Target, args: &CheckArgs, timeout: Duration) -> Result<Report, CliError> {
    let kind = match target {
        Target::Nodes(_) => Kind::Nodes,
        Target::Cluster(_) => Kind::Cluster,
        Target::Sentinel { .. } => Kind::Sentinel,
    };
    let nodes = target.discover(timeout).await?;
    let probes = ProbeSet::for_application(kind, &args.probe_key);
    let mut findings = Vec::new();
    let mut reached: Vec<NodeFacts> = Vec::new();
    let mut unreachable = false;
    for node in &nodes {
        match gather(node, timeout, &probes, kind == Kind::Cluster).await {
            Ok(facts) => {
                findings.push(Finding::new(
                    Level::Pass,
                    "reach",
                    Some(&node.address),
                    format!("answers ({})", facts.role()),
                ));
                reached.push(facts);
            }
            Err(error) => {
                // Refused credentials reach the node: a failed check, not exit 2.
                unreachable |= error.code == EXIT_UNREACHABLE;
                let flagged = if node.flagged_down {
                    " (the topology already marks it down)"
                } else {
                    ""
                };
                findings.push(Finding::new(
                    Level::Fail,
                    "reach",
                    Some(&node.address),
                    format!("{error}{flagged}"),
                ));
            }
        }
    }
    findings.extend(identity::module_findings(&reached));
    findings.extend(identity::deployment_findings(
        &reached,
        nodes.len(),
        args.spare_offsets,
    ));
    for facts in &reached {
        findings.extend(storage::findings(facts));
    }
    findings.extend(leases::findings(&reached));
    findings.extend(clock::findings(&reached));
    for facts in &reached {
        findings.extend(health::findings(facts));
        findings.push(access::finding(facts, &args.probe_key));
    }
    if kind == Kind::Cluster {
        findings.push(cluster::slot_finding(&reached));
        findings.push(cluster::resharding_finding(&reached));
    }
    Ok(Report {
        findings,
        unreachable,
    })
}
