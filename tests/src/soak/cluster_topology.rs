//! The Cluster deployment of a soak: three masters and three replicas, each its own offset,
//! created with `redis-cli --cluster create`; the nemesis adds `CLUSTER FAILOVER` and slot
//! moves under load: by MIGRATE, or — on servers with an atomic slot migration of their
//! own (Redis 8.4+'s `CLUSTER MIGRATION`, Valkey 9's `CLUSTER MIGRATESLOTS`) — half the
//! time by that.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::deployment::{Network, Node, Nodes};
use super::nemesis::Topology;
use crate::cluster::NodeInfo as ClusterNode;

/// The cluster topology as the nemesis sees it.
pub struct ClusterTopology {
    keys: Vec<String>,
    /// The server's own atomic slot migration, if it has one (asked at start).
    atomic: Option<AtomicMigration>,
    /// How the slot moves ended, by the way they were made.
    moves: Mutex<BTreeMap<(&'static str, Ended), usize>>,
}

/// A server's own atomic slot migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicMigration {
    /// Redis 8.4+: `CLUSTER MIGRATION IMPORT` sent to the target, which returns a task id
    /// (`CLUSTER MIGRATION STATUS ID`, `CANCEL ID`).
    Redis,
    /// Valkey 9+: `CLUSTER MIGRATESLOTS` sent to the source (`CLUSTER GETSLOTMIGRATIONS`,
    /// `CANCELSLOTMIGRATIONS`).
    Valkey,
}

impl AtomicMigration {
    /// The one the server whose `INFO server` is `info` has, if any.
    pub fn of_server(info: &str) -> Option<AtomicMigration> {
        let version = |field: &str| -> Option<(u32, u32)> {
            let text = crate::info_line(info, field)?;
            let mut parts = text.split('.').map(|part| part.parse::<u32>().ok());
            Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
        };
        if crate::info_line(info, "server_name").as_deref() == Some("valkey") {
            version("valkey_version")
                .filter(|&v| v >= (9, 0))
                .map(|_| AtomicMigration::Valkey)
        } else {
            version("redis_version")
                .filter(|&v| v >= (8, 4))
                .map(|_| AtomicMigration::Redis)
        }
    }

    /// The command's name, for the log and the summary.
    pub fn name(self) -> &'static str {
        match self {
            AtomicMigration::Redis => "CLUSTER MIGRATION",
            AtomicMigration::Valkey => "CLUSTER MIGRATESLOTS",
        }
    }
}

/// How a slot move ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ended {
    /// The target owns the slot.
    Moved,
    /// An atomic migration failed, was cancelled, or was forgotten by a restarted node: the
    /// server keeps the slot on the source.
    Stayed,
    /// Refused or given up before the end (a MIGRATE move may be left half done).
    NotMoved,
}

impl Ended {
    fn text(self) -> &'static str {
        match self {
            Ended::Moved => "moved",
            Ended::Stayed => "failed or cancelled (the slot stayed)",
            Ended::NotMoved => "not moved",
        }
    }
}

/// The soak's keys (`soak:0`…; the clients add `:sf` and `:seg`): enough that every
/// master holds some.
pub fn keys() -> Vec<String> {
    (0..12).map(|i| format!("soak:{i}")).collect()
}

fn cluster_nodes(nodes: &Nodes) -> Option<Vec<ClusterNode>> {
    nodes.iter().find_map(|node| {
        let node = node.lock().unwrap();
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut node.conn().ok()?)
            .ok()?;
        Some(text.lines().filter_map(ClusterNode::parse).collect())
    })
}

fn index_of(nodes: &Nodes, port: u16) -> Option<usize> {
    nodes.iter().position(|n| n.lock().unwrap().port == port)
}

fn query<T: redis::FromRedisValue>(
    nodes: &Nodes,
    index: usize,
    args: &[&str],
) -> Result<T, String> {
    query_once(nodes, index, args).map_err(|e| e.to_string())
}

fn query_once<T: redis::FromRedisValue>(
    nodes: &Nodes,
    index: usize,
    args: &[&str],
) -> redis::RedisResult<T> {
    let conn = nodes[index].lock().unwrap().conn();
    conn.and_then(|mut conn| redis::cmd(args[0]).arg(&args[1..]).query(&mut conn))
}

