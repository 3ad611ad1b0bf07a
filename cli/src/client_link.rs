//! The client crate's `Client` for the deployment named on the command line, with the
//! tool's timeout and no long retries: a person is waiting.

use std::time::Duration;

use idgen_client::{Client, Error, Settings};

use crate::error::CliError;
use crate::target::Target;

/// Connects (the client checks every node's identity on the way).
pub async fn connect(target: &Target, timeout: Duration) -> Result<Client, CliError> {
    let settings = Settings::default()
        .pool_size(1)
        .connect_timeout(timeout)
        .response_timeout(timeout)
        .failover_retry_for(timeout);
    Client::connect_with(target.topology()?, settings)
        .await
        .map_err(|error| client_error(&error))
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
