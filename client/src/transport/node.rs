//! One independent node: its connection pool, whether it is marked down, and the
//! background probe that takes it back as soon as it answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionInfo, FromRedisValue};

use crate::error::Result;
use crate::identity::guard::IdentityGuard;
use crate::lock::lock;
use crate::transport::connection::{lend, IdentityCheck, NodeConnector, Pool};
use crate::transport::settings::Settings;

/// How often a node marked down is probed in the background, so that it serves again as
/// soon as it answers (after a restart, say a rolling upgrade) rather than when its mark
/// runs out.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// One independent node and its pool.
pub(crate) struct Node {
    pub(crate) address: String,
    pool: Pool<NodeConnector>,
    check: IdentityCheck,
    health: Arc<Health>,
}

/// Whether a node is marked down, and whether a probe is watching it.
#[derive(Debug, Default)]
struct Health {
    down_until: Mutex<Option<Instant>>,
    probing: AtomicBool,
}

impl Health {
    fn is_down(&self) -> bool {
        lock(&self.down_until).is_some_and(|until| Instant::now() < until)
    }

    fn set(&self, down_until: Option<Instant>) {
        *lock(&self.down_until) = down_until;
    }
}

impl Node {
    pub(crate) fn new(
        info: &ConnectionInfo,
        settings: &Settings,
        guard: Arc<IdentityGuard>,
    ) -> Result<Self> {
        let address = info.addr().to_string();
        let check = IdentityCheck {
            address: address.clone(),
            guard,
        };
        Ok(Node {
            pool: Pool::new(NodeConnector::new(info, settings)?, settings),
            check,
            address,
            health: Arc::default(),
        })
    }

    pub(crate) fn is_down(&self) -> bool {
        self.health.is_down()
    }

    /// Marks the node up, or down for `down_for`: calls try it last meanwhile, and a probe
    /// in the background marks it up again as soon as it answers and passes the identity
    /// check. The probe holds the node's state weakly and ends with the client.
    pub(crate) fn mark(&self, down_for: Option<Duration>) {
        let Some(down_for) = down_for else {
            return self.health.set(None);
        };
        self.health.set(Some(Instant::now() + down_for));
        if self.health.probing.swap(true, Ordering::AcqRel) {
            return; // a probe is already watching
        }
        let health = Arc::downgrade(&self.health);
        let (pool, check) = (self.pool.clone(), self.check.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let Some(health) = health.upgrade() else {
                    return;
                };
                if !health.is_down() || probe(&pool, &check).await.is_ok() {
                    health.set(None);
                    health.probing.store(false, Ordering::Release);
                    return;
                }
            }
        });
    }

    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let mut lent = lend(&self.pool).await?;
        lent.ensure_checked(&self.check).await?;
        let result = cmd.query_async(&mut lent.connection).await;
        if let Err(error) = &result {
            lent.check(error);
        }
        Ok(result?)
    }
}

/// Whether a node marked down serves again: a pooled connection, the identity check, PING.
async fn probe(pool: &Pool<NodeConnector>, check: &IdentityCheck) -> Result<()> {
    let mut lent = lend(pool).await?;
    lent.ensure_checked(check).await?;
    let pong: redis::RedisResult<()> = redis::cmd("PING").query_async(&mut lent.connection).await;
    if let Err(error) = &pong {
        lent.check(error);
    }
    Ok(pong?)
}
