//! What a client connects to: one node, independent nodes, a cluster, or a master managed by
//! Sentinel, each given as redis-rs connection info.

use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::{Error, Result};

/// Where the idgen servers are, as redis-rs connection info: a URL (`redis://`, `rediss://`
/// for TLS, `rediss://…/#insecure` to skip certificate checks with the opt-in
/// `tls-rustls-insecure` feature, `redis://user:password@host`),
/// or a [`ConnectionInfo`] built in code. Credentials and TLS settings apply to every node,
/// also to cluster members the client discovers. `Debug` shows no password.
#[derive(Debug, Clone)]
pub enum Topology {
    /// One Redis server (boxed: a `ConnectionInfo` is large beside the other variants).
    Single(Box<ConnectionInfo>),
    /// Several independent masters, each with its own offset. Any node can serve any key;
    /// a node that fails is skipped and tried again later.
    Nodes(Vec<ConnectionInfo>),
    /// A Redis Cluster, given by one or more seed nodes; commands are routed by key, and
    /// every member (masters and replicas) is found through the first seed that answers.
    Cluster(Vec<ConnectionInfo>),
    /// A master and its replicas managed by Redis Sentinel (boxed, like `Single`). Calls
    /// go to the master the sentinels name; when it fails, the client asks them again and
    /// follows the promoted replica.
    Sentinel(Box<SentinelTopology>),
}

/// A deployment managed by Redis Sentinel: the master's name as the sentinels know it
/// (`sentinel monitor <name> …`), the sentinels' addresses, and how to reach the data nodes
/// they name. Built by [`Topology::sentinel`]; `Debug` shows no password.
#[derive(Debug, Clone)]
pub struct SentinelTopology {
    pub(crate) master_name: String,
    pub(crate) sentinels: Vec<ConnectionInfo>,
    pub(crate) data_nodes: ConnectionInfo,
}

impl SentinelTopology {
    /// How to reach the data nodes (the master and replicas the sentinels name): the
    /// credentials, database and TLS of `template`, whose host and port are replaced by
    /// each node's address. Without it, data nodes are reached without credentials and with
    /// the first sentinel's TLS setting (Sentinel's own password is separate from the data
    /// nodes', as in Redis).
    ///
    /// ```
    /// use idgen_client::Topology;
    ///
    /// let topology = Topology::sentinel("ids", ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/"])?
    ///     .data_nodes("redis://app:secret@any-host/")?;
    /// # Ok::<(), idgen_client::Error>(())
    /// ```
    pub fn data_nodes(mut self, template: impl IntoConnectionInfo) -> Result<Self> {
        self.data_nodes = connection_info(template)?;
        Ok(self)
    }
}

impl From<SentinelTopology> for Topology {
    fn from(topology: SentinelTopology) -> Self {
        Topology::Sentinel(Box::new(topology))
    }
}

impl Topology {
    /// One server, from anything redis-rs accepts as connection info.
    ///
    /// ```
    /// let topology = idgen_client::Topology::single("rediss://app:secret@10.0.0.1:6380/")?;
    /// # Ok::<(), idgen_client::Error>(())
    /// ```
    pub fn single(node: impl IntoConnectionInfo) -> Result<Topology> {
        Ok(Topology::Single(Box::new(connection_info(node)?)))
    }

    /// Several independent masters.
    ///
    /// ```
    /// let topology = idgen_client::Topology::nodes(["redis://10.0.0.1/", "redis://10.0.0.2/"])?;
    /// # Ok::<(), idgen_client::Error>(())
    /// ```
    pub fn nodes<T: IntoConnectionInfo>(nodes: impl IntoIterator<Item = T>) -> Result<Topology> {
        Ok(Topology::Nodes(connection_infos(nodes)?))
    }

    /// A Redis Cluster, by seed nodes.
    ///
    /// ```
    /// let topology = idgen_client::Topology::cluster(["redis://:pw@10.0.0.1:7000/"])?;
    /// # Ok::<(), idgen_client::Error>(())
    /// ```
    pub fn cluster<T: IntoConnectionInfo>(seeds: impl IntoIterator<Item = T>) -> Result<Topology> {
        Ok(Topology::Cluster(connection_infos(seeds)?))
    }

    /// A master and replicas managed by Redis Sentinel: the master's name and one or more
    /// sentinels (`user:password@` if the sentinels require it; `rediss://` for TLS). Set
    /// the data nodes' credentials with [`SentinelTopology::data_nodes`].
    ///
    /// ```
    /// let topology = idgen_client::Topology::sentinel("ids", ["redis://10.0.0.1:26379/"])?;
    /// # Ok::<(), idgen_client::Error>(())
    /// ```
    pub fn sentinel<T: IntoConnectionInfo>(
        master_name: impl Into<String>,
        sentinels: impl IntoIterator<Item = T>,
    ) -> Result<SentinelTopology> {
        let sentinels = connection_infos(sentinels)?;
        let Some(first) = sentinels.first() else {
            return Err(Error::InvalidArgument(
                "Topology::sentinel needs at least one sentinel".into(),
            ));
        };
        let data_nodes = first
            .clone()
            .set_redis_settings(RedisConnectionInfo::default());
        Ok(SentinelTopology {
            master_name: master_name.into(),
            sentinels,
            data_nodes,
        })
    }
}

/// Parses one node's connection info; the error says what was wrong with it.
fn connection_info(node: impl IntoConnectionInfo) -> Result<ConnectionInfo> {
    node.into_connection_info()
        .map_err(|error| Error::InvalidArgument(format!("not a usable Redis address: {error}")))
}

fn connection_infos<T: IntoConnectionInfo>(
    nodes: impl IntoIterator<Item = T>,
) -> Result<Vec<ConnectionInfo>> {
    nodes.into_iter().map(connection_info).collect()
}
