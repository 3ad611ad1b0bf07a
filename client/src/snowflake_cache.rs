//! A prefetching snowflake cache (the idea of Baidu UidGenerator's ring buffer): IDs are
//! fetched in batches, one round trip each, and handed out locally; a refill starts in the
//! background when the cache runs low. IDs older than `max_age` are thrown away, never
//! handed out, so an ID's time stays within `max_age` of when it is used.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::client::Client;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::settings::SnowflakeCacheOptions;

/// One fetched batch: its IDs (increasing) and when it arrived.
struct Batch {
    ids: VecDeque<i64>,
    fetched: Instant,
}

struct Shared {
    client: Client,
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
    pub(crate) fn new(client: Client, key: &str, options: SnowflakeCacheOptions) -> Self {
        SnowflakeCache {
            shared: Arc::new(Shared {
                client,
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
                Metrics::add(&self.shared.client.metrics_ref().ids_served, 1);
                return Ok(id);
            }
            self.shared.fetch().await?;
        }
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
            .client
            .fetch_snowflakes(&self.key, self.options.batch.max(1), None)
            .await?;
        Metrics::add(&self.client.metrics_ref().snowflake_batches_fetched, 1);
        self.lock().push_back(Batch {
            ids: ids.into(),
            fetched: Instant::now(),
        });
        Ok(())
    }
}
