//! A master managed by Redis Sentinel: found through the sentinels (redis-rs's Sentinel
//! support, which also checks that the node it names answers `ROLE` as a master), and
//! followed across failovers by asking them again when the master stops serving.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{Cmd, ConnectionAddr, ConnectionInfo, FromRedisValue, TlsMode};

use crate::error::{Error, Result};
use crate::identity::guard::IdentityGuard;
use crate::lock::lock;
use crate::metrics::Metrics;
use crate::transport::address;
use crate::transport::node::Node;
use crate::transport::retry::{self, RetryPolicy};
use crate::transport::settings::Settings;
use crate::transport::topology::SentinelTopology;

/// The data nodes of a Sentinel deployment, as the sentinels name them.
#[derive(Debug)]
pub(crate) struct Members {
    /// The master.
    pub(crate) master: ConnectionInfo,
    /// Its replicas that the sentinels do not consider down.
    pub(crate) replicas: Vec<ConnectionInfo>,
}

/// The current master of a Sentinel deployment and how to find the next one.
pub(crate) struct SentinelMaster {
    master_name: String,
    /// redis-rs's Sentinel client; its methods take `&mut self`. Holding this lock also
    /// means "a lookup is under way": callers that fail together wait for one lookup.
    sentinel: tokio::sync::Mutex<Sentinel>,
    data_nodes: ConnectionInfo,
    access: SentinelNodeConnectionInfo,
    current: Mutex<Option<Arc<Node>>>,
    /// The address of the last master used, to count master changes.
    previous: Mutex<String>,
    guard: Arc<IdentityGuard>,
    settings: Settings,
}