/// [`query`], tried again every 200 ms for [`MOVE_STEP_FOR`] while `again` says an error is
/// worth it; the last error otherwise.
fn query_retried<T: redis::FromRedisValue>(
    nodes: &Nodes,
    index: usize,
    args: &[&str],
    again: fn(&redis::RedisError) -> bool,
) -> Result<T, String> {
    let deadline = Instant::now() + MOVE_STEP_FOR;
    loop {
        match query_once(nodes, index, args) {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() < deadline && again(&e) => {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(e) => return Err(format!("{}: {e}", args.join(" "))),
        }
    }
}

/// How long a step of a slot move is tried again while its node is cut off or stopped.
const MOVE_STEP_FOR: Duration = Duration::from_secs(30);

/// How long an atomic migration may run before the soak cancels it (one for a few keys
/// takes milliseconds; faults last at most a few seconds).
const ATOMIC_MOVE_FOR: Duration = Duration::from_secs(20);

/// [`query`], tried again every 200 ms for [`MOVE_STEP_FOR`] while the node cannot be
/// reached or is loading its data; a refusal is returned at once.
fn query_while_unreachable<T: redis::FromRedisValue>(
    nodes: &Nodes,
    index: usize,
    args: &[&str],
) -> Result<T, String> {
    query_retried(nodes, index, args, |e| {
        e.is_io_error()
            || e.is_timeout()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || e.code() == Some("LOADING")
    })
}

/// The fields of one entry of a status reply (a flat list of names and values in RESP2, a
/// map in RESP3), as text.
fn fields(entry: &redis::Value) -> BTreeMap<String, String> {
    let text = |value: &redis::Value| redis::from_redis_value::<String>(value.clone()).ok();
    let pairs: Vec<(&redis::Value, &redis::Value)> = match entry {
        redis::Value::Array(items) => items.chunks_exact(2).map(|p| (&p[0], &p[1])).collect(),
        redis::Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        _ => Vec::new(),
    };
    pairs
        .into_iter()
        .filter_map(|(name, value)| Some((text(name)?, text(value).unwrap_or_default())))
        .collect()
}

/// The entries of a reply listing several (`CLUSTER GETSLOTMIGRATIONS`), or of one
/// (`CLUSTER MIGRATION STATUS ID`, which may list its one entry directly).
fn entries(reply: &redis::Value) -> Vec<BTreeMap<String, String>> {
    match reply {
        redis::Value::Array(items)
            if items
                .iter()
                .all(|item| matches!(item, redis::Value::Array(_) | redis::Value::Map(_))) =>
        {
            items.iter().map(fields).collect()
        }
        one => {
            let one = fields(one);
            if one.is_empty() {
                Vec::new()
            } else {
                vec![one]
            }
        }
    }
}

/// [`query`], tried again every 200 ms for [`MOVE_STEP_FOR`]: a step of a slot move must
/// not be skipped because its node is partitioned or paused right now (faults last at most
/// a few seconds), or the slot is left half moved.
fn query_until_answered<T: redis::FromRedisValue>(
    nodes: &Nodes,
    index: usize,
    args: &[&str],
) -> Result<T, String> {
    query_retried(nodes, index, args, |_| true)
}

impl Topology for ClusterTopology {
    fn master(&self, nodes: &Nodes, pick: u64) -> Option<usize> {
        let masters: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].lock().unwrap().role().as_deref() == Some("master"))
            .collect();
        (!masters.is_empty()).then(|| masters[pick as usize % masters.len()])
    }

    fn failover(&self, nodes: &Nodes, pick: u64) -> String {
        let replicas: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].lock().unwrap().role().as_deref() == Some("slave"))
            .collect();
        if replicas.is_empty() {
            return "no replica to fail over to".into();
        }
        let replica = replicas[pick as usize % replicas.len()];
        let label = nodes[replica].lock().unwrap().label.clone();
        match query::<()>(nodes, replica, &["CLUSTER", "FAILOVER"]) {
            Ok(()) => format!("CLUSTER FAILOVER on {label}"),
            Err(e) => format!("CLUSTER FAILOVER on {label} refused: {e}"),
        }
    }

    fn move_slot(&self, nodes: &Nodes, pick: u64) -> String {
        let key = format!(
            "{}:{}",
            self.keys[pick as usize % self.keys.len()],
            if pick & 1 == 0 { "sf" } else { "seg" }
        );
        // Half the moves (a bit of the seed's pick, so a seed replays) use the server's own
        // atomic migration where it has one.
        let atomic = self.atomic.filter(|_| (pick >> 40) & 1 == 1);
        let how = atomic.map_or("MIGRATE", AtomicMigration::name);
        let (ended, text) = match move_slot_of(nodes, &key, pick, atomic) {
            Ok(done) => done,
            Err(e) => (
                Ended::NotMoved,
                format!("slot of {key} not moved by {how}: {e}"),
            ),
        };
        *self.moves.lock().unwrap().entry((how, ended)).or_default() += 1;
        text
    }

    fn summary(&self) -> Option<String> {
        let moves = self.moves.lock().unwrap();
        let kinds = match self.atomic {
            Some(atomic) => format!("MIGRATE or {} (half each)", atomic.name()),
            None => "MIGRATE only (the server has no atomic slot migration)".into(),
        };
        let counted: Vec<String> = moves
            .iter()
            .map(|((how, ended), count)| format!("{count} by {how} {}", ended.text()))
            .collect();
        Some(format!(
            "slot moves by {kinds}: {}",
            if counted.is_empty() {
                "none".to_string()
            } else {
                counted.join(", ")
            }
        ))
    }

    fn healed(&self, nodes: &Nodes) -> bool {
        let all_ok = (0..nodes.len()).all(|i| {
            query::<String>(nodes, i, &["CLUSTER", "INFO"])
                .is_ok_and(|info| info.contains("cluster_state:ok"))
        });
        all_ok
            && cluster_nodes(nodes).is_some_and(|listed| {
                listed.len() == nodes.len()
                    && listed.iter().all(|n| !n.failed)
                    && listed.iter().filter(|n| n.master).count() == 3
            })
    }
}

