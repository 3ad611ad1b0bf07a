//! Independent nodes (one, in single mode), any of which serves any key: each call goes to
//! the next healthy node, round robin, and moves on to the others when a node fails.
//!
//! The failover rule is written against [`FailoverNode`], which [`Node`] implements with its
//! pool; the tests below drive it with scripted nodes, so its corner cases are checked
//! without a server.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::{Cmd, FromRedisValue};

use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::transport::node::Node;
use crate::transport::settings::Settings;

/// What the failover rule needs of a node.
pub(crate) trait FailoverNode {
    /// The node's address, for errors and logs.
    fn address(&self) -> &str;
    /// Whether the node is marked down (tried last).
    fn is_down(&self) -> bool;
    /// Marks the node up (`None`) or down for a while.
    fn mark(&self, down_for: Option<Duration>);
    /// Runs `cmd` on the node.
    fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> impl Future<Output = Result<T>> + Send;
}

impl FailoverNode for Node {
    fn address(&self) -> &str {
        &self.address
    }

    fn is_down(&self) -> bool {
        Node::is_down(self)
    }

    fn mark(&self, down_for: Option<Duration>) {
        Node::mark(self, down_for);
    }

    fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> impl Future<Output = Result<T>> + Send {
        Node::query(self, cmd)
    }
}

/// Independent nodes (one, in single mode): any node serves any key.
pub(crate) struct NodeSet<N = Node> {
    pub(crate) nodes: Vec<N>,
    next: AtomicUsize,
    retry_after: Duration,
}

impl<N: FailoverNode + Sync> NodeSet<N> {
    pub(crate) fn new(nodes: Vec<N>, settings: &Settings) -> Self {
        NodeSet {
            nodes,
            next: AtomicUsize::new(0),
            retry_after: settings.node_retry_after,
        }
    }

    /// Runs `cmd` on the next healthy node, moving on to the others when a node fails (and
    /// marking it down), refuses with DRIFT (not marked: another node's clock may be
    /// fine), or cannot serve now (marked down: an identity refusal, LOADING). Nodes marked
    /// down are tried last, not never. Any other error is the call's answer at once.
    pub(crate) async fn run<T: FromRedisValue>(&self, cmd: &Cmd, metrics: &Metrics) -> Result<T> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let count = self.nodes.len();
        let rotated = (0..count).map(|i| &self.nodes[(start + i) % count]);
        let (up, down): (Vec<&N>, Vec<&N>) = rotated.partition(|node| !node.is_down());
        let mut tried = Vec::new();
        let mut last_error = None;
        for node in up.into_iter().chain(down) {
            match node.query(cmd).await {
                Ok(value) => {
                    node.mark(None);
                    if !tried.is_empty() {
                        Metrics::add(&metrics.failovers, 1);
                    }
                    return Ok(value);
                }
                Err(error) if error.is_retryable() || node_cannot_serve(&error) => {
                    if matches!(error, Error::Transport(_)) {
                        Metrics::add(&metrics.transport_errors, 1);
                        node.mark(Some(self.retry_after));
                        tracing::warn!(node = %node.address(), %error, "node failed; trying another");
                    } else if node_cannot_serve(&error) {
                        Metrics::add(&metrics.refusals, 1);
                        node.mark(Some(self.retry_after));
                        tracing::warn!(node = %node.address(), %error, "node cannot serve; trying another");
                    } else {
                        Metrics::add(&metrics.refusals, 1);
                    }
                    tried.push(node.address().to_string());
                    last_error = Some(error);
                }
                Err(error) => {
                    Metrics::add(&metrics.refusals, 1);
                    return Err(error);
                }
            }
        }
        Err(match (tried.len(), last_error) {
            (1, Some(error)) if count == 1 => error,
            (_, last) => Error::NoNodeAvailable {
                tried,
                last: Box::new(
                    last.unwrap_or_else(|| Error::Deployment("no nodes configured".into())),
                ),
            },
        })
    }
}

