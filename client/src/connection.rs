//! Pooled connections (bb8) to single nodes and to a cluster.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::AsyncConnectionConfig;

use crate::deployment::NodeIdentity;
use crate::identity_guard::IdentityGuard;
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

/// Multiplexed connections to one node, each opened only once the node passed the
/// identity check.
pub(crate) struct NodeConnector {
    client: redis::Client,
    config: AsyncConnectionConfig,
    guard: Arc<IdentityGuard>,
}

impl NodeConnector {
    pub(crate) fn new(
        url: &str,
        settings: &Settings,
        guard: Arc<IdentityGuard>,
    ) -> redis::RedisResult<Self> {
        Ok(NodeConnector {
            client: redis::Client::open(url)?,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(settings.connect_timeout)
                .set_response_timeout(settings.response_timeout),
            guard,
        })
    }
}

#[async_trait::async_trait]
impl Connect for NodeConnector {
    type Connection = MultiplexedConnection;
    async fn open(&self) -> redis::RedisResult<MultiplexedConnection> {
        let mut connection = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        let pairs: Vec<(String, String)> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("idgen.*")
            .query_async(&mut connection)
            .await?;
        let address = self.client.get_connection_info().addr.to_string();
        let verdict = NodeIdentity::from_config(&address, &pairs)
            .map_err(|error| error.to_string())
            .and_then(|identity| self.guard.admit(identity));
        if let Err(problem) = verdict {
            tracing::error!(node = %address, %problem, "node refused by the identity check");
            return Err(redis::RedisError::from((
                redis::ErrorKind::ClientError,
                "node refused by the identity check",
                problem,
            )));
        }
        Ok(connection)
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

/// Logs why a pooled connection could not be opened (bb8 otherwise drops the reason, and a
/// caller sees only a timeout). Identity refusals are logged, as errors, where they occur.
#[derive(Debug, Clone, Copy)]
struct LogConnectFailures;

impl bb8::ErrorSink<redis::RedisError> for LogConnectFailures {
    fn sink(&self, error: redis::RedisError) {
        if error.kind() != redis::ErrorKind::ClientError {
            tracing::warn!(%error, "opening a pooled connection failed");
        }
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<redis::RedisError>> {
        Box::new(*self)
    }
}

/// Builds a pool that does not connect until first use, so that a node that is down at
/// start does not keep the client from starting.
pub(crate) fn pool<C: Connect>(manager: Manager<C>, settings: &Settings) -> bb8::Pool<Manager<C>> {
    bb8::Pool::builder()
        .max_size(settings.pool_size)
        .min_idle(Some(0))
        .connection_timeout(settings.connect_timeout)
        .test_on_check_out(false)
        .error_sink(Box::new(LogConnectFailures))
        .build_unchecked(manager)
}