/// Moves the slot of `key` from its master to another one, with `atomic` if given, else:
/// IMPORTING/MIGRATING, MIGRATE of its keys in batches while the clients keep calling, then
/// SETSLOT NODE on every master.
fn move_slot_of(
    nodes: &Nodes,
    key: &str,
    pick: u64,
    atomic: Option<AtomicMigration>,
) -> Result<(Ended, String), String> {
    let slot: u16 = query(nodes, 0, &["CLUSTER", "KEYSLOT", key])
        .or_else(|_| query(nodes, 1, &["CLUSTER", "KEYSLOT", key]))?;
    // The owner: the master that does not answer MOVED for the key; looked for again while
    // none answers (the owner cut off or stopped right now, or being failed over).
    let deadline = Instant::now() + MOVE_STEP_FOR;
    let (masters, source) = loop {
        let masters: Vec<ClusterNode> = cluster_nodes(nodes)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.master && !n.failed)
            .collect();
        let owner = masters.iter().position(|m| {
            index_of(nodes, m.port).is_some_and(|i| {
                query::<redis::Value>(nodes, i, &["TYPE", key])
                    .is_ok_and(|v| !matches!(v, redis::Value::Nil))
            })
        });
        match owner {
            Some(owner) => {
                let source = masters[owner].clone();
                break (masters, source);
            }
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            None => return Err(format!("no master owned the slot for {MOVE_STEP_FOR:?}")),
        }
    };
    let source = &source;
    let others: Vec<&ClusterNode> = masters.iter().filter(|m| m.id != source.id).collect();
    if others.is_empty() {
        return Err("no other master".into());
    }
    let target = others[pick as usize % others.len()];
    let (s, t) = (
        index_of(nodes, source.port).ok_or("source")?,
        index_of(nodes, target.port).ok_or("target")?,
    );
    let label = |i: usize| nodes[i].lock().unwrap().label.clone();
    if let Some(atomic) = atomic {
        let (ended, how) = match atomic {
            AtomicMigration::Redis => import_by_cluster_migration(nodes, t, slot)?,
            AtomicMigration::Valkey => migrate_by_migrateslots(nodes, s, &target.id, slot)?,
        };
        let verb = if ended == Ended::Moved {
            "moved"
        } else {
            "not moved"
        };
        return Ok((
            ended,
            format!(
                "slot {slot} ({key}) {verb} from {} to {} by {}: {how}",
                label(s),
                label(t),
                atomic.name()
            ),
        ));
    }
    let slot_text = slot.to_string();
    // Nothing is changed yet if the first step fails. After it, every step is tried until
    // its node answers: a move given up half way leaves the slot IMPORTING or MIGRATING for
    // the rest of the soak; if the source cannot be set MIGRATING (a failover demoted it),
    // the target is set back to STABLE.
    query::<()>(
        nodes,
        t,
        &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &source.id],
    )?;
    if let Err(e) = query_until_answered::<()>(
        nodes,
        s,
        &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &target.id],
    ) {
        query_until_answered::<()>(nodes, t, &["CLUSTER", "SETSLOT", &slot_text, "STABLE"])?;
        return Err(e);
    }
    let (host, port) = {
        let node = nodes[t].lock().unwrap();
        (node.host.clone(), node.port.to_string())
    };
    let mut moved = 0;
    loop {
        let keys: Vec<String> =
            query_until_answered(nodes, s, &["CLUSTER", "GETKEYSINSLOT", &slot_text, "100"])?;
        if keys.is_empty() {
            break;
        }
        let mut args = vec!["MIGRATE", &host, &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        query_until_answered::<()>(nodes, s, &args)?;
        moved += keys.len();
    }
    // The target first, and until it answers (it may be cut off right now): a source that
    // gives the slot away before the target takes it leaves the slot without an owner.
    query_until_answered::<()>(
        nodes,
        t,
        &["CLUSTER", "SETSLOT", &slot_text, "NODE", &target.id],
    )?;
    for i in 0..nodes.len() {
        if i != t && nodes[i].lock().unwrap().role().as_deref() == Some("master") {
            let _ = query::<()>(
                nodes,
                i,
                &["CLUSTER", "SETSLOT", &slot_text, "NODE", &target.id],
            );
        }
    }
    Ok((
        Ended::Moved,
        format!(
            "slot {slot} ({key}, {moved} keys) moved from {} to {} by MIGRATE",
            label(s),
            label(t)
        ),
    ))
}

