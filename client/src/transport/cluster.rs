//! A Redis Cluster: a pool of connections that route commands by key (redis-rs's cluster
//! client), every member found through `CLUSTER NODES` (masters and replicas, so that each
//! one's identity can be checked at connect), and the members' identities checked again in
//! the background while calls are made.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ConnectionInfo, FromRedisValue};

use crate::error::{Error, Result};
use crate::identity::guard::IdentityGuard;
use crate::lock::lock;
use crate::metrics::Metrics;
use crate::transport::address;
use crate::transport::cluster_nodes::cluster_members;
use crate::transport::connection::{lend, short_connection, Connect, Pool};
use crate::transport::retry::{self, RetryPolicy};
use crate::transport::settings::Settings;

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
            let mut last = lock(&self.last);
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
            *lock(&check.refused) = verdict;
            *lock(&check.last) = Some(Instant::now());
        });
    }

    /// The first member that does not fit, if any; members that cannot be asked now
    /// (unreachable, loading) are skipped: they are checked when they answer.
    async fn run(&self) -> Option<String> {
        let members = members(&self.seeds, &self.settings).await.ok()?;
        for member in &members {
            let verdict =
                crate::transport::connection::admit_at(member, &self.settings, &self.guard).await;
            if let Err(Error::Deployment(problem)) = verdict {
                return Some(problem);
            }
        }
        None
    }

    fn refusal(&self) -> Option<Error> {
        lock(&self.refused)
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
    pub(crate) async fn run<T: FromRedisValue>(&self, cmd: &Cmd, metrics: &Metrics) -> Result<T> {
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

/// Cluster connections, each of which routes commands by key. Opened by redis-rs's own bb8
/// integration for its cluster client, which carries the timeouts, credentials and TLS.
pub(crate) struct ClusterConnector {
    client: redis::cluster::ClusterClient,
}

/// Retries redis-rs may make for one cluster call; the call's overall deadline
/// (`failover_retry_for`) ends them first in practice.
const CLUSTER_RETRIES: u32 = 64;
/// Bounds (ms) of redis-rs's jittered backoff between cluster retries: short enough to
/// notice a promoted replica within a fraction of a second, long enough not to hammer a
/// cluster that is electing.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (50, 1000);

impl ClusterConnector {
    pub(crate) fn new(seeds: &[ConnectionInfo], settings: &Settings) -> redis::RedisResult<Self> {
        // redis-rs retries what a failover or resharding causes (a lost connection, MOVED,
        // ASK, READONLY from a demoted master, CLUSTERDOWN, TRYAGAIN, MASTERDOWN, LOADING),
        // refreshing its slot map as needed, within the overall timeout. By default that
        // timeout is the per-request one, which would end the retries after one second.
        let (min_wait, max_wait) = CLUSTER_RETRY_WAIT_MS;
        let client = redis::cluster::ClusterClient::builder(seeds.to_vec())
            .connection_timeout(settings.connect_timeout)
            .response_timeout(settings.response_timeout)
            .overall_response_timeout(Some(settings.failover_retry_for))
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(min_wait)
            .max_retry_wait(max_wait)
            .build()?;
        Ok(ClusterConnector { client })
    }
}

impl Connect for ClusterConnector {
    type Connection = ClusterConnection;
    async fn open(&self) -> redis::RedisResult<ClusterConnection> {
        <redis::cluster::ClusterClient as bb8::ManageConnection>::connect(&self.client).await
    }
}

/// Every live member of the cluster, from `CLUSTER NODES` on the first seed that answers.
/// Each member gets the seed's credentials and TLS settings: a password-protected or TLS
/// cluster needs them on every node.
pub(crate) async fn members(
    seeds: &[ConnectionInfo],
    settings: &Settings,
) -> Result<Vec<ConnectionInfo>> {
    let mut last_error = None;
    for seed in seeds {
        let attempt = async {
            let (_, mut conn) = short_connection(seed, settings)
                .await
                .map_err(|error| error.naming_node(&seed.addr().to_string()))?;
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async(&mut conn)
                .await?;
            Ok::<String, Error>(nodes)
        };
        match attempt.await {
            Ok(nodes) => {
                return cluster_members(&nodes)
                    .into_iter()
                    .filter(|member| !member.failed)
                    .map(|member| address::at(seed, "a cluster seed", member.host, member.port))
                    .collect()
            }
            Err(Error::Auth { code, .. }) if code == "NOPERM" => {
                return Err(Error::Deployment(format!(
                    "the ACL user may not run CLUSTER NODES on {}: grant +cluster|nodes \
                     (and +cluster|slots, which redis-rs needs to route by slot)",
                    seed.addr()
                )))
            }
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| Error::InvalidArgument("no cluster seed given".into())))
}
