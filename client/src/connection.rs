//! Pooled connections (bb8) to single nodes and to a cluster.

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::AsyncConnectionConfig;

use crate::settings::Settings;

/// A pooled connection, marked broken by the code that saw it fail so the pool drops it
/// instead of handing it out again.
pub(crate) struct Tracked<C> {
    pub(crate) connection: C,
    pub(crate) broken: bool,
}

impl<C> Tracked<C> {
    fn new(connection: C) -> Self {
        Tracked {
            connection,
            broken: false,
        }
    }
}

/// Opens multiplexed connections to one node.
pub(crate) struct NodeManager {
    client: redis::Client,
    config: AsyncConnectionConfig,
}

impl NodeManager {
    pub(crate) fn new(url: &str, settings: &Settings) -> redis::RedisResult<Self> {
        Ok(NodeManager {
            client: redis::Client::open(url)?,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(settings.connect_timeout)
                .set_response_timeout(settings.response_timeout),
        })
    }
}

#[async_trait::async_trait]
impl bb8::ManageConnection for NodeManager {
    type Connection = Tracked<MultiplexedConnection>;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Self::Connection, Self::Error> {
        self.client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map(Tracked::new)
    }

    async fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        redis::cmd("PING")
            .query_async::<()>(&mut conn.connection)
            .await
    }

    fn has_broken(&self, conn: &mut Self::Connection) -> bool {
        conn.broken
    }
}

/// Opens cluster connections, each of which routes commands by key.
pub(crate) struct ClusterManager {
    client: redis::cluster::ClusterClient,
}

impl ClusterManager {
    pub(crate) fn new(seeds: &[String], settings: &Settings) -> redis::RedisResult<Self> {
        let client = redis::cluster::ClusterClient::builder(seeds.to_vec())
            .connection_timeout(settings.connect_timeout)
            .response_timeout(settings.response_timeout)
            .build()?;
        Ok(ClusterManager { client })
    }
}

#[async_trait::async_trait]
impl bb8::ManageConnection for ClusterManager {
    type Connection = Tracked<ClusterConnection>;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Self::Connection, Self::Error> {
        self.client.get_async_connection().await.map(Tracked::new)
    }

    async fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        redis::cmd("PING")
            .query_async::<()>(&mut conn.connection)
            .await
    }

    fn has_broken(&self, conn: &mut Self::Connection) -> bool {
        conn.broken
    }
}

/// Builds a pool that does not connect until first use, so that a node that is down at
/// start does not keep the client from starting.
pub(crate) fn pool<M: bb8::ManageConnection>(manager: M, settings: &Settings) -> bb8::Pool<M> {
    bb8::Pool::builder()
        .max_size(settings.pool_size)
        .min_idle(Some(0))
        .connection_timeout(settings.connect_timeout)
        .test_on_check_out(false)
        .build_unchecked(manager)
}
