//! The client: connects, checks the deployment, and issues IDs.

use std::sync::Arc;

use idgen_core::{DecodedId, SegmentRange};

use crate::backend::{Backend, Cluster, Node, NodeSet};
use crate::cluster_discovery;
use crate::deployment::{check, Deployment};
use crate::error::{Error, Result};
use crate::identity;
use crate::identity_guard::IdentityGuard;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::segment::SegmentBuffer;
use crate::sentinel::SentinelMaster;
use crate::settings::{SegmentOptions, Settings, SnowflakeCacheOptions, Topology};
use crate::snowflake_cache::SnowflakeCache;

/// A pooled, failover-aware client for redis-idgen. Cheap to clone; clones share pools,
/// metrics and the deployment.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("deployment", &self.inner.deployment)
            .field("metrics", &self.inner.metrics.snapshot())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    backend: Backend,
    deployment: Deployment,
    pub(crate) metrics: Metrics,
}

impl Client {
    /// Connects with default [`Settings`] and checks the deployment.
    ///
    /// Needs a tokio runtime (the pools and background refills run on it).
    ///
    /// ```no_run
    /// use idgen_client::{Client, Topology};
    ///
    /// # async fn example() -> idgen_client::Result<()> {
    /// let client = Client::connect(Topology::single("redis://127.0.0.1:6379/")?).await?;
    /// println!("step {}", client.deployment().step);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(topology: impl Into<Topology>) -> Result<Client> {
        Client::connect_with(topology, Settings::default()).await
    }

    /// Connects and checks the deployment: every reachable node (in a cluster, masters and
    /// replicas) must have the module, all must share step and layout, and no two may
    /// share an offset. Unreachable nodes are skipped (and tried again on use); at least
    /// one must answer.
    ///
    /// In `Single`, `Nodes` and `Sentinel` modes each connection opened later checks its
    /// node again: a node restarted with another identity, or first reached later with one
    /// that does not fit, is skipped like a failed node (`tracing` logs why at error level).
    /// Under Sentinel the replicas named after a failover are checked too. In `Cluster`
    /// mode nodes are checked at connect only.
    pub async fn connect_with(topology: impl Into<Topology>, settings: Settings) -> Result<Client> {
        Client::connect_to(topology.into(), settings).await
    }

    #[tracing::instrument(level = "debug", skip(settings))]
    async fn connect_to(topology: Topology, settings: Settings) -> Result<Client> {
        let guard = Arc::new(IdentityGuard::default());
        let (backend, members) = match &topology {
            Topology::Single(node) => {
                let node_set =
                    NodeSet::new(vec![Node::new(node, &settings, guard.clone())?], &settings);
                (Backend::Nodes(node_set), vec![node.as_ref().clone()])
            }
            Topology::Nodes(nodes) => {
                if nodes.is_empty() {
                    return Err(Error::InvalidArgument(
                        "Topology::Nodes needs at least one node".into(),
                    ));
                }
                let pools = nodes
                    .iter()
                    .map(|node| Node::new(node, &settings, guard.clone()))
                    .collect::<Result<_>>()?;
                (
                    Backend::Nodes(NodeSet::new(pools, &settings)),
                    nodes.clone(),
                )
            }
            Topology::Cluster(seeds) => {
                if seeds.is_empty() {
                    return Err(Error::InvalidArgument(
                        "Topology::Cluster needs at least one seed".into(),
                    ));
                }
                let members = cluster_discovery::members(seeds, &settings).await?;
                (Backend::Cluster(Cluster::new(seeds, &settings)?), members)
            }
            Topology::Sentinel(sentinel) => {
                let master = SentinelMaster::new(sentinel, &settings, guard.clone())?;
                let members = master.members().await.map_err(|error| {
                    Error::Deployment(format!(
                        "the sentinels named no reachable master for '{}': {error}",
                        sentinel.master_name
                    ))
                })?;
                master.start_with(&members.master)?;
                let mut nodes = vec![members.master];
                nodes.extend(members.replicas);
                (Backend::Sentinel(Box::new(master)), nodes)
            }
        };
        let mut identities = Vec::new();
        let mut unreachable = Vec::new();
        for member in &members {
            match identity::read(member, &settings).await {
                Ok(identity) => identities.push(identity),
                Err(Error::Transport(error)) => {
                    let address = member.addr().to_string();
                    tracing::warn!(node = %address, %error, "node unreachable at connect; not checked");
                    unreachable.push(address);
                }
                Err(other) => return Err(other),
            }
        }
        if identities.is_empty() {
            return Err(Error::Deployment(format!(
                "no node could be reached to check the deployment (tried {})",
                unreachable.join(", ")
            )));
        }
        let deployment = check(identities)?;
        guard.set(&deployment);
        Ok(Client {
            inner: Arc::new(Inner {
                backend,
                deployment,
                metrics: Metrics::default(),
            }),
        })
    }

    /// The deployment found at connect: step, layout and the nodes checked.
    pub fn deployment(&self) -> &Deployment {
        &self.inner.deployment
    }

    /// A snapshot of the client's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    pub(crate) fn metrics_ref(&self) -> &Metrics {
        &self.inner.metrics
    }

    async fn run<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.inner.backend.run(cmd, &self.inner.metrics).await
    }

    /// One snowflake ID for `key` (`SNOWFLAKE.NEXT key`).
    ///
    /// ```no_run
    /// # async fn example(client: idgen_client::Client) -> idgen_client::Result<()> {
    /// let id = client.next_snowflake("orders").await?;
    /// assert!(id > 0);
    /// # Ok(())
    /// # }
    /// ```
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn next_snowflake(&self, key: &str) -> Result<i64> {
        self.issue_one("SNOWFLAKE.NEXT", key).await
    }

    /// Runs `command key` for one ID and counts it.
    async fn issue_one(&self, command: &str, key: &str) -> Result<i64> {
        let id = self.run(redis::cmd(command).arg(key)).await?;
        Metrics::add(&self.inner.metrics.ids_served, 1);
        Ok(id)
    }

    /// `count` increasing snowflake IDs for `key` in one round trip
    /// (`SNOWFLAKE.NEXT key COUNT count`, 1 to 100,000).
    ///
    /// ```no_run
    /// # async fn example(client: idgen_client::Client) -> idgen_client::Result<()> {
    /// let ids = client.next_snowflakes("orders", 1000).await?;
    /// assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    /// # Ok(())
    /// # }
    /// ```
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn next_snowflakes(&self, key: &str, count: u32) -> Result<Vec<i64>> {
        self.snowflakes(key, count, None).await
    }

    /// Like [`Client::next_snowflakes`], with the shard field set to `shard`.
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn next_snowflakes_in_shard(
        &self,
        key: &str,
        count: u32,
        shard: u32,
    ) -> Result<Vec<i64>> {
        self.snowflakes(key, count, Some(shard)).await
    }

    async fn snowflakes(&self, key: &str, count: u32, shard: Option<u32>) -> Result<Vec<i64>> {
        let ids = self.fetch_snowflakes(key, count, shard).await?;
        Metrics::add(&self.inner.metrics.ids_served, ids.len() as u64);
        Ok(ids)
    }

    /// A batch of snowflake IDs, not yet counted as served (a cache counts them when it
    /// hands them out).
    pub(crate) async fn fetch_snowflakes(
        &self,
        key: &str,
        count: u32,
        shard: Option<u32>,
    ) -> Result<Vec<i64>> {
        if count == 0 {
            return Err(Error::InvalidArgument("count must be at least 1".into()));
        }
        let mut cmd = redis::cmd("SNOWFLAKE.NEXT");
        cmd.arg(key).arg("COUNT").arg(count);
        if let Some(shard) = shard {
            cmd.arg("SHARD").arg(shard);
        }
        self.run(&cmd).await
    }

    /// The next segment value for `key` (`SEGMENT.NEXT key`).
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn next_segment_value(&self, key: &str) -> Result<i64> {
        self.issue_one("SEGMENT.NEXT", key).await
    }

    /// Takes a range of `count` segment values for `key` without handing any out
    /// (`SEGMENT.NEXT key COUNT count`). [`SegmentBuffer`] builds on this.
    ///
    /// ```no_run
    /// # async fn example(client: idgen_client::Client) -> idgen_client::Result<()> {
    /// let range = client.take_segment_range("invoice", 100).await?;
    /// for value in range.values() {
    ///     // each value is yours alone, across every client and node
    /// #   let _ = value;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn take_segment_range(&self, key: &str, count: u64) -> Result<SegmentRange> {
        if count == 0 {
            return Err(Error::InvalidArgument("count must be at least 1".into()));
        }
        let [first, last, step]: [i64; 3] = self
            .run(redis::cmd("SEGMENT.NEXT").arg(key).arg("COUNT").arg(count))
            .await?;
        Metrics::add(&self.inner.metrics.ranges_fetched, 1);
        Ok(SegmentRange {
            first,
            last,
            step: step as u64,
            count,
        })
    }

    /// Splits an ID into its parts with the deployment's layout — the same arithmetic
    /// `SNOWFLAKE.DECODE` uses, without a round trip.
    ///
    /// ```no_run
    /// # async fn example(client: idgen_client::Client) -> idgen_client::Result<()> {
    /// let id = client.next_snowflake("orders").await?;
    /// let parts = client.decode(id)?;
    /// println!("issued at {} ms by the node with offset {}", parts.unix_ms, parts.offset);
    /// # Ok(())
    /// # }
    /// ```
    pub fn decode(&self, id: i64) -> Result<DecodedId> {
        let deployment = &self.inner.deployment;
        deployment
            .layout
            .decode(id, deployment.step)
            .map_err(|error| Error::InvalidArgument(error.to_string()))
    }

    /// A local, double-buffered segment for `key` (see [`SegmentBuffer`]).
    ///
    /// ```no_run
    /// # async fn example(client: idgen_client::Client) -> idgen_client::Result<()> {
    /// use idgen_client::SegmentOptions;
    ///
    /// let invoices = client.segment_buffer("invoice", SegmentOptions::default());
    /// let number = invoices.next().await?; // usually no round trip: an atomic add
    /// # let _ = number;
    /// # Ok(())
    /// # }
    /// ```
    pub fn segment_buffer(&self, key: &str, options: SegmentOptions) -> SegmentBuffer {
        SegmentBuffer::new(self.clone(), key, options)
    }

    /// A prefetching snowflake cache for `key` (see [`SnowflakeCache`]).
    ///
    /// ```no_run
    /// # async fn example(client: idgen_client::Client) -> idgen_client::Result<()> {
    /// use std::time::Duration;
    /// use idgen_client::SnowflakeCacheOptions;
    ///
    /// let events = client.snowflake_cache(
    ///     "events",
    ///     SnowflakeCacheOptions::default().max_age(Duration::from_millis(200)),
    /// );
    /// let id = events.next().await?; // never older than 200 ms since it was fetched
    /// # let _ = id;
    /// # Ok(())
    /// # }
    /// ```
    pub fn snowflake_cache(&self, key: &str, options: SnowflakeCacheOptions) -> SnowflakeCache {
        SnowflakeCache::new(self.clone(), key, options)
    }
}
