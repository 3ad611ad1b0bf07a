//! Pooled connections (bb8) to single nodes and to a cluster.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::AsyncConnectionConfig;

use crate::settings::Settings;

/// A pooled connection and the flag that marks it broken, shared with every call using it:
/// the pool drops a connection so marked instead of handing it out again.
pub(crate) struct Tracked<C> {
    connection: C,
    broken: Arc<AtomicBool>,
}

impl<C> Tracked<C> {
    fn new(connection: C) -> Self {
        Tracked {
            connection,
            broken: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// A connection lent to one call. Connections are multiplexed (many requests in flight on
/// one socket), so a call holds the pool's checkout only long enough to clone the handle:
/// with `pool_size` 4, 64 concurrent calls share 4 connections instead of queueing for them.
pub(crate) struct Lent<C> {
    pub(crate) connection: C,
    broken: Arc<AtomicBool>,
}

impl<C> Lent<C> {
    /// Marks the connection broken if `error` means it cannot be used again (a multiplexed
    /// connection does not reconnect by itself).
    pub(crate) fn check(&self, error: &redis::RedisError) {
        if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}

/// Lends a working connection from `pool`, discarding the broken ones it meets.
pub(crate) async fn lend<C: Connect>(
    pool: &bb8::Pool<Manager<C>>,
) -> Result<Lent<C::Connection>, bb8::RunError<redis::RedisError>> {
    loop {
        let pooled = pool.get().await?;
        if pooled.broken.load(Ordering::Relaxed) {
            continue; // returned to the pool as broken, which drops it
        }
        return Ok(Lent {
            connection: pooled.connection.clone(),
            broken: pooled.broken.clone(),
        });
    }
}

/// How to open one kind of connection; [`Manager`] pools it.
#[async_trait::async_trait]
pub(crate) trait Connect: Send + Sync + 'static {
    type Connection: redis::aio::ConnectionLike + Clone + Send + Sync + 'static;
    async fn open(&self) -> redis::RedisResult<Self::Connection>;
}

/// Multiplexed connections to one node.
pub(crate) struct NodeConnector {
    client: redis::Client,
    config: AsyncConnectionConfig,
}

impl NodeConnector {
    pub(crate) fn new(url: &str, settings: &Settings) -> redis::RedisResult<Self> {
        Ok(NodeConnector {
            client: redis::Client::open(url)?,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(settings.connect_timeout)
                .set_response_timeout(settings.response_timeout),
        })
    }
}

#[async_trait::async_trait]
impl Connect for NodeConnector {
    type Connection = MultiplexedConnection;
    async fn open(&self) -> redis::RedisResult<MultiplexedConnection> {
        self.client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
    }
}

/// Cluster connections, each of which routes commands by key.
pub(crate) struct ClusterConnector {
    client: redis::cluster::ClusterClient,
}

impl ClusterConnector {
    pub(crate) fn new(seeds: &[String], settings: &Settings) -> redis::RedisResult<Self> {
        let client = redis::cluster::ClusterClient::builder(seeds.to_vec())
            .connection_timeout(settings.connect_timeout)
            .response_timeout(settings.response_timeout)
            .build()?;
        Ok(ClusterConnector { client })
    }
}

#[async_trait::async_trait]
impl Connect for ClusterConnector {
    type Connection = ClusterConnection;
    async fn open(&self) -> redis::RedisResult<ClusterConnection> {
        self.client.get_async_connection().await
    }
}

/// The bb8 manager for any [`Connect`]: checks connections with PING and drops those the
/// code that used them marked broken.
pub(crate) struct Manager<C>(pub(crate) C);

#[async_trait::async_trait]
impl<C: Connect> bb8::ManageConnection for Manager<C> {
    type Connection = Tracked<C::Connection>;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Self::Connection, Self::Error> {
        self.0.open().await.map(Tracked::new)
    }

    async fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        redis::cmd("PING")
            .query_async::<()>(&mut conn.connection)
            .await
    }

    fn has_broken(&self, conn: &mut Self::Connection) -> bool {
        conn.broken.load(Ordering::Relaxed)
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
