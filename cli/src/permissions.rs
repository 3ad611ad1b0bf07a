//! Whether the connecting user may run the commands an application needs — found out
//! without admin rights (`ACL DRYRUN` needs them) and without any effect.
//!
//! Each command is sent inside `MULTI` and the transaction is discarded: Redis checks a
//! command's ACL (the command and its keys) when it is queued, so `QUEUED` (or any error
//! other than `NOPERM`, such as `MOVED` or `READONLY`, which Redis checks later) means
//! allowed, `NOPERM` means denied, and nothing runs. A user who may not run `MULTI` is asked
//! directly instead: harmless commands as they are, and the ID commands with `COUNT 0`,
//! which the module refuses before it opens the key (nothing is written, but each such
//! probe counts once in `idgen_errors`).

use crate::server_errors;
use idgen_client::redis::{self, aio::MultiplexedConnection, Cmd, RedisError};
use idgen_core::commands as declared;

/// One command an application needs.
#[derive(Debug, Clone)]
pub struct ProbeSpec {
    /// How the command is named in reports (`SNOWFLAKE.NEXT`).
    pub name: &'static str,
    /// The ACL rule that grants it.
    pub grant: String,
    /// The command as queued inside `MULTI` (never run).
    queued: Cmd,
    /// The command as sent when `MULTI` is not allowed: one that has no effect.
    direct: Cmd,
}

/// The commands to try on every node.
#[derive(Debug, Clone, Default)]
pub struct ProbeSet {
    specs: Vec<ProbeSpec>,
}

/// What the server answered for one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The ACL allows it.
    Allowed,
    /// The user may not run the command.
    DeniedCommand,
    /// The user may run the command, but not on the probe key.
    DeniedKey,
    /// The server does not know the command (reported by the module finding).
    UnknownCommand,
    /// Something else went wrong; the text says what.
    Unclear(String),
}

/// One command tried.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The command's name.
    pub name: &'static str,
    /// The ACL rule that grants it.
    pub grant: String,
    /// The answer.
    pub outcome: Outcome,
}

/// The deployment kind decides which commands the client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One node or independent nodes.
    Nodes,
    /// Redis Cluster: the client also reads the cluster's members and slots.
    Cluster,
    /// Sentinel: the client also asks data nodes for their `ROLE`.
    Sentinel,
}

fn cmd(parts: &[&str]) -> Cmd {
    let mut command = redis::cmd(parts[0]);
    for part in &parts[1..] {
        command.arg(*part);
    }
    command
}

/// The ACL rule that grants one command: `+` and its name in lower case.
fn grant(name: &str) -> String {
    format!("+{}", name.to_ascii_lowercase())
}

fn spec(name: &'static str, grant: impl Into<String>, queued: Cmd, direct: Cmd) -> ProbeSpec {
    ProbeSpec {
        name,
        grant: grant.into(),
        queued,
        direct,
    }
}

impl ProbeSet {
    /// What the client crate sends in a deployment of this kind (docs/client.md#acl), with
    /// `key` in the ID commands.
    pub fn for_application(kind: Kind, key: &str) -> ProbeSet {
        let harmless = |name, grant, parts: &[&str]| spec(name, grant, cmd(parts), cmd(parts));
        let identity = declared::IDGEN_IDENTITY.name();
        // An ID command is probed with `COUNT 0`, which the module refuses after the ACL
        // check: permitted or not, nothing is issued.
        let id_command = |command: &declared::Command| {
            let name = command.name();
            spec(
                name,
                grant(name),
                cmd(&[name, key]),
                cmd(&[name, key, declared::COUNT.word, "0"]),
            )
        };
        let mut specs = vec![
            harmless("PING", "+ping", &["PING"]),
            spec(
                identity,
                grant(identity),
                cmd(&[identity]),
                cmd(&[identity]),
            ),
            id_command(&declared::SNOWFLAKE_NEXT),
            id_command(&declared::SEGMENT_NEXT),
        ];
        match kind {
            Kind::Nodes => {}
            Kind::Cluster => {
                specs.push(harmless(
                    "CLUSTER NODES",
                    "+cluster|nodes",
                    &["CLUSTER", "NODES"],
                ));
                specs.push(harmless(
                    "CLUSTER SLOTS",
                    "+cluster|slots",
                    &["CLUSTER", "SLOTS"],
                ));
            }
            Kind::Sentinel => specs.push(harmless("ROLE", "+role", &["ROLE"])),
        }
        ProbeSet { specs }
    }
}

fn classify(result: Result<redis::Value, RedisError>, allowed_otherwise: bool) -> Outcome {
    match result {
        Ok(_) => Outcome::Allowed,
        Err(error) if error.code() == Some("NOPERM") => {
            let detail = error.detail().unwrap_or_default().to_lowercase();
            if detail.contains("key") {
                Outcome::DeniedKey
            } else {
                Outcome::DeniedCommand
            }
        }
        Err(error) if server_errors::is_unknown_command(&error) => Outcome::UnknownCommand,
        // Queued commands: Redis checks the ACL first, so a later refusal means allowed.
        Err(_) if allowed_otherwise => Outcome::Allowed,
        Err(error) => Outcome::Unclear(error.to_string()),
    }
}

fn is_noperm(result: &Result<redis::Value, RedisError>) -> bool {
    matches!(result, Err(error) if server_errors::is_noperm(error))
}

/// Tries every command of `set`. Leaves the connection unusable for anything else (a
/// transaction may be open if `DISCARD` was denied): call it last, then drop the connection.
pub async fn probe_all(conn: &mut MultiplexedConnection, set: &ProbeSet) -> Vec<Probe> {
    let multi = cmd(&["MULTI"]).query_async::<redis::Value>(conn).await;
    let in_transaction = multi.is_ok();
    let mut probes = Vec::new();
    for spec in &set.specs {
        let outcome = if in_transaction {
            classify(spec.queued.query_async(conn).await, true)
        } else {
            // `COUNT 0` is refused by the module after the ACL check: any error but NOPERM
            // means allowed.
            let result = spec.direct.query_async(conn).await;
            let refused_argument = result.is_err() && !is_noperm(&result);
            classify(result, refused_argument && spec.name.ends_with(".NEXT"))
        };
        probes.push(Probe {
            name: spec.name,
            grant: spec.grant.clone(),
            outcome,
        });
    }
    if in_transaction {
        // If DISCARD is denied, the transaction ends when the connection is dropped.
        let _ = cmd(&["DISCARD"]).query_async::<redis::Value>(conn).await;
    }
    probes
}
