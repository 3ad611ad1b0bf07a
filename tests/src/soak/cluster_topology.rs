//! The Cluster deployment of a soak: three masters and three replicas, each its own offset,
//! created with `redis-cli --cluster create`; the nemesis adds `CLUSTER FAILOVER` and slot
//! moves by MIGRATE under load.

use std::process::Command;
use std::time::{Duration, Instant};

use super::deployment::{Network, Node, Nodes};
use super::nemesis::Topology;
use crate::cluster::NodeInfo as ClusterNode;

/// The cluster topology as the nemesis sees it.
pub struct ClusterTopology {
    keys: Vec<String>,
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
    let mut conn = nodes[index]
        .lock()
        .unwrap()
        .conn()
        .map_err(|e| e.to_string())?;
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(&mut conn)
        .map_err(|e| e.to_string())
}

/// How long a step of a slot move is tried again while its node is cut off or stopped.
const MOVE_STEP_FOR: Duration = Duration::from_secs(30);

/// [`query`], tried again every 200 ms for [`MOVE_STEP_FOR`]: a step of a slot move must
/// not be skipped because its node is partitioned or paused right now (faults last at most
/// a few seconds), or the slot is left half moved.
fn query_until_answered<T: redis::FromRedisValue>(
    nodes: &Nodes,
    index: usize,
    args: &[&str],
) -> Result<T, String> {
    let deadline = Instant::now() + MOVE_STEP_FOR;
    loop {
        match query(nodes, index, args) {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "{} failed for {MOVE_STEP_FOR:?}: {e}",
                    args.join(" ")
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
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
        match move_slot_of(nodes, &key, pick) {
            Ok(done) => done,
            Err(e) => format!("slot of {key} not moved: {e}"),
        }
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

/// Moves the slot of `key` from its master to another one: IMPORTING/MIGRATING, MIGRATE of
/// its keys in batches while the clients keep calling, then SETSLOT NODE on every master.
fn move_slot_of(nodes: &Nodes, key: &str, pick: u64) -> Result<String, String> {
    let listed = cluster_nodes(nodes).ok_or("no node answers CLUSTER NODES")?;
    let slot: u16 = query(nodes, 0, &["CLUSTER", "KEYSLOT", key])
        .or_else(|_| query(nodes, 1, &["CLUSTER", "KEYSLOT", key]))?;
    let masters: Vec<&ClusterNode> = listed.iter().filter(|n| n.master && !n.failed).collect();
    // The owner: the master that does not answer MOVED for the key.
    let source = masters
        .iter()
        .copied()
        .find(|m| {
            index_of(nodes, m.port).is_some_and(|i| {
                query::<redis::Value>(nodes, i, &["TYPE", key])
                    .is_ok_and(|v| !matches!(v, redis::Value::Nil))
            })
        })
        .ok_or("no master owns the slot")?;
    let others: Vec<&&ClusterNode> = masters.iter().filter(|m| m.id != source.id).collect();
    if others.is_empty() {
        return Err("no other master".into());
    }
    let target = others[pick as usize % others.len()];
    let (s, t) = (
        index_of(nodes, source.port).ok_or("source")?,
        index_of(nodes, target.port).ok_or("target")?,
    );
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
    let label = |i: usize| nodes[i].lock().unwrap().label.clone();
    Ok(format!(
        "slot {slot} ({key}, {moved} keys) moved from {} to {} by MIGRATE",
        label(s),
        label(t)
    ))
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
    let topology = ClusterTopology { keys: keys() };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !topology.healed(&nodes) {
        if Instant::now() > deadline {
            return Err("the cluster did not become healthy in 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok((nodes, topology))
}
