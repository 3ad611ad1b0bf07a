//! How a client behaves: timeouts, pools and failover ([`Settings`]), and the local
//! buffers' options ([`SegmentOptions`], [`SnowflakeCacheOptions`]). What it connects to is
//! [`crate::Topology`].

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

/// How a [`crate::SegmentBuffer`] sizes and refills its ranges (Meituan Leaf's
/// double-buffered segments).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SegmentOptions {
    /// Values in the first range. Defaults to 1000.
    pub initial_size: u64,
    /// The smallest range. Defaults to 100.
    pub min_size: u64,
    /// The largest range (the server takes up to 1,000,000,000). Defaults to 100,000,000:
    /// 3 s at 30 M values/s. Values of a range not used when the process stops are
    /// skipped, so a smaller bound keeps gaps smaller, at the cost of waits at high rates.
    pub max_size: u64,
    /// The latest point, as a fraction of the current range used, at which the next range
    /// is fetched in the background; it is fetched earlier when the values left would last
    /// less than four measured round trips (plus 5 ms). Defaults to 0.1, as in Leaf.
    pub prefetch_after: f64,
    /// How long a range should last at the measured rate (and never less than eight round
    /// trips plus 10 ms), within `min_size..=max_size`. Defaults to 10 s.
    pub target_duration: Duration,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            initial_size: 1000,
            min_size: 100,
            max_size: 100_000_000,
            prefetch_after: 0.1,
            target_duration: Duration::from_secs(10),
        }
    }
}

/// How a [`crate::SnowflakeCache`] prefetches (Baidu UidGenerator's ring-buffer idea, with
/// a bound on how old a handed-out ID may be).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SnowflakeCacheOptions {
    /// The largest batch (the server takes up to 100,000): a batch holds what callers use
    /// in one measured round trip plus 2 ms, so this bounds the cache's memory (8 bytes an
    /// ID, at most about two batches) and the rate it sustains (`batch` per round trip).
    /// Defaults to 100,000.
    pub batch: u32,
    /// IDs older than this (since they were fetched) are thrown away, never handed out,
    /// so cached IDs stay close to real time. The cache throws away IDs sooner when the
    /// round trip allows: once older than about two round trips plus 10 ms (plus three
    /// intervals between bursts when callers take in bursts), see [`crate::SnowflakeCache`].
    /// Defaults to 1 s.
    pub max_age: Duration,
    /// No longer used: a refill starts when the cached IDs would last less than one and a
    /// half measured round trips (plus 3 ms). Kept so that code setting it still compiles.
    pub refill_below: f64,
}

impl Default for SnowflakeCacheOptions {
    fn default() -> Self {
        SnowflakeCacheOptions {
            batch: 100_000,
            max_age: Duration::from_secs(1),
            refill_below: 0.5,
        }
    }
}

impl Settings {
    /// Sets `pool_size`: connections per node.
    pub fn pool_size(mut self, pool_size: u32) -> Self {
        self.pool_size = pool_size;
        self
    }

    /// Sets `connect_timeout`: TCP connect timeout.
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets `response_timeout`: reply timeout.
    pub fn response_timeout(mut self, response_timeout: Duration) -> Self {
        self.response_timeout = response_timeout;
        self
    }

    /// Sets `node_retry_after`: how long a failed node is skipped.
    pub fn node_retry_after(mut self, node_retry_after: Duration) -> Self {
        self.node_retry_after = node_retry_after;
        self
    }

    /// Sets `failover_retry_for`: how long a call retries through a failover.
    pub fn failover_retry_for(mut self, failover_retry_for: Duration) -> Self {
        self.failover_retry_for = failover_retry_for;
        self
    }

    /// Sets `cluster_check_every`: how often cluster members' identities are checked again.
    pub fn cluster_check_every(mut self, cluster_check_every: Duration) -> Self {
        self.cluster_check_every = cluster_check_every;
        self
    }

    /// The old name of [`Settings::failover_retry_for`], from when only cluster mode retried.
    #[deprecated(note = "renamed to failover_retry_for: Sentinel mode uses it too")]
    pub fn cluster_retry_for(self, retry_for: Duration) -> Self {
        self.failover_retry_for(retry_for)
    }
}

impl SegmentOptions {
    /// Sets `initial_size`: values in the first range.
    pub fn initial_size(mut self, initial_size: u64) -> Self {
        self.initial_size = initial_size;
        self
    }

    /// Sets `min_size`: the smallest range.
    pub fn min_size(mut self, min_size: u64) -> Self {
        self.min_size = min_size;
        self
    }

    /// Sets `max_size`: the largest range.
    pub fn max_size(mut self, max_size: u64) -> Self {
        self.max_size = max_size;
        self
    }

    /// Sets `prefetch_after`: the fraction used at which the next range is fetched at the
    /// latest.
    pub fn prefetch_after(mut self, prefetch_after: f64) -> Self {
        self.prefetch_after = prefetch_after;
        self
    }

    /// Sets `target_duration`: how long a range should last at the measured rate.
    pub fn target_duration(mut self, target_duration: Duration) -> Self {
        self.target_duration = target_duration;
        self
    }
}

impl SnowflakeCacheOptions {
    /// Sets `batch`: the most IDs per fetch.
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch;
        self
    }

    /// Sets `max_age`: the oldest an ID may be when handed out.
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// Sets `refill_below`, which is no longer used (refills follow the measured rate and
    /// round trip).
    pub fn refill_below(mut self, refill_below: f64) -> Self {
        self.refill_below = refill_below;
        self
    }
}
