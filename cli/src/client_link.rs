//! The client crate's `Client` for the deployment named on the command line, with the
//! tool's timeout and no long retries: a person is waiting.

use std::time::Duration;

use idgen_client::{Client, Error, Settings};

use crate::error::{CliError, EXIT_UNREACHABLE};
use crate::target::Target;

/// Connects (the client checks every node's identity on the way).
pub async fn connect(target: &Target, timeout: Duration) -> Result<Client, CliError> {
    let settings = Settings::default()
        .pool_size(1)
        .connect_timeout(timeout)
        .response_timeout(timeout)
        .failover_retry_for(timeout);
    match Client::connect_with(target.topology()?, settings).await {
        Ok(client) => Ok(client),
        // The client calls a deployment it could not reach at all misconfigured; a person
        // needs to hear which address did not answer, and why.
        Err(Error::Deployment(problem)) if nothing_reached(&problem) => {
            Err(why_unreachable(target, timeout)
                .await
                .unwrap_or_else(|| CliError::unreachable(problem)))
        }
        Err(error) => {
            let failure = client_error(&error);
            if failure.code != EXIT_UNREACHABLE {
                return Err(failure);
            }
            Err(why_unreachable(target, timeout).await.unwrap_or(failure))
        }
    }
}

/// Whether the client's connect found no node (or no master through the sentinels) at all.
fn nothing_reached(problem: &str) -> bool {
    problem.starts_with("no node could be reached") || problem.contains("named no reachable master")
}

/// Asks each address the command line names (nodes, cluster seeds or sentinels) and says why
/// none answered; `None` when one does (then the client's own message stands).
async fn why_unreachable(target: &Target, timeout: Duration) -> Option<CliError> {
    let mut reasons = Vec::new();
    for info in target.addresses() {
        match crate::target::connect(info, timeout).await {
            Ok(_) => return None,
            Err(error) => reasons.push(error.message),
        }
    }
    (!reasons.is_empty()).then(|| CliError::unreachable(reasons.join("; ")))
}

/// A client error as one line with the exit code it deserves.
pub fn client_error(error: &Error) -> CliError {
    match error {
        Error::Transport(inner)
            if inner.is_io_error() || inner.is_timeout() || inner.is_connection_refusal() =>
        {
            CliError::unreachable(error.to_string())
        }
        Error::Transport(inner) | Error::Protocol(inner)
            if inner.kind() == idgen_client::redis::ErrorKind::Parse =>
        {
            CliError::unreachable(format!(
                "the answer is not Redis's protocol (is this a Redis server?): {error}"
            ))
        }
        Error::NoNodeAvailable { .. } => CliError::unreachable(error.to_string()),
        Error::InvalidArgument(_) => CliError::usage(error.to_string()),
        _ => CliError::failed(error.to_string()),
    }
}
