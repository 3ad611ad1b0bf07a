//! The soak's clients: clients of the project's own crate that follow the master (through
//! Sentinel or the cluster's slot map), and plain connections pinned to one node ("stale"
//! clients: they keep talking to an old master through a split brain).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idgen_client::{Client, Settings, Topology};

use super::history::{Call, History, Progression};
use super::schedule::Rng;

/// Pause between one client's calls, so that the soak leaves the shared machine some room.
const PAUSE: Duration = Duration::from_millis(2);
/// Largest snowflake batch asked for (the history keeps every ID).
const MAX_SNOWFLAKES: u64 = 20;
/// Largest segment range asked for (kept as a progression, whatever its size).
const MAX_SEGMENT: u64 = 5_000;

/// What every client shares.
#[derive(Clone)]
pub struct Shared {
    /// When the soak started.
    pub start: Instant,
    /// Set when the clients must stop.
    pub stop: Arc<AtomicBool>,
    /// The keys the clients use; snowflakes go to `{key}:sf`, segments to `{key}:seg` (a
    /// key holds one kind).
    pub keys: Arc<Vec<String>>,
}

impl Shared {
    fn key(&self, rng: &mut Rng, snowflakes: bool) -> String {
        let key = &self.keys[rng.between(0, self.keys.len() as u64 - 1) as usize];
        format!("{key}:{}", if snowflakes { "sf" } else { "seg" })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs a client of the project's crate until stopped; `topology` builds its topology.
pub async fn follow(
    name: String,
    topology: impl Fn() -> idgen_client::Result<Topology>,
    shared: Shared,
    seed: u64,
) -> History {
    let mut history = History {
        clients: vec![name],
        ..History::default()
    };
    let mut rng = Rng::new(seed);
    let settings = Settings::default()
        .failover_retry_for(Duration::from_secs(15))
        .response_timeout(Duration::from_secs(1));
    let client = loop {
        if shared.stopped() {
            return history;
        }
        match topology() {
            Ok(topology) => match Client::connect_with(topology, settings.clone()).await {
                Ok(client) => break client,
                Err(error) => history.add_error(&format!("connect: {}", client_error_kind(&error))),
            },
            Err(error) => history.add_error(&format!("topology: {error}")),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    while !shared.stopped() {
        let snowflakes = rng.coin();
        let key = shared.key(&mut rng, snowflakes);
        let call = |shared: &Shared| Call {
            client: 0,
            node: "follow".into(),
            at_ms: shared.now_ms(),
            key: key.clone(),
        };
        if snowflakes {
            let count = rng.between(1, MAX_SNOWFLAKES) as u32;
            match client.next_snowflakes(&key, count).await {
                Ok(ids) => {
                    let call = call(&shared);
                    history.follower_answers.push(call.at_ms);
                    history.add_snowflakes(call, &ids);
                }
                Err(error) => history.add_error(&client_error_kind(&error)),
            }
        } else {
            let count = rng.between(1, MAX_SEGMENT);
            match client.take_segment_range(&key, count).await {
                Ok(range) => {
                    let call = call(&shared);
                    history.follower_answers.push(call.at_ms);
                    history.add_segment(
                        call,
                        Progression {
                            first: range.first,
                            step: range.step,
                            count: range.count,
                        },
                    );
                }
                Err(error) => history.add_error(&client_error_kind(&error)),
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    history
}

/// The kind of a client error: its variant, with the server's code for server errors.
fn client_error_kind(error: &idgen_client::Error) -> String {
    match error {
        idgen_client::Error::Server { code, .. } => format!("client: {code}"),
        idgen_client::Error::NoNodeAvailable { last, .. } => {
            format!("client: no node ({})", client_error_kind(last))
        }
        other => {
            let debug = format!("{other:?}");
            let variant: String = debug.chars().take_while(|c| c.is_alphanumeric()).collect();
            format!("client: {variant}")
        }
    }
}

/// Runs a plain client pinned to the node at `url` (labelled `node`) until stopped.
pub async fn pinned(name: String, node: String, url: String, shared: Shared, seed: u64) -> History {
    let mut history = History {
        clients: vec![name],
        ..History::default()
    };
    let mut rng = Rng::new(seed);
    let timeout = Duration::from_secs(1);
    let mut conn: Option<redis::aio::MultiplexedConnection> = None;
    // Keys this node answered lately: segment keys, then snowflake keys.
    let mut served: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    while !shared.stopped() {
        let Some(connection) = conn.as_mut() else {
            let connected = async {
                redis::Client::open(url.as_str())?
                    .get_multiplexed_async_connection()
                    .await
            };
            match tokio::time::timeout(timeout, connected).await {
                Ok(Ok(connection)) => conn = Some(connection),
                Ok(Err(_)) => history.add_error("pinned: cannot connect"),
                Err(_) => history.add_error("pinned: connect timed out"),
            }
            if conn.is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        };
        let snowflakes = rng.coin();
        // Mostly keys this node served last (in a cluster most keys live elsewhere and
        // answer MOVED), now and then any key, so that a key moved here is found again.
        let known = &served[usize::from(snowflakes)];
        let key = if !known.is_empty() && rng.between(0, 9) > 0 {
            known[rng.between(0, known.len() as u64 - 1) as usize].clone()
        } else {
            shared.key(&mut rng, snowflakes)
        };
        let count = rng.between(
            1,
            if snowflakes {
                MAX_SNOWFLAKES
            } else {
                MAX_SEGMENT
            },
        );
        let command = if snowflakes {
            "SNOWFLAKE.NEXT"
        } else {
            "SEGMENT.NEXT"
        };
        let mut cmd = redis::cmd(command);
        cmd.arg(&key).arg("COUNT").arg(count);
        let reply = tokio::time::timeout(timeout, cmd.query_async::<Vec<i64>>(connection)).await;
        let known = &mut served[usize::from(snowflakes)];
        match &reply {
            Ok(Ok(_)) if !known.contains(&key) => known.push(key.clone()),
            Ok(Err(error)) if matches!(error.code(), Some("MOVED" | "ASK")) => {
                known.retain(|served| *served != key)
            }
            _ => {}
        }
        let call = Call {
            client: 0,
            node: node.clone(),
            at_ms: shared.now_ms(),
            key,
        };
        match reply {
            Ok(Ok(values)) if snowflakes => history.add_snowflakes(call, &values),
            Ok(Ok(values)) => match values[..] {
                [first, last, step] if step > 0 && last >= first => history.add_segment(
                    call,
                    Progression {
                        first,
                        step: step as u64,
                        count: ((last - first) / step + 1) as u64,
                    },
                ),
                _ => history.add_error("pinned: unreadable segment reply"),
            },
            Ok(Err(error)) => {
                let kind = error.code().map(str::to_string).unwrap_or_else(|| {
                    conn = None;
                    "connection lost".into()
                });
                history.add_error(&format!("pinned: {kind}"));
            }
            Err(_) => {
                conn = None;
                history.add_error("pinned: timed out");
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    history
}