/// Whether `error` says this node cannot serve now, though another may: it was refused by
/// the identity check (a deployment error naming what changed), its TLS certificate was not
/// accepted, or it is still loading its data after a restart.
fn node_cannot_serve(error: &Error) -> bool {
    match error {
        Error::Deployment(_) | Error::Certificate(_) => true,
        Error::Server { code, .. } => code == "LOADING",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use redis::Value;

    use super::*;

    /// A node that answers from a script and records how it was marked.
    struct Scripted {
        address: &'static str,
        down: Mutex<bool>,
        replies: Mutex<VecDeque<Result<Value>>>,
        marks: Mutex<Vec<Option<Duration>>>,
        queried: Mutex<u32>,
    }

    impl Scripted {
        fn new(address: &'static str, replies: Vec<Result<Value>>) -> Self {
            Scripted {
                address,
                down: Mutex::new(false),
                replies: Mutex::new(replies.into()),
                marks: Mutex::new(Vec::new()),
                queried: Mutex::new(0),
            }
        }

        fn down(self) -> Self {
            *self.down.lock().unwrap() = true;
            self
        }

        fn marks(&self) -> Vec<Option<Duration>> {
            self.marks.lock().unwrap().clone()
        }

        fn queried(&self) -> u32 {
            *self.queried.lock().unwrap()
        }
    }

    impl FailoverNode for Scripted {
        fn address(&self) -> &str {
            self.address
        }

        fn is_down(&self) -> bool {
            *self.down.lock().unwrap()
        }

        fn mark(&self, down_for: Option<Duration>) {
            *self.down.lock().unwrap() = down_for.is_some();
            self.marks.lock().unwrap().push(down_for);
        }

        fn query<T: FromRedisValue>(&self, _cmd: &Cmd) -> impl Future<Output = Result<T>> + Send {
            *self.queried.lock().unwrap() += 1;
            let reply = self
                .replies
                .lock()
                .unwrap()
                .pop_front()
                .expect("a node queried more often than scripted");
            async move {
                reply.and_then(|value| {
                    Ok(redis::from_redis_value(value).map_err(redis::RedisError::from)?)
                })
            }
        }
    }

    const DOWN_FOR: Duration = Duration::from_secs(2);

    fn set(nodes: Vec<Scripted>) -> NodeSet<Scripted> {
        NodeSet {
            nodes,
            next: AtomicUsize::new(0),
            retry_after: DOWN_FOR,
        }
    }

    fn transport() -> Error {
        Error::Transport(redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )))
    }

    fn drift() -> Error {
        Error::Drift {
            message: "the clock is ahead".into(),
            retry_in: Some(Duration::from_millis(3)),
        }
    }

    fn server(code: &str) -> Error {
        Error::Server {
            code: code.into(),
            message: String::new(),
        }
    }

    fn id(value: i64) -> Result<Value> {
        Ok(Value::Int(value))
    }

    async fn call(nodes: &NodeSet<Scripted>, metrics: &Metrics) -> Result<i64> {
        nodes
            .run(&crate::commands::build::snowflake_next("k"), metrics)
            .await
    }

    #[tokio::test]
    async fn a_failed_node_is_marked_down_and_the_next_one_answers() {
        let nodes = set(vec![
            Scripted::new("a", vec![Err(transport())]),
            Scripted::new("b", vec![id(7)]),
        ]);
        let metrics = Metrics::default();
        assert_eq!(call(&nodes, &metrics).await.unwrap(), 7);
        assert_eq!(nodes.nodes[0].marks(), vec![Some(DOWN_FOR)]);
        assert_eq!(nodes.nodes[1].marks(), vec![None]);
        let seen = metrics.snapshot();
        assert_eq!((seen.failovers, seen.transport_errors), (1, 1));
    }

    #[tokio::test]
    async fn a_drift_refusal_moves_on_without_marking_the_node_down() {
        let nodes = set(vec![
            Scripted::new("a", vec![Err(drift())]),
            Scripted::new("b", vec![id(7)]),
        ]);
        let metrics = Metrics::default();
        assert_eq!(call(&nodes, &metrics).await.unwrap(), 7);
        assert!(nodes.nodes[0].marks().is_empty());
        assert_eq!(metrics.snapshot().refusals, 1);
    }

    #[tokio::test]
    async fn a_node_refused_by_the_identity_check_or_loading_is_set_aside() {
        for refusal in [
            Error::Deployment("offset changed".into()),
            server("LOADING"),
        ] {
            let nodes = set(vec![
                Scripted::new("a", vec![Err(refusal)]),
                Scripted::new("b", vec![id(7)]),
            ]);
            assert_eq!(call(&nodes, &Metrics::default()).await.unwrap(), 7);
            assert_eq!(nodes.nodes[0].marks(), vec![Some(DOWN_FOR)]);
        }
    }

    #[tokio::test]
    async fn an_error_retrying_cannot_fix_is_the_answer_and_no_other_node_is_tried() {
        for error in [
            Error::Auth {
                code: "NOPERM".into(),
                message: String::new(),
            },
            server("WRONGTYPE"),
        ] {
            let nodes = set(vec![
                Scripted::new("a", vec![Err(error)]),
                Scripted::new("b", vec![id(7)]),
            ]);
            let answer = call(&nodes, &Metrics::default()).await;
            assert!(answer.is_err(), "{answer:?}");
            assert!(!answer.unwrap_err().is_retryable());
            assert_eq!(nodes.nodes[1].queried(), 0);
            assert!(nodes.nodes[0].marks().is_empty(), "not marked down");
        }
    }

    #[tokio::test]
    async fn nodes_marked_down_are_tried_last_not_never() {
        let nodes = set(vec![
            Scripted::new("a", vec![id(1)]).down(),
            Scripted::new("b", vec![Err(transport())]),
        ]);
        // b is tried first (a is marked down), fails, and a — marked down, but answering —
        // serves and is marked up.
        assert_eq!(call(&nodes, &Metrics::default()).await.unwrap(), 1);
        assert_eq!(nodes.nodes[0].marks(), vec![None]);
        assert!(!nodes.nodes[0].is_down());
        assert_eq!(nodes.nodes[1].marks(), vec![Some(DOWN_FOR)]);
    }

    #[tokio::test]
    async fn calls_go_round_robin_over_healthy_nodes() {
        let nodes = set(vec![
            Scripted::new("a", vec![id(1), id(3)]),
            Scripted::new("b", vec![id(2), id(4)]),
        ]);
        let metrics = Metrics::default();
        let mut answers = Vec::new();
        for _ in 0..4 {
            answers.push(call(&nodes, &metrics).await.unwrap());
        }
        assert_eq!(answers, vec![1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn when_every_node_fails_the_error_names_each_and_the_last_failure() {
        let nodes = set(vec![
            Scripted::new("a", vec![Err(transport())]),
            Scripted::new("b", vec![Err(drift())]),
        ]);
        match call(&nodes, &Metrics::default()).await {
            Err(Error::NoNodeAvailable { tried, last }) => {
                assert_eq!(tried, vec!["a".to_string(), "b".to_string()]);
                assert!(matches!(*last, Error::Drift { .. }), "{last:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_single_node_answers_its_own_error() {
        let nodes = set(vec![Scripted::new("a", vec![Err(drift())])]);
        let answer = call(&nodes, &Metrics::default()).await;
        assert!(matches!(answer, Err(Error::Drift { .. })), "{answer:?}");
    }

    #[tokio::test]
    async fn a_reply_of_the_wrong_type_is_a_protocol_error_and_not_retried() {
        let nodes = set(vec![
            Scripted::new("a", vec![Ok(Value::SimpleString("OK".into()))]),
            Scripted::new("b", vec![id(7)]),
        ]);
        let answer = call(&nodes, &Metrics::default()).await;
        assert!(matches!(answer, Err(Error::Protocol(_))), "{answer:?}");
        assert_eq!(nodes.nodes[1].queried(), 0);
    }
}
