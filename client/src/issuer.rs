//! The round trips that issue IDs: one command on the backend, its reply, its counters.
//! The client's API and the local buffers (through [`IdSource`]) both go through here.

use idgen_core::SegmentRange;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::source::{IdSource, Pending};

/// The backend calls go to, and the counters they update.
pub(crate) struct Issuer {
    backend: Backend,
    pub(crate) metrics: Metrics,
}

impl Issuer {
    pub(crate) fn new(backend: Backend) -> Self {
        Issuer {
            backend,
            metrics: Metrics::default(),
        }
    }

    async fn run<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.backend.run(cmd, &self.metrics).await
    }

    /// Runs `command key` for one ID and counts it as served.
    pub(crate) async fn one(&self, command: &str, key: &str) -> Result<i64> {
        let id = self.run(redis::cmd(command).arg(key)).await?;
        Metrics::add(&self.metrics.ids_served, 1);
        Ok(id)
    }

    /// `SNOWFLAKE.NEXT key COUNT count [SHARD shard]`: a batch, not yet counted as served
    /// (a cache counts IDs when it hands them out).
    pub(crate) async fn snowflakes(
        &self,
        key: &str,
        count: u32,
        shard: Option<u32>,
    ) -> Result<Vec<i64>> {
        if count == 0 {
            return Err(Error::InvalidArgument("count must be at least 1".into()));
        }
        let mut cmd = redis::cmd("SNOWFLAKE.NEXT");
        cmd.arg(key).arg("COUNT").arg(count);
        if let Some(shard) = shard {
            cmd.arg("SHARD").arg(shard);
        }
        self.run(&cmd).await
    }

    /// `SEGMENT.NEXT key COUNT count`: a range, none of it handed out yet.
    pub(crate) async fn segment_range(&self, key: &str, count: u64) -> Result<SegmentRange> {
        if count == 0 {
            return Err(Error::InvalidArgument("count must be at least 1".into()));
        }
        let [first, last, step]: [i64; 3] = self
            .run(redis::cmd("SEGMENT.NEXT").arg(key).arg("COUNT").arg(count))
            .await?;
        Metrics::add(&self.metrics.ranges_fetched, 1);
        Ok(SegmentRange {
            first,
            last,
            step: step as u64,
            count,
        })
    }
}

impl IdSource for Issuer {
    fn segment_range<'a>(&'a self, key: &'a str, count: u64) -> Pending<'a, SegmentRange> {
        Box::pin(Issuer::segment_range(self, key, count))
    }

    fn snowflakes<'a>(&'a self, key: &'a str, count: u32) -> Pending<'a, Vec<i64>> {
        Box::pin(Issuer::snowflakes(self, key, count, None))
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
