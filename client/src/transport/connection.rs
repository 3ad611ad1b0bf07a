//! How the client connects: pooled connections (bb8) to single nodes and to a cluster, and
//! the short-lived connections (outside the pools) that the checks at connect use — all with
//! the settings' timeouts.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionInfo};

use crate::error;
use crate::identity;
use crate::identity::deployment::NodeIdentity;
use crate::identity::guard::IdentityGuard;
use crate::lock::lock;
use crate::transport::settings::Settings;

/// The timeouts of the settings, for every connection the client opens to a node.
pub(crate) fn connection_config(settings: &Settings) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.response_timeout))
}

/// A short-lived connection (outside the pools) with the configured timeouts, for the
/// checks made at connect.
pub(crate) async fn short_connection(
    node: &ConnectionInfo,
    settings: &Settings,
) -> error::Result<(redis::Client, MultiplexedConnection)> {
    let client = redis::Client::open(node.clone())?;
    let conn = client
        .get_multiplexed_async_connection_with_config(&connection_config(settings))
        .await?;
    Ok((client, conn))
}

/// [`identity::admit`] over a short-lived connection to `node`.
pub(crate) async fn admit_at(
    node: &ConnectionInfo,
    settings: &Settings,
    guard: &IdentityGuard,
) -> error::Result<NodeIdentity> {
    let address = node.addr().to_string();
    let (_, mut conn) = short_connection(node, settings)
        .await
        .map_err(|error| error.naming_node(&address))?;
    identity::admit(&mut conn, &address, guard).await
}

/// A pooled connection, or a copy of it lent to one call, and the flags they share:
/// `broken` makes the pool drop it instead of handing it out again; `checked` says its node
/// passed the identity check on this connection. Connections are multiplexed (many
/// requests in flight on one socket), so a call holds the pool's checkout only long enough
/// to clone it: with `pool_size` 4, 64 concurrent calls share 4 connections instead of
/// queueing for them.
#[derive(Clone)]
pub(crate) struct Lent<C> {
    pub(crate) connection: C,
    broken: Arc<AtomicBool>,
    checked: Arc<AtomicBool>,
}

