//! The Sentinel deployment of a soak: three data nodes (a master and two replicas, each its
//! own offset) and three sentinels.

use super::deployment::{Network, Node, Nodes, Sentinels};
use super::nemesis::Topology;

/// The Sentinel topology as the nemesis sees it.
pub struct SentinelTopology {
    /// The sentinels.
    pub sentinels: Sentinels,
}

impl SentinelTopology {
    fn named_master(&self, nodes: &Nodes) -> Option<usize> {
        let named = self.sentinels.named_masters();
        let port = named.iter().flatten().next()?;
        nodes.iter().position(|n| n.lock().unwrap().port == *port)
    }
}

impl Topology for SentinelTopology {
    fn master(&self, nodes: &Nodes, _pick: u64) -> Option<usize> {
        self.named_master(nodes)
    }

    fn failover(&self, _nodes: &Nodes, pick: u64) -> String {
        match self.sentinels.failover(pick) {
            Ok(()) => "SENTINEL FAILOVER started".into(),
            Err(refusal) => format!("SENTINEL FAILOVER refused: {refusal}"),
        }
    }

    fn healed(&self, nodes: &Nodes) -> bool {
        let named = self.sentinels.named_masters();
        let Some(Some(port)) = named.first() else {
            return false;
        };
        if !named.iter().all(|n| n == &Some(*port)) {
            return false;
        }
        nodes.iter().all(|node| {
            let node = node.lock().unwrap();
            let role = node.role();
            if node.port == *port {
                role.as_deref() == Some("master")
            } else {
                role.as_deref() == Some("slave")
                    && node.info("replication", "master_link_status").as_deref() == Some("up")
            }
        })
    }
}

/// Starts three nodes (`n0` master, `n1` and `n2` its replicas) with `step`, these offsets
/// and `extra_config` lines, and three sentinels; returns when the sentinels know both replicas.
pub fn start(
    network: &Network,
    run_dir: &std::path::Path,
    step: u64,
    offsets: [u64; 3],
    extra_config: &str,
) -> Result<(Nodes, SentinelTopology), String> {
    let master_line = format!("replicaof {} {}\n", network.node_host(0), network.base_port);
    let mut nodes = Vec::new();
    for (index, offset) in offsets.into_iter().enumerate() {
        let extra = if index == 0 {
            extra_config.to_string()
        } else {
            format!("{extra_config}{master_line}")
        };
        let mut node = Node::new(network, index, run_dir, step, offset, &extra);
        node.start()?;
        nodes.push(node);
    }
    let sentinel_ports = network.base_port + 10..network.base_port + 13;
    let sentinels = Sentinels::start(network, run_dir, sentinel_ports, &nodes[0], 1000)?;
    let nodes: Nodes = nodes.into_iter().map(std::sync::Mutex::new).collect();
    let topology = SentinelTopology { sentinels };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !topology.healed(&nodes) || !topology.sentinels.know_replicas(2) {
        if std::time::Instant::now() > deadline {
            return Err("the Sentinel deployment did not come together in 30 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok((nodes, topology))
}
