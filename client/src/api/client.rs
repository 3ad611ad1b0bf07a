//! The client's API: connect, issue IDs, decode them, and make local buffers.

use std::sync::Arc;

use idgen_core::{DecodedId, SegmentRange};

use crate::api::issuer::Issuer;
use crate::buffers::options::{SegmentOptions, SnowflakeCacheOptions};
use crate::buffers::segment::SegmentBuffer;
use crate::buffers::snowflake_cache::SnowflakeCache;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::identity::deployment::Deployment;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::transport::connect;
use crate::transport::settings::Settings;
use crate::transport::topology::Topology;

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
            .field("metrics", &self.inner.issuer.metrics.snapshot())
            .finish_non_exhaustive()
    }
}

struct Inner {
    issuer: Arc<Issuer>,
    deployment: Deployment,
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
        let (backend, deployment) = connect::connect(topology.into(), settings).await?;
        Ok(Client {
            inner: Arc::new(Inner {
                issuer: Arc::new(Issuer::new(backend)),
                deployment,
            }),
        })
    }

    /// The deployment found at connect: step, layout and the nodes checked.
    pub fn deployment(&self) -> &Deployment {
        &self.inner.deployment
    }

    /// A snapshot of the client's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.issuer.metrics.snapshot()
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
        self.inner.issuer.snowflake(key).await
    }

    /// [`Client::next_snowflake`] as an [`Id`], to write in any of its forms: decimal
    /// (`id.to_string()`), or `id.format(IdFormat::Base32)` / `Base62` for short strings that
    /// sort like the numbers.
    pub async fn next_snowflake_id(&self, key: &str) -> Result<Id> {
        self.next_snowflake(key).await.map(Id::from)
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
        let issuer = &self.inner.issuer;
        let ids = issuer.snowflakes(key, count, shard).await?;
        Metrics::add(&issuer.metrics.ids_served, ids.len() as u64);
        Ok(ids)
    }

    /// The next segment value for `key` (`SEGMENT.NEXT key`).
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn next_segment_value(&self, key: &str) -> Result<i64> {
        self.inner.issuer.segment_value(key).await
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
        self.inner.issuer.segment_range(key, count).await
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

    /// The lowest and the highest ID whose time lies in `[from_unix_ms, to_unix_ms]` (unix
    /// milliseconds, both included), computed locally with the deployment's layout: what
    /// `SNOWFLAKE.RANGE` answers, for `WHERE id BETWEEN lowest AND highest`.
    pub fn window(&self, from_unix_ms: u64, to_unix_ms: u64) -> Result<(Id, Id)> {
        self.inner
            .deployment
            .layout
            .window(from_unix_ms, to_unix_ms)
            .map(|(lowest, highest)| (Id(lowest as i64), Id(highest as i64)))
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
        SegmentBuffer::new(self.inner.issuer.clone(), key, options)
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
        SnowflakeCache::new(self.inner.issuer.clone(), key, options)
    }
}