impl<C> Lent<C> {
    fn new(connection: C) -> Self {
        Lent {
            connection,
            broken: Arc::new(AtomicBool::new(false)),
            checked: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Marks the connection broken: the pool drops it.
    pub(crate) fn mark_broken(&self) {
        self.broken.store(true, Ordering::Relaxed);
    }

    /// Marks the connection broken if `error` means it cannot be used again (a multiplexed
    /// connection does not reconnect by itself).
    pub(crate) fn check(&self, error: &redis::RedisError) {
        if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}

impl Lent<MultiplexedConnection> {
    /// Runs the identity check on this connection's first use (see [`IdentityCheck`]).
    /// A connection that fails it is dropped, so the next call opens a new one and asks
    /// again: a node that comes back with its identity is used at once.
    pub(crate) async fn ensure_checked(&mut self, check: &IdentityCheck) -> error::Result<()> {
        if self.checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        match check.verify(&mut self.connection).await {
            Ok(()) => {
                self.checked.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(error) => {
                self.broken.store(true, Ordering::Relaxed);
                Err(error)
            }
        }
    }
}

/// A bb8 pool of connections, and why its last attempt to open one failed.
///
/// bb8 opens connections in the background and hands their errors to its error sink only:
/// a caller waiting for a connection sees "timed out". So a wrong password or a revoked user
/// reached callers as a retryable transport error — retried, the node set aside — instead of
/// `WRONGPASS`. The pool's manager records each failure, and [`lend`] answers a timeout with
/// the failure that happened while the caller waited.
pub(crate) struct Pool<C: Connect> {
    pool: bb8::Pool<Manager<C>>,
    last_failure: Arc<Mutex<Option<(Instant, redis::RedisError)>>>,
}

impl<C: Connect> Clone for Pool<C> {
    fn clone(&self) -> Self {
        Pool {
            pool: self.pool.clone(),
            last_failure: self.last_failure.clone(),
        }
    }
}

impl<C: Connect> Pool<C> {
    /// A pool of `connector`'s connections that does not connect until first use.
    pub(crate) fn new(connector: C, settings: &Settings) -> Self {
        let last_failure = Arc::new(Mutex::new(None));
        let manager = Manager {
            connector,
            last_failure: last_failure.clone(),
        };
        Pool {
            pool: pool_builder(settings).build_unchecked(manager),
            last_failure,
        }
    }

    /// Why a caller that started waiting at `since` got no connection: the failure of an
    /// attempt that ended while it waited, or else the timeout itself.
    fn why_no_connection(&self, since: Instant) -> error::Error {
        let failure = lock(&self.last_failure);
        match &*failure {
            Some((at, error)) if *at >= since => error.clone().into(),
            _ => bb8::RunError::<redis::RedisError>::TimedOut.into(),
        }
    }
}

/// Lends a working connection from `pool`, discarding the broken ones it meets.
pub(crate) async fn lend<C: Connect>(pool: &Pool<C>) -> error::Result<Lent<C::Connection>> {
    let since = Instant::now();
    loop {
        let pooled = match pool.pool.get().await {
            Ok(pooled) => pooled,
            Err(bb8::RunError::User(error)) => return Err(error.into()),
            Err(bb8::RunError::TimedOut) => return Err(pool.why_no_connection(since)),
        };
        if pooled.broken.load(Ordering::Relaxed) {
            continue; // returned to the pool as broken, which drops it
        }
        return Ok(pooled.clone());
    }
}

/// How to open one kind of connection; [`Manager`] pools it.
pub(crate) trait Connect: Send + Sync + 'static {
    type Connection: redis::aio::ConnectionLike + Clone + Send + Sync + 'static;
    fn open(&self) -> impl Future<Output = redis::RedisResult<Self::Connection>> + Send;
}

/// Multiplexed connections to one node, with the configured timeouts.
pub(crate) struct NodeConnector {
    client: redis::Client,
    config: AsyncConnectionConfig,
}

impl NodeConnector {
    pub(crate) fn new(node: &ConnectionInfo, settings: &Settings) -> redis::RedisResult<Self> {
        Ok(NodeConnector {
            client: redis::Client::open(node.clone())?,
            config: connection_config(settings),
        })
    }
}

impl Connect for NodeConnector {
    type Connection = MultiplexedConnection;
    async fn open(&self) -> redis::RedisResult<MultiplexedConnection> {
        self.client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
    }
}

/// Checks a node's identity on every new connection to it, against the identities the
/// client trusts: a node the client reconnects to must not have changed its identity (see
/// [`IdentityGuard`]).
///
/// The check runs when a call first uses the connection, not inside the pool (bb8's
/// connection customizer): the pool keeps a failed connection attempt's error to itself, so
/// a refused node would reach callers as "timed out waiting for a pooled connection" instead
/// of the reason.
#[derive(Debug, Clone)]
pub(crate) struct IdentityCheck {
    pub(crate) address: String,
    pub(crate) guard: Arc<IdentityGuard>,
}

impl IdentityCheck {
    /// Asks the node behind `connection` for its identity and holds it to the deployment
    /// (see [`identity::admit`] for what each failure becomes).
    async fn verify(&self, connection: &mut MultiplexedConnection) -> error::Result<()> {
        identity::admit(connection, &self.address, &self.guard)
            .await
            .map(drop)
    }
}

/// The bb8 manager for any [`Connect`]: checks connections with PING, drops those the code
/// that used them marked broken, and records why opening one failed (see [`Pool`]).
pub(crate) struct Manager<C> {
    connector: C,
    last_failure: Arc<Mutex<Option<(Instant, redis::RedisError)>>>,
}

impl<C: Connect> bb8::ManageConnection for Manager<C> {
    type Connection = Lent<C::Connection>;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Self::Connection, Self::Error> {
        let opened = self.connector.open().await;
        if let Err(error) = &opened {
            *lock(&self.last_failure) = Some((Instant::now(), error.clone()));
        }
        opened.map(Lent::new)
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
/// caller sees only a timeout).
#[derive(Debug, Clone, Copy)]
struct LogConnectFailures;

impl bb8::ErrorSink<redis::RedisError> for LogConnectFailures {
    fn sink(&self, error: redis::RedisError) {
        tracing::warn!(%error, "opening a pooled connection failed");
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<redis::RedisError>> {
        Box::new(*self)
    }
}

/// A pool builder that does not connect until first use, so that a node that is down at
/// start does not keep the client from starting.
fn pool_builder<C: Connect>(settings: &Settings) -> bb8::Builder<Manager<C>> {
    bb8::Pool::builder()
        .max_size(settings.pool_size)
        .min_idle(Some(0))
        .connection_timeout(settings.connect_timeout)
        .test_on_check_out(false)
        .error_sink(Box::new(LogConnectFailures))
}
