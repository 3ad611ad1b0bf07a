//! Asking a node for its identity: the one place the client does it, at connect and on
//! every new pooled connection.

use std::collections::HashMap;

use redis::ConnectionInfo;

use crate::deployment::NodeIdentity;
use crate::error::{Error, Result};
use crate::node_link::short_connection;
use crate::settings::Settings;

/// The module command that answers a node's identity; keyless and read-only, so an
/// application's ACL user needs no `CONFIG` (an @admin command) to run the check.
pub(crate) const IDENTITY_COMMAND: &str = "IDGEN.IDENTITY";

/// Reads one node's identity over a short-lived connection (at connect, and for replicas
/// Sentinel names later).
pub(crate) async fn read(node: &ConnectionInfo, settings: &Settings) -> Result<NodeIdentity> {
    let (_, mut conn) = short_connection(node, settings).await?;
    fetch(&mut conn, &node.addr().to_string()).await
}

/// Reads the identity of the node behind `connection`, whose address is `address`.
pub(crate) async fn fetch<C: redis::aio::ConnectionLike>(
    connection: &mut C,
    address: &str,
) -> Result<NodeIdentity> {
    let reply: redis::RedisResult<HashMap<String, String>> =
        redis::cmd(IDENTITY_COMMAND).query_async(connection).await;
    match reply {
        Ok(fields) => NodeIdentity::from_fields(address, &fields),
        Err(error) => Err(explain(address, error)),
    }
}

/// Turns the refusals a misconfigured node gives into a deployment error that says what to
/// fix; anything else stays a transport or server error.
fn explain(address: &str, error: redis::RedisError) -> Error {
    let detail = error.detail().unwrap_or_default().to_lowercase();
    match error.code() {
        Some("ERR") if detail.contains("unknown command") => Error::Deployment(format!(
            "{address} does not have the idgen module loaded (or one older than 0.1.0, \
             without {IDENTITY_COMMAND})"
        )),
        Some("NOPERM") => Error::Deployment(format!(
            "the ACL user may not run {IDENTITY_COMMAND} on {address}: grant it \
             (+idgen.identity, or +@read on Redis 7.2+ and Valkey) along with the ID commands"
        )),
        _ => error.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::explain;

    #[test]
    fn a_node_without_the_module_and_a_user_without_the_grant_are_named() {
        let unknown = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "unknown command 'IDGEN.IDENTITY', with args beginning with: ".to_string(),
        ));
        let text = explain("x:9", unknown).to_string();
        assert!(
            text.contains("x:9 does not have the idgen module loaded"),
            "{text}"
        );
    }
}
