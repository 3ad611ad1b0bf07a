//! Where calls go: round-robin with failover over independent nodes (`node_set`), routed by
//! key in a cluster (`cluster`), or to the master Sentinel names (`sentinel`), retrying
//! through a failover.

use redis::{Cmd, FromRedisValue};

use crate::error::Result;
use crate::metrics::Metrics;
use crate::transport::cluster::Cluster;
use crate::transport::node_set::NodeSet;
use crate::transport::sentinel::SentinelMaster;

/// Where calls go.
pub(crate) enum Backend {
    Nodes(NodeSet),
    Cluster(Cluster),
    /// Boxed: its Sentinel client is large beside the other variants.
    Sentinel(Box<SentinelMaster>),
}

impl Backend {
    pub(crate) async fn run<T: FromRedisValue>(&self, cmd: &Cmd, metrics: &Metrics) -> Result<T> {
        match self {
            Backend::Nodes(nodes) => nodes.run(cmd, metrics).await,
            Backend::Cluster(cluster) => cluster.run(cmd, metrics).await,
            // Boxed: the Sentinel lookup's future type is deep enough that, inlined into
            // every caller's future, it overflows rustc's query depth limit in applications.
            Backend::Sentinel(master) => Box::pin(master.run(cmd, metrics)).await,
        }
    }
}
