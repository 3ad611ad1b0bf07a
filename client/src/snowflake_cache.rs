//! A prefetching snowflake cache (the idea of Baidu UidGenerator's ring buffer): IDs are
//! fetched in batches, one round trip each, and handed out locally; a refill starts in the
//! background when the cache runs low. IDs older than `max_age` are thrown away, never
//! handed out, so an ID's time stays within `max_age` of when it is used.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use crate::error::Result;
use crate::id::Id;
use crate::metrics::Metrics;
use crate::settings::SnowflakeCacheOptions;
use crate::source::IdSource;

/// One fetched batch: its IDs (increasing) and when it arrived.
struct Batch {
    ids: VecDeque<i64>,
    fetched: Instant,
}

struct Shared {
    source: Arc<dyn IdSource>,
    key: String,
    options: SnowflakeCacheOptions,
    batches: Mutex<VecDeque<Batch>>,
    refilling: AtomicBool,
}

/// Prefetched snowflake IDs for one key. Cheap to clone; clones share the cache.
#[derive(Clone)]
pub struct SnowflakeCache {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SnowflakeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnowflakeCache")
            .field("key", &self.shared.key)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl SnowflakeCache {
    pub(crate) fn new(
        source: Arc<dyn IdSource>,
        key: &str,
        options: SnowflakeCacheOptions,
    ) -> Self {
        SnowflakeCache {
            shared: Arc::new(Shared {
                source,
                key: key.to_string(),
                options,
                batches: Mutex::new(VecDeque::new()),
                refilling: AtomicBool::new(false),
            }),
        }
    }

    /// The next ID: from the cache when it has a fresh one, else from a batch fetched now.
    pub async fn next(&self) -> Result<i64> {
        loop {
            if let Some(id) = self.shared.take() {
                Metrics::add(&self.shared.source.metrics().ids_served, 1);
                return Ok(id);
            }
            self.shared.fetch().await?;
        }
    }

    /// The next ID as an [`Id`], to write in any of its forms (`id.to_string()`, or
    /// `id.format(IdFormat::Base62)` for a short sortable string).
    pub async fn next_id(&self) -> Result<Id> {
        self.next().await.map(Id::from)
    }

    /// How many fresh IDs the cache holds now.
    pub fn cached(&self) -> usize {
        let mut batches = self.shared.lock();
        self.shared.drop_stale(&mut batches);
        batches.iter().map(|batch| batch.ids.len()).sum()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Batch>> {
        self.batches.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn drop_stale(&self, batches: &mut VecDeque<Batch>) {
        while batches.front().is_some_and(|batch| {
            batch.ids.is_empty() || batch.fetched.elapsed() > self.options.max_age
        }) {
            batches.pop_front();
        }
    }

    /// Takes a fresh ID, starting a background refill when the cache runs low.
    fn take(self: &Arc<Self>) -> Option<i64> {
        let (id, left) = {
            let mut batches = self.lock();
            self.drop_stale(&mut batches);
            let id = batches.front_mut()?.ids.pop_front()?;
            (
                id,
                batches.iter().map(|batch| batch.ids.len()).sum::<usize>(),
            )
        };
        let low = (f64::from(self.options.batch) * self.options.refill_below) as usize;
        if left < low && !self.refilling.swap(true, Ordering::AcqRel) {
            let shared = Arc::clone(self);
            tokio::spawn(async move {
                if let Err(error) = shared.fetch().await {
                    tracing::warn!(key = %shared.key, %error, "prefetching snowflake IDs failed");
                }
                shared.refilling.store(false, Ordering::Release);
            });
        }
        Some(id)
    }

    #[tracing::instrument(level = "debug", skip(self), fields(key = %self.key))]
    async fn fetch(&self) -> Result<()> {
        let ids = self
            .source
            .snowflakes(&self.key, self.options.batch.max(1))
            .await?;
        Metrics::add(&self.source.metrics().snowflake_batches_fetched, 1);
        self.lock().push_back(Batch {
            ids: ids.into(),
            fetched: Instant::now(),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Staleness and refills, on tokio's paused clock.
    use std::time::Duration;

    use super::*;
    use crate::source::counting::CountingSource;

    fn cache() -> (Arc<CountingSource>, SnowflakeCache) {
        let source = Arc::new(CountingSource::default());
        let options = SnowflakeCacheOptions::default()
            .batch(10)
            .max_age(Duration::from_secs(1))
            .refill_below(0.5);
        (source.clone(), SnowflakeCache::new(source, "k", options))
    }

    async fn let_background_run() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ids_older_than_max_age_are_thrown_away_never_handed_out() {
        let (source, cache) = cache();
        assert_eq!(cache.next().await.unwrap(), 0);
        assert_eq!(cache.cached(), 9);
        tokio::time::advance(Duration::from_millis(999)).await;
        assert_eq!(cache.next().await.unwrap(), 1, "still fresh");
        tokio::time::advance(Duration::from_millis(2)).await;
        assert_eq!(cache.cached(), 0, "the batch is 1001 ms old");
        assert_eq!(cache.next().await.unwrap(), 10, "from a new batch");
        assert_eq!(source.batch_sizes.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refill_starts_in_the_background_when_the_cache_runs_low() {
        let (source, cache) = cache();
        for expected in 0..5 {
            assert_eq!(cache.next().await.unwrap(), expected);
        }
        let_background_run().await;
        assert_eq!(
            source.batch_sizes.lock().unwrap().len(),
            1,
            "5 left: not low yet"
        );
        assert_eq!(cache.next().await.unwrap(), 5);
        let_background_run().await;
        assert_eq!(
            source.batch_sizes.lock().unwrap().len(),
            2,
            "4 left: refilled"
        );
        assert_eq!(cache.cached(), 14);
        let ids: Vec<i64> = futures_take(&cache, 14).await;
        assert_eq!(ids, (6..20).collect::<Vec<_>>(), "in order, across batches");
        assert_eq!(source.metrics().ids_served.load(Ordering::Relaxed), 20);
    }

    async fn futures_take(cache: &SnowflakeCache, n: usize) -> Vec<i64> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(cache.next().await.unwrap());
        }
        ids
    }
}