impl SentinelMaster {
    pub(crate) fn new(
        topology: &SentinelTopology,
        settings: &Settings,
        guard: Arc<IdentityGuard>,
    ) -> Result<Self> {
        let sentinel = Sentinel::build(topology.sentinels.clone())?;
        let data_nodes = topology.data_nodes.clone();
        // What redis-rs uses to check the master it is told about: the data nodes'
        // credentials and TLS.
        let mut access = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(data_nodes.redis_settings().clone());
        if let ConnectionAddr::TcpTls { insecure, .. } = data_nodes.addr() {
            access = access.set_tls_mode(if *insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            });
        }
        Ok(SentinelMaster {
            master_name: topology.master_name.clone(),
            sentinel: tokio::sync::Mutex::new(sentinel),
            data_nodes,
            access,
            current: Mutex::new(None),
            previous: Mutex::new(String::new()),
            guard,
            settings: settings.clone(),
        })
    }

    /// How long one lookup through the sentinels may take: redis-rs sets no timeouts of
    /// its own on these connections.
    fn lookup_timeout(&self) -> Duration {
        2 * (self.settings.connect_timeout + self.settings.response_timeout)
    }

    /// Asks the sentinels for the master and its replicas.
    pub(crate) async fn members(&self) -> Result<Members> {
        let mut sentinel = self.sentinel.lock().await;
        self.members_locked(&mut sentinel).await
    }

    async fn members_locked(&self, sentinel: &mut Sentinel) -> Result<Members> {
        let timeout = self.lookup_timeout();
        let no_answer = |what: &str| {
            Error::Transport(redis::RedisError::from((
                redis::ErrorKind::Io,
                "the sentinels did not answer in time",
                format!("{what} for '{}' took over {timeout:?}", self.master_name),
            )))
        };
        let master = tokio::time::timeout(
            timeout,
            sentinel.async_master_for(&self.master_name, Some(&self.access)),
        )
        .await
        .map_err(|_| no_answer("looking up the master"))??;
        let replicas = match tokio::time::timeout(
            timeout,
            sentinel.async_get_replica_clients(&self.master_name, Some(&self.access)),
        )
        .await
        .map_err(|_| no_answer("listing the replicas"))?
        {
            Ok(replicas) => replicas,
            Err(error) if error.kind() == redis::ErrorKind::NoValidReplicasFoundBySentinel => {
                Vec::new()
            }
            Err(error) => return Err(error.into()),
        };
        Ok(Members {
            master: self.data_node(master.get_connection_info())?,
            replicas: replicas
                .iter()
                .map(|replica| self.data_node(replica.get_connection_info()))
                .collect::<Result<_>>()?,
        })
    }

    /// A node the sentinels named, with the data nodes' credentials and TLS.
    fn data_node(&self, named: &ConnectionInfo) -> Result<ConnectionInfo> {
        let (host, port) = address::host_port(named).ok_or_else(|| {
            Error::Deployment(format!(
                "a sentinel named a node without a TCP address: {}",
                named.addr()
            ))
        })?;
        address::at(&self.data_nodes, "the data nodes' template", host, port)
    }

    /// Uses `master` from now on (at connect, with the members just checked).
    pub(crate) fn start_with(&self, master: &ConnectionInfo) -> Result<()> {
        let node = Node::new(master, &self.settings, self.guard.clone())?;
        *lock(&self.previous) = node.address.clone();
        *lock(&self.current) = Some(Arc::new(node));
        Ok(())
    }

    fn current(&self) -> Option<Arc<Node>> {
        lock(&self.current).clone()
    }

    /// Stops using `failed`, unless another call already replaced it.
    fn forget(&self, failed: &Arc<Node>) {
        let mut current = lock(&self.current);
        if current
            .as_ref()
            .is_some_and(|node| Arc::ptr_eq(node, failed))
        {
            *current = None;
        }
    }

    /// The master to send to: the current one, or the one the sentinels name now. Checks
    /// the identity of replicas met for the first time (a replica added since connect must
    /// fit the deployment before it may be promoted); one that does not is logged.
    async fn master(&self, metrics: &Metrics) -> Result<Arc<Node>> {
        if let Some(node) = self.current() {
            return Ok(node);
        }
        let mut sentinel = self.sentinel.lock().await;
        if let Some(node) = self.current() {
            return Ok(node); // found by the call that held the lock before us
        }
        let members = self.members_locked(&mut sentinel).await?;
        // The new master must fit the deployment before anything is sent to it; the pool
        // would refuse its connections anyway, but the caller should learn why.
        crate::transport::connection::admit_at(&members.master, &self.settings, &self.guard)
            .await
            .map_err(|error| match error {
                Error::Deployment(problem) => Error::Deployment(format!(
                    "the master Sentinel names for '{}' is not used: {problem}",
                    self.master_name
                )),
                other => other,
            })?;
        for replica in &members.replicas {
            match crate::transport::connection::admit_at(replica, &self.settings, &self.guard).await
            {
                Ok(_) => {}
                Err(Error::Deployment(problem)) => tracing::error!(
                    node = %replica.addr(),
                    %problem,
                    "a replica Sentinel may promote does not fit the deployment"
                ),
                Err(error) => tracing::warn!(
                    node = %replica.addr(),
                    %error,
                    "a replica Sentinel names could not be checked now; it is checked if promoted"
                ),
            }
        }
        let node = Arc::new(Node::new(
            &members.master,
            &self.settings,
            self.guard.clone(),
        )?);
        let mut previous = lock(&self.previous);
        if *previous != node.address {
            tracing::warn!(
                master = %node.address,
                was = %previous,
                name = %self.master_name,
                "following the new master Sentinel names"
            );
            Metrics::add(&metrics.failovers, 1);
            previous.clone_from(&node.address);
        }
        drop(previous);
        let mut current = lock(&self.current);
        let node = current.get_or_insert(node).clone();
        drop(sentinel); // held until now: callers that failed together wait for this lookup
        Ok(node)
    }

    /// Runs `cmd` on the master. What a failover causes — a lost connection, READONLY from
    /// a demoted master, LOADING, MASTERDOWN, no master named yet — and the module's DRIFT
    /// refusal are retried (`RetryPolicy`: every 100 ms, or when a DRIFT refusal says the
    /// request fits), asking the sentinels again, until `failover_retry_for` has passed.
    pub(crate) async fn run<T: FromRedisValue>(&self, cmd: &Cmd, metrics: &Metrics) -> Result<T> {
        let policy = RetryPolicy::new(retry::now(), self.settings.failover_retry_for, is_failover);
        retry::until_done(policy, metrics, "a call to the master", || async {
            let node = self.master(metrics).await?;
            let result = node.query(cmd).await;
            if let Err(error) = &result {
                if is_failover(error) && !matches!(error, Error::Drift { .. }) {
                    tracing::warn!(master = %node.address, %error, "the master failed; asking the sentinels again");
                    self.forget(&node);
                }
            }
            result
        })
        .await
    }
}

/// Whether `error` is what a failover causes, or a DRIFT refusal: worth a retry.
fn is_failover(error: &Error) -> bool {
    error.is_retryable()
        || matches!(error, Error::Server { code, .. }
            if matches!(code.as_str(), "READONLY" | "MASTERDOWN" | "TRYAGAIN"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str) -> Error {
        Error::Server {
            code: code.into(),
            message: String::new(),
        }
    }

    #[test]
    fn what_a_failover_causes_is_retried_and_nothing_else() {
        assert!(is_failover(&server("READONLY")));
        assert!(is_failover(&server("LOADING")));
        assert!(is_failover(&server("MASTERDOWN")));
        assert!(is_failover(&Error::Drift {
            message: String::new(),
            retry_in: None
        }));
        assert!(!is_failover(&server("WRONGTYPE")));
        assert!(!is_failover(&server("NOPERM")));
        assert!(!is_failover(&Error::Overflow {
            message: String::new()
        }));
    }
}
