//! What one node says about itself, asked once by `idgen check`: its idgen identity, the
//! INFO sections that matter, its persistence settings, its clock, and the connecting
//! user's permissions.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::server_errors::{is_noperm, is_unknown_command};
use idgen_client::redis::{self, aio::MultiplexedConnection, RedisError};
use idgen_client::NodeIdentity;

use crate::error::CliError;
use crate::info::parse_info;
use crate::permissions::{probe_all, Probe, ProbeSet};
use crate::target::{connect, NodeAddress};

/// A node's answer to `IDGEN.IDENTITY`.
#[derive(Debug, Clone)]
pub enum IdentityAnswer {
    /// The module is loaded; its identity.
    Known(NodeIdentity),
    /// The server does not know the command: no idgen module.
    NotLoaded,
    /// The connecting user may not run it.
    Denied(String),
    /// Any other error.
    Failed(String),
}

/// The node's clock against this machine's, from `TIME`.
#[derive(Debug, Clone, Copy)]
pub struct ClockReading {
    /// The node's time minus this machine's at the middle of the round trip.
    pub offset_ms: i64,
    /// The round trip, which bounds the reading's error.
    pub round_trip_ms: u64,
}

/// Everything `idgen check` learned from one reachable node.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    /// `host:port`.
    pub address: String,
    /// `IDGEN.IDENTITY`.
    pub identity: IdentityAnswer,
    /// `INFO server persistence memory replication cluster idgen`, or why it could not be read.
    pub info: Result<HashMap<String, String>, String>,
    /// `CONFIG GET` of the persistence and eviction settings; `None` without the right to run
    /// `CONFIG` (an @admin command an application user does not have).
    pub config: Option<HashMap<String, String>>,
    /// `TIME`, if the user may run it.
    pub clock: Option<ClockReading>,
    /// The commands an application needs, tried without effect.
    pub permissions: Vec<Probe>,
    /// `CLUSTER INFO`, in a cluster.
    pub cluster_info: Option<Result<HashMap<String, String>, String>>,
}

impl NodeFacts {
    /// `master`, `replica`, or why the role is unknown (INFO could not be read).
    pub fn role(&self) -> &str {
        match self.info.as_ref().ok().and_then(|info| info.get("role")) {
            Some(role) if role == "master" => "master",
            Some(_) => "replica",
            None => "role unknown: the user may not run INFO",
        }
    }

    /// A field of the node's INFO.
    pub fn info_field(&self, field: &str) -> Option<&str> {
        self.info.as_ref().ok()?.get(field).map(String::as_str)
    }
}

fn describe(error: &RedisError) -> String {
    error.to_string()
}

/// Asks one node everything; `Err` when it cannot be reached or is not Redis.
pub async fn gather(
    node: &NodeAddress,
    timeout: Duration,
    probes: &ProbeSet,
    in_cluster: bool,
) -> Result<NodeFacts, CliError> {
    let address = node.address.clone();
    let mut conn = connect(&node.info, timeout).await?;
    // A first command proves it speaks Redis (and that the credentials work).
    ping(&mut conn, &address).await?;
    let identity = identity(&mut conn).await;
    let info = redis::cmd("INFO")
        .arg(&["server", "persistence", "memory", "replication", "idgen"])
        .query_async::<String>(&mut conn)
        .await
        .map(|text| parse_info(&text))
        .map_err(|e| describe(&e));
    let config = config(&mut conn).await;
    let clock = clock(&mut conn).await;
    let cluster_info = if in_cluster {
        Some(
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async::<String>(&mut conn)
                .await
                .map(|text| parse_info(&text))
                .map_err(|e| describe(&e)),
        )
    } else {
        None
    };
    // Last: it may leave a transaction open, which ends when the connection is dropped.
    let permissions = probe_all(&mut conn, probes).await;
    Ok(NodeFacts {
        address,
        identity,
        info,
        config,
        clock,
        permissions,
        cluster_info,
    })
}

async fn ping(conn: &mut MultiplexedConnection, address: &str) -> Result<(), CliError> {
    match redis::cmd("PING").query_async::<String>(conn).await {
        Ok(_) => Ok(()),
        // A user without +ping still reached a Redis server that checked its ACL.
        Err(error) if is_noperm(&error) => Ok(()),
        Err(error) => Err(crate::error::from_redis(address, &error)),
    }
}

async fn identity(conn: &mut MultiplexedConnection) -> IdentityAnswer {
    let reply = idgen_client::commands::build::idgen_identity()
        .query_async::<HashMap<String, String>>(conn)
        .await;
    match reply {
        Ok(fields) => match NodeIdentity::from_fields("", &fields) {
            Ok(identity) => IdentityAnswer::Known(identity),
            Err(error) => IdentityAnswer::Failed(error.to_string()),
        },
        Err(error) if is_noperm(&error) => IdentityAnswer::Denied(describe(&error)),
        Err(error) if is_unknown_command(&error) => IdentityAnswer::NotLoaded,
        Err(error) => IdentityAnswer::Failed(describe(&error)),
    }
}

async fn config(conn: &mut MultiplexedConnection) -> Option<HashMap<String, String>> {
    redis::cmd("CONFIG")
        .arg(&[
            "GET",
            "appendonly",
            "appendfsync",
            "save",
            "maxmemory-policy",
        ])
        .query_async::<HashMap<String, String>>(conn)
        .await
        .ok()
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

async fn clock(conn: &mut MultiplexedConnection) -> Option<ClockReading> {
    let before = now_ms();
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.ok()?;
    let after = now_ms();
    let server = seconds as f64 * 1000.0 + micros as f64 / 1000.0;
    Some(ClockReading {
        offset_ms: (server - (before + after) / 2.0).round() as i64,
        round_trip_ms: (after - before).max(0.0).ceil() as u64,
    })
}
