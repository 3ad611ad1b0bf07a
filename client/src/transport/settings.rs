//! How a client's connections behave: timeouts, pools and failover ([`Settings`]). What it
//! connects to is [`crate::Topology`]; the local buffers' options are in `buffers/options.rs`.

use std::time::Duration;

/// Connection and failover settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// Connections per node (per cluster, in cluster mode). Defaults to 4. Connections are
    /// multiplexed and shared: any number of concurrent calls pipeline their requests over
    /// them, so this is not a limit on concurrency.
    pub pool_size: u32,
    /// How long to wait for a TCP connection. Defaults to 1 s.
    pub connect_timeout: Duration,
    /// How long to wait for a reply. Defaults to 1 s.
    pub response_timeout: Duration,
    /// How long a node that failed is skipped before it is tried again. Defaults to 1 s.
    pub node_retry_after: Duration,
    /// In cluster and Sentinel modes, how long one call may take in all while it is retried
    /// through a failover: in a cluster redis-rs retries lost connections, MOVED/ASK,
    /// READONLY, CLUSTERDOWN, TRYAGAIN and LOADING with jittered backoff; under Sentinel the
    /// client asks the sentinels for the master again every 100 ms. The module's DRIFT
    /// refusals are retried too. Defaults to 10 s; under Sentinel it should cover the
    /// sentinels' `down-after-milliseconds` plus the time they take to promote a replica.
    pub failover_retry_for: Duration,
    /// In cluster mode, how often the members' identities are checked again (in the
    /// background, when calls are made): a member restarted with another step, offset or
    /// layout, or one added with a clashing offset, makes calls fail with
    /// [`crate::Error::Deployment`] until it is fixed — as it would have refused the
    /// connect. Defaults to 10 s.
    pub cluster_check_every: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pool_size: 4,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            node_retry_after: Duration::from_secs(1),
            failover_retry_for: Duration::from_secs(10),
            cluster_check_every: Duration::from_secs(10),
        }
    }
}

setters!(Settings {
    /// Sets `pool_size`: connections per node.
    pool_size: u32,
    /// Sets `connect_timeout`: TCP connect timeout.
    connect_timeout: Duration,
    /// Sets `response_timeout`: reply timeout.
    response_timeout: Duration,
    /// Sets `node_retry_after`: how long a failed node is skipped.
    node_retry_after: Duration,
    /// Sets `failover_retry_for`: how long a call retries through a failover.
    failover_retry_for: Duration,
    /// Sets `cluster_check_every`: how often cluster members' identities are checked again.
    cluster_check_every: Duration,
});

impl Settings {
    /// The old name of [`Settings::failover_retry_for`], from when only cluster mode retried.
    #[deprecated(note = "renamed to failover_retry_for: Sentinel mode uses it too")]
    pub fn cluster_retry_for(self, retry_for: Duration) -> Self {
        self.failover_retry_for(retry_for)
    }
}