/// How a server reports one atomic slot migration: whom to ask, how to find the migration
/// in the reply, the states that end it, and how to cancel it.
struct Migration<'a> {
    /// The node that runs it (Redis: the target; Valkey: the source).
    node: usize,
    /// The migration as stories name it ("task ID", "job").
    name: String,
    /// Which node `node` is, for the story of a migration it no longer knows.
    node_is: &'a str,
    status: &'a [&'a str],
    find: &'a dyn Fn(&redis::Value) -> Option<BTreeMap<String, String>>,
    /// The state of a migration that moved the slot.
    completed: &'a str,
    /// The states of one that ended without moving it.
    failed: [&'a str; 2],
    /// The field that says why it failed.
    reason: &'a str,
    cancel: &'a [&'a str],
}

/// Follows `migration` until it ends; cut off or stopped nodes are asked again, and a
/// migration still running after [`ATOMIC_MOVE_FOR`] is cancelled. How it ended, and its
/// story.
fn follow_to_its_end(nodes: &Nodes, migration: Migration<'_>) -> Result<(Ended, String), String> {
    let Migration { node, name, .. } = &migration;
    let started = Instant::now();
    let mut cancelled = None;
    loop {
        if started.elapsed() > ATOMIC_MOVE_FOR + MOVE_STEP_FOR {
            return Err(format!(
                "{name}: no end seen{}",
                cancelled.unwrap_or_default()
            ));
        }
        // An unanswered status (the node cut off, stopped or restarting) is asked again.
        if let Ok(reply) = query::<redis::Value>(nodes, *node, migration.status) {
            let found = (migration.find)(&reply);
            let state = found.as_ref().and_then(|found| found.get("state").cloned());
            let took = format!("{:.1} s", started.elapsed().as_secs_f64());
            let after = cancelled.as_deref().unwrap_or("");
            match state.as_deref() {
                Some(state) if state == migration.completed => {
                    return Ok((Ended::Moved, format!("{name} completed in {took}{after}")));
                }
                Some(state) if migration.failed.contains(&state) => {
                    let reason = found
                        .and_then(|found| found.get(migration.reason).cloned())
                        .filter(|reason| !reason.is_empty())
                        .map(|reason| format!(" ({reason})"))
                        .unwrap_or_default();
                    let story = format!("{name} {state} after {took}{reason}{after}");
                    return Ok((Ended::Stayed, story));
                }
                None => {
                    let story = format!(
                        "{name} unknown to {} after {took} (restarted or failed over){after}",
                        migration.node_is
                    );
                    return Ok((Ended::Stayed, story));
                }
                Some(_) => {}
            }
        }
        if cancelled.is_none() && started.elapsed() > ATOMIC_MOVE_FOR {
            let reply = query_until_answered::<redis::Value>(nodes, *node, migration.cancel);
            cancelled = Some(format!(
                ", cancelled by the soak after {ATOMIC_MOVE_FOR:?} ({reply:?})"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Redis 8.4+: `CLUSTER MIGRATION IMPORT slot slot` on the target (node `t`), followed to its
/// end. How it ended, and the task's story.
fn import_by_cluster_migration(
    nodes: &Nodes,
    t: usize,
    slot: u16,
) -> Result<(Ended, String), String> {
    let slot_text = slot.to_string();
    let id: String = query_while_unreachable(
        nodes,
        t,
        &["CLUSTER", "MIGRATION", "IMPORT", &slot_text, &slot_text],
    )?;
    follow_to_its_end(
        nodes,
        Migration {
            node: t,
            name: format!("task {id}"),
            node_is: "the target",
            status: &["CLUSTER", "MIGRATION", "STATUS", "ID", &id],
            find: &|reply| entries(reply).into_iter().next(),
            completed: "completed",
            failed: ["failed", "canceled"],
            reason: "last_error",
            cancel: &["CLUSTER", "MIGRATION", "CANCEL", "ID", &id],
        },
    )
}

/// Valkey 9+: `CLUSTER MIGRATESLOTS SLOTSRANGE slot slot NODE target` on the source (node
/// `s`), then the new job followed to its end. How it ended, and the job's story.
fn migrate_by_migrateslots(
    nodes: &Nodes,
    s: usize,
    target_id: &str,
    slot: u16,
) -> Result<(Ended, String), String> {
    let slot_text = slot.to_string();
    let range = format!("{slot}-{slot}");
    let jobs = |reply: &redis::Value| -> Vec<BTreeMap<String, String>> {
        entries(reply)
            .into_iter()
            .filter(|job| job.get("slot_ranges") == Some(&range))
            .collect()
    };
    let listed: redis::Value =
        query_while_unreachable(nodes, s, &["CLUSTER", "GETSLOTMIGRATIONS"])?;
    let before: Vec<String> = jobs(&listed)
        .into_iter()
        .filter_map(|job| job.get("name").cloned())
        .collect();
    query_while_unreachable::<()>(
        nodes,
        s,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &slot_text,
            &slot_text,
            "NODE",
            target_id,
        ],
    )?;
    let new_job = |reply: &redis::Value| {
        jobs(reply)
            .into_iter()
            .find(|job| job.get("name").is_some_and(|name| !before.contains(name)))
    };
    follow_to_its_end(
        nodes,
        Migration {
            node: s,
            name: "job".into(),
            node_is: "the source",
            status: &["CLUSTER", "GETSLOTMIGRATIONS"],
            find: &new_job,
            // Valkey's ends: success, failed, cancelled (its in-progress states include
            // failover-requested and failover-granted).
            completed: "success",
            failed: ["failed", "cancelled"],
            reason: "message",
            cancel: &["CLUSTER", "CANCELSLOTMIGRATIONS"],
        },
    )
}

/// Starts six cluster nodes with `step` and `offsets` (and `extra_config` lines) and creates
/// the cluster (three masters, one replica each); returns when every node says the cluster
/// is ok.
pub fn start(
    network: &Network,
    run_dir: &std::path::Path,
    step: u64,
    offsets: &[u64],
    extra_config: &str,
) -> Result<(Nodes, ClusterTopology), String> {
    let extra = format!(
        "cluster-enabled yes\ncluster-config-file nodes.conf\n\
         cluster-node-timeout 1500\ncluster-replica-validity-factor 0\n{extra_config}"
    );
    let mut nodes = Vec::new();
    for (index, &offset) in offsets.iter().enumerate() {
        let mut node = Node::new(network, index, run_dir, step, offset, &extra);
        node.start()?;
        nodes.push(node);
    }
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}:{}", n.host, n.port))
        .collect();
    let output = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addresses)
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .output()
        .map_err(|e| format!("redis-cli: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "redis-cli --cluster create failed:\n{}",
            String::from_utf8_lossy(&output.stdout)
        ));
    }
    let nodes: Nodes = nodes.into_iter().map(std::sync::Mutex::new).collect();
    let info: String = query(&nodes, 0, &["INFO", "server"])?;
    let topology = ClusterTopology {
        keys: keys(),
        atomic: AtomicMigration::of_server(&info),
        moves: Mutex::new(BTreeMap::new()),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !topology.healed(&nodes) {
        if Instant::now() > deadline {
            return Err("the cluster did not become healthy in 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok((nodes, topology))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn the_atomic_migration_is_the_servers_own_from_its_version() {
        let redis = |version: &str| {
            format!("# Server\r\nredis_version:{version}\r\nredis_mode:cluster\r\n")
        };
        let valkey = |version: &str| {
            format!("# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:{version}\r\n")
        };
        assert_eq!(AtomicMigration::of_server(&redis("7.0.15")), None);
        assert_eq!(AtomicMigration::of_server(&redis("8.2.3")), None);
        assert_eq!(
            AtomicMigration::of_server(&redis("8.4.0")),
            Some(AtomicMigration::Redis)
        );
        assert_eq!(
            AtomicMigration::of_server(&redis("8.6.2")),
            Some(AtomicMigration::Redis)
        );
        assert_eq!(
            AtomicMigration::of_server(&redis("9.0.0")),
            Some(AtomicMigration::Redis)
        );
        assert_eq!(AtomicMigration::of_server(&valkey("8.1.8")), None);
        assert_eq!(
            AtomicMigration::of_server(&valkey("9.1.2")),
            Some(AtomicMigration::Valkey)
        );
        assert_eq!(AtomicMigration::of_server(""), None);
    }

    #[test]
    fn status_replies_are_read_as_one_or_several_entries() {
        let task = Value::Array(vec![
            bulk("id"),
            bulk("81c1"),
            bulk("state"),
            bulk("completed"),
            bulk("retries"),
            Value::Int(0),
        ]);
        // CLUSTER MIGRATION STATUS ID: the task's fields directly, or inside a list.
        let direct = entries(&task);
        assert_eq!(direct.len(), 1);
        assert_eq!(direct[0]["state"], "completed");
        assert_eq!(direct[0]["retries"], "0");
        assert_eq!(entries(&Value::Array(vec![task.clone()])), direct);
        // An unknown id: an empty list, no entry.
        assert!(entries(&Value::Array(Vec::new())).is_empty());
        // CLUSTER GETSLOTMIGRATIONS: a list of jobs, in RESP2 or RESP3.
        let job = |name: &str, state: &str| {
            Value::Map(vec![
                (bulk("name"), bulk(name)),
                (bulk("slot_ranges"), bulk("100-100")),
                (bulk("state"), bulk(state)),
            ])
        };
        let jobs = entries(&Value::Array(vec![job("a", "success"), job("b", "failed")]));
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            (jobs[1]["name"].as_str(), jobs[1]["state"].as_str()),
            ("b", "failed")
        );
    }
}
