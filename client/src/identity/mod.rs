//! Asking a node for its identity and admitting it: the one place the client does it — at
//! connect, on every new pooled connection, for cluster members checked again, and for the
//! master and replicas Sentinel names.
//!
//! One error policy for every caller: a node that could not be asked (unreachable, loading,
//! a connection lost) gives that error as it is, which callers treat as "not checked now";
//! a node without the module, or a user who may not ask, is a [`Error::Deployment`] saying
//! what to fix; a node whose identity does not fit the deployment is a
//! [`Error::Deployment`] naming the clash, logged at error level here.

use std::collections::HashMap;

use crate::commands::{build, names::IDGEN_IDENTITY};
use crate::error::{Error, Result};

pub(crate) mod deployment;
pub(crate) mod guard;

use {deployment::NodeIdentity, guard::IdentityGuard};

/// Reads the identity of the node behind `connection` (whose address is `address`) and holds
/// it to the deployment `guard` knows; the identity, if admitted. Before the deployment is
/// checked at connect the guard admits every node (the check at connect decides).
pub(crate) async fn admit<C: redis::aio::ConnectionLike>(
    connection: &mut C,
    address: &str,
    guard: &IdentityGuard,
) -> Result<NodeIdentity> {
    let identity = fetch(connection, address).await?;
    match guard.admit(identity.clone()) {
        Ok(()) => Ok(identity),
        Err(problem) => {
            tracing::error!(node = %address, %problem, "node refused by the identity check");
            Err(Error::Deployment(problem))
        }
    }
}

/// Reads the identity of the node behind `connection`, whose address is `address`.
async fn fetch<C: redis::aio::ConnectionLike>(
    connection: &mut C,
    address: &str,
) -> Result<NodeIdentity> {
    let reply: redis::RedisResult<HashMap<String, String>> =
        build::idgen_identity().query_async(connection).await;
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
        // The server's own text for a command it does not know.
        Some("ERR") if detail.contains("unknown command") => Error::Deployment(format!(
            "{address} does not have the idgen module loaded (or one older than 0.1.0, \
             without {IDGEN_IDENTITY})"
        )),
        Some("NOPERM") => Error::Deployment(format!(
            "the ACL user may not run {IDGEN_IDENTITY} on {address}: grant it \
             (+{}, or +@read on Redis 7.2+ and Valkey) along with the ID commands",
            IDGEN_IDENTITY.to_lowercase()
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
        let noperm = redis::parse_redis_value(
            b"-NOPERM User app has no permissions to run the 'idgen.identity' command\r\n",
        )
        .unwrap()
        .extract_error()
        .unwrap_err();
        let text = explain("x:9", noperm).to_string();
        assert!(
            text.contains("may not run IDGEN.IDENTITY on x:9: grant it (+idgen.identity,"),
            "{text}"
        );
    }
}
