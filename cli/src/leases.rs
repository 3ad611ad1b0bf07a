//! `idgen leases POOL`: the worker ids a lease pool handed out, on every node that holds
//! the pool (`LEASE.LIST`), and what `idgen decode` adds for an ID of a leased worker id.

use std::collections::HashMap;
use std::time::Duration;

use idgen_client::redis::{self, Value};
use idgen_core::utc::format_unix_ms;
use serde_json::json;

use crate::args::LeasesArgs;
use crate::error::{from_redis, CliError, EXIT_OK};
use crate::target::{connect, Target};

/// One worker id as `LEASE.LIST` shows it, with the node that answered.
struct Row {
    node: String,
    fields: HashMap<String, Value>,
}

impl Row {
    fn int(&self, field: &str) -> Option<i64> {
        match self.fields.get(field) {
            Some(Value::Int(value)) => Some(*value),
            _ => None,
        }
    }

    fn text(&self, field: &str) -> Option<String> {
        match self.fields.get(field) {
            Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
            Some(Value::SimpleString(text)) => Some(text.clone()),
            _ => None,
        }
    }

    fn time(&self, field: &str) -> String {
        self.int(field)
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or_else(|| "-".to_string(), format_unix_ms)
    }
}

/// Lists the pool's leases on every node that has it (in a cluster, the master holding its
/// slot; the others answer `MOVED` and are skipped).
pub async fn run(target: &Target, args: &LeasesArgs, timeout: Duration) -> Result<u8, CliError> {
    let mut rows = Vec::new();
    let mut reached = 0;
    let mut last_error = None;
    for node in target.discover(timeout).await? {
        let mut conn = match connect(&node.info, timeout).await {
            Ok(conn) => conn,
            Err(error) => {
                last_error = Some(error);
                continue;
            }
        };
        let reply: redis::RedisResult<Vec<HashMap<String, Value>>> =
            redis::cmd(idgen_core::commands::LEASE_LIST.name())
                .arg(&args.pool)
                .query_async(&mut conn)
                .await;
        match reply {
            Ok(leases) => {
                reached += 1;
                rows.extend(leases.into_iter().map(|fields| Row {
                    node: node.address.clone(),
                    fields,
                }));
            }
            Err(error) if error.code() == Some("MOVED") => reached += 1,
            Err(error) => last_error = Some(from_redis(&node.address, &error)),
        }
    }
    if reached == 0 {
        return Err(last_error.unwrap_or_else(|| CliError::unreachable("no node to ask")));
    }
    if args.json {
        let leases: Vec<_> = rows
            .iter()
            .map(|row| {
                json!({
                    "node": row.node,
                    "worker": row.int("worker"),
                    "holder": row.text("holder"),
                    "state": row.text("state"),
                    "start_unix_ms": row.int("start_unix_ms"),
                    "end_unix_ms": row.int("end_unix_ms"),
                    "fence_unix_ms": row.int("fence_unix_ms"),
                    "renewed_unix_ms": row.int("renewed_unix_ms"),
                    "renewable": row.int("renewable") == Some(1),
                })
            })
            .collect();
        println!("{}", json!({ "pool": args.pool, "leases": leases }));
        return Ok(EXIT_OK);
    }
    if rows.is_empty() {
        println!("pool {}: no worker id leased", args.pool);
        return Ok(EXIT_OK);
    }
    println!(
        "{:<21} {:>6}  {:<9} {:<32} {:<24} {:<24} last renewal",
        "node", "worker", "state", "holder", "window from", "window to"
    );
    for row in &rows {
        println!(
            "{:<21} {:>6}  {:<9} {:<32} {:<24} {:<24} {}",
            row.node,
            row.int("worker").unwrap_or(-1),
            row.text("state").unwrap_or_default(),
            row.text("holder").unwrap_or_else(|| "-".into()),
            row.time("start_unix_ms"),
            row.time("end_unix_ms"),
            row.time("renewed_unix_ms"),
        );
    }
    Ok(EXIT_OK)
}

/// The leased worker id an ID carries, as a node of `target` decodes it (`None` for an ID
/// of `SNOWFLAKE.NEXT`, or when no node says).
pub async fn leased_worker(target: &Target, id: i64, timeout: Duration) -> Option<i64> {
    for node in target.discover(timeout).await.ok()? {
        let Ok(mut conn) = connect(&node.info, timeout).await else {
            continue;
        };
        let reply: redis::RedisResult<HashMap<String, Value>> =
            redis::cmd(idgen_core::commands::SNOWFLAKE_DECODE.name())
                .arg(id)
                .query_async(&mut conn)
                .await;
        if let Ok(fields) = reply {
            return match fields.get("leased_worker") {
                Some(Value::Int(worker)) => Some(*worker),
                _ => None,
            };
        }
    }
    None
}
