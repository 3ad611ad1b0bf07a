//! Runs commands against the servers: round-robin with failover over independent nodes
//! (`node_set`), routed by key in a cluster, or to the master Sentinel names, retrying
//! through a failover.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionInfo, FromRedisValue};

use crate::connection::{lend, ClusterConnector, Pool};
use crate::error::{Error, Result};
use crate::identity_guard::IdentityGuard;
use crate::metrics::Metrics;
use crate::node_set::NodeSet;
use crate::retry::{self, RetryPolicy};
use crate::sentinel::SentinelMaster;
use crate::settings::Settings;

/// A Redis Cluster behind a pool of key-routing connections.
pub(crate) struct Cluster {
    pool: Pool<ClusterConnector>,
    retry_for: Duration,
    attempt_for: Duration,
    check: Arc<MemberCheck>,
}

/// The cluster members' identities, checked again every `cluster_check_every`.
struct MemberCheck {
    seeds: Vec<ConnectionInfo>,
    settings: Settings,
    guard: Arc<IdentityGuard>,
    /// Why calls are refused: a member that does not fit the deployment.
    refused: Mutex<Option<String>>,
    /// When the last check started; `None` while one runs.
    last: Mutex<Option<Instant>>,
}

impl MemberCheck {
    /// Starts a check in the background if the last one is older than `cluster_check_every`.
    fn maybe_start(self: &Arc<Self>) {
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            match *last {
                Some(at) if at.elapsed() >= self.settings.cluster_check_every => *last = None,
                _ => return, // recent, or running
            }
        }
        let check = self.clone();
        tokio::spawn(async move {
            let verdict = check.run().await;
            if let Some(problem) = &verdict {
                tracing::error!(%problem, "a cluster member does not fit the deployment; calls are refused");
            }
            *check.refused.lock().unwrap_or_else(|p| p.into_inner()) = verdict;
            *check.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        });
    }

    /// The first member that does not fit, if any; members that cannot be reached now are
    /// skipped (they are checked when they answer).
    async fn run(&self) -> Option<String> {
        let members = crate::cluster_discovery::members(&self.seeds, &self.settings)
            .await
            .ok()?;
        for member in &members {
            if let Ok(identity) = crate::identity::read(member, &self.settings).await {
                if let Err(problem) = self.guard.admit(identity) {
                    return Some(problem);
                }
            }
        }
        None
    }

    fn refusal(&self) -> Option<Error> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        refused
            .as_ref()
            .map(|problem| Error::Deployment(problem.clone()))
    }
}

impl Cluster {
    pub(crate) fn new(
        seeds: &[ConnectionInfo],
        settings: &Settings,
        guard: Arc<IdentityGuard>,
    ) -> Result<Self> {
        Ok(Cluster {
            pool: Pool::new(ClusterConnector::new(seeds, settings)?, settings),
            retry_for: settings.failover_retry_for,
            attempt_for: settings.connect_timeout + settings.response_timeout,
            check: Arc::new(MemberCheck {
                seeds: seeds.to_vec(),
                settings: settings.clone(),
                guard,
                refused: Mutex::new(None),
                // The members were checked at connect.
                last: Mutex::new(Some(Instant::now())),
            }),
        })
    }

    /// Runs `cmd`, routed by key. redis-rs retries through failovers and resharding (see
    /// `ClusterConnector`); what is left here is the module's own "retry in a moment": a
    /// DRIFT refusal is tried again (`RetryPolicy`: when it says the request fits, at most
    /// 100 ms later), until `failover_retry_for` has passed.
    ///
    /// One attempt may take `connect_timeout + response_timeout`; then its connection is
    /// dropped and the call tried again on a new one. A call in flight while a master
    /// restarted was seen (Valkey 9.1.2) to stay with redis-rs until its overall deadline
    /// instead of reaching the master once it served again; a fresh connection reaches it
    /// at once. A retried command may have run: that costs IDs, never repeats one.
    async fn run<T: FromRedisValue>(&self, cmd: &Cmd, metrics: &Metrics) -> Result<T> {
        self.check.maybe_start();
        if let Some(refusal) = self.check.refusal() {
            return Err(refusal);
        }
        let policy = RetryPolicy::new(retry::now(), self.retry_for, Error::is_retryable);
        retry::until_done(policy, metrics, "a cluster call", || async {
            let mut lent = lend(&self.pool).await?;
            let attempt =
                tokio::time::timeout(self.attempt_for, cmd.query_async(&mut lent.connection)).await;
            let Ok(result) = attempt else {
                lent.mark_broken();
                return Err(Error::Transport(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "no answer from the cluster",
                    format!(
                        "within {:?}; trying again on a new connection",
                        self.attempt_for
                    ),
                ))));
            };
            if let Err(error) = &result {
                lent.check(error);
            }
            Ok::<T, Error>(result?)
        })
        .await
    }
}

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
