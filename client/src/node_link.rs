//! How the client opens a connection to a node: the settings' timeouts, and the short-lived
//! connections (outside the pools) that the checks at connect use.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionInfo};

use crate::settings::Settings;

/// The timeouts of the settings, for every connection the client opens to a node.
pub(crate) fn connection_config(settings: &Settings) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.response_timeout))
}

/// A short-lived connection (outside the pools) with the configured timeouts, for the
/// checks made at connect.
pub(crate) async fn short_connection(
    node: &ConnectionInfo,
    settings: &Settings,
) -> crate::Result<(redis::Client, MultiplexedConnection)> {
    let client = redis::Client::open(node.clone())?;
    let conn = client
        .get_multiplexed_async_connection_with_config(&connection_config(settings))
        .await?;
    Ok((client, conn))
}
