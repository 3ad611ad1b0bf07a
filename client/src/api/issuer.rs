//! The round trips that issue IDs: one command on the backend, its reply, its counters.
//! The client's API and the local buffers (through [`IdSource`]) both go through here.
//!
//! Commands are built by [`crate::commands::build`], and a COUNT outside what the server
//! accepts is refused here, before anything is sent.

use idgen_core::{SegmentRange, MAX_SEGMENT_COUNT, MAX_SNOWFLAKE_COUNT};

use crate::buffers::source::{IdSource, Pending};
use crate::commands::build;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::transport::backend::Backend;

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

    /// Runs `cmd`, which issues one ID, and counts it as served.
    async fn one(&self, cmd: redis::Cmd) -> Result<i64> {
        let id = self.run(&cmd).await?;
        Metrics::add(&self.metrics.ids_served, 1);
        Ok(id)
    }

    /// `SNOWFLAKE.NEXT key`: one ID, counted as served.
    pub(crate) async fn snowflake(&self, key: &str) -> Result<i64> {
        self.one(build::snowflake_next(key)).await
    }

    /// `SEGMENT.NEXT key`: one value, counted as served.
    pub(crate) async fn segment_value(&self, key: &str) -> Result<i64> {
        self.one(build::segment_next(key)).await
    }

    /// `SNOWFLAKE.NEXT key COUNT count [SHARD shard]`: a batch, not yet counted as served
    /// (a cache counts IDs when it hands them out).
    pub(crate) async fn snowflakes(
        &self,
        key: &str,
        count: u32,
        shard: Option<u32>,
    ) -> Result<Vec<i64>> {
        check_count(u64::from(count), MAX_SNOWFLAKE_COUNT, "snowflake IDs")?;
        let cmd = match shard {
            Some(shard) => build::snowflake_next_in_shard(key, count, u64::from(shard)),
            None => build::snowflake_next_count(key, count),
        };
        self.run(&cmd).await
    }

    /// `SEGMENT.NEXT key COUNT count`: a range, none of it handed out yet.
    pub(crate) async fn segment_range(&self, key: &str, count: u64) -> Result<SegmentRange> {
        check_count(count, MAX_SEGMENT_COUNT, "segment values")?;
        let [first, last, step]: [i64; 3] =
            self.run(&build::segment_next_count(key, count)).await?;
        Metrics::add(&self.metrics.ranges_fetched, 1);
        Ok(SegmentRange {
            first,
            last,
            step: step as u64,
            count,
        })
    }
}

/// Refuses a COUNT the server would refuse (`1..=max`), naming the limit, so that a call
/// that cannot succeed costs no round trip and says so in the caller's terms.
fn check_count(count: u64, max: u64, what: &str) -> Result<()> {
    if count == 0 || count > max {
        return Err(Error::InvalidArgument(format!(
            "count {count} is out of range: one call takes 1 to {max} {what}; \
             split a larger request into several calls"
        )));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_the_server_would_refuse_is_refused_with_its_limit() {
        assert!(check_count(1, MAX_SNOWFLAKE_COUNT, "snowflake IDs").is_ok());
        assert!(check_count(MAX_SNOWFLAKE_COUNT, MAX_SNOWFLAKE_COUNT, "snowflake IDs").is_ok());
        let above = check_count(200_000, MAX_SNOWFLAKE_COUNT, "snowflake IDs").unwrap_err();
        assert!(
            matches!(&above, Error::InvalidArgument(text)
                if text.contains("count 200000 is out of range: one call takes 1 to 100000 snowflake IDs")),
            "{above}"
        );
        let zero = check_count(0, MAX_SEGMENT_COUNT, "segment values").unwrap_err();
        assert!(
            zero.to_string().contains("1 to 1000000000 segment values"),
            "{zero}"
        );
    }
}
