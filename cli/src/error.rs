//! The tool's failures: each is one line for a person, and an exit code for a script.

use std::fmt;

/// Exit code: every check passed (or the command did what it was asked).
pub const EXIT_OK: u8 = 0;
/// Exit code: a check failed, or a server refused what was asked.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: a node could not be reached (or does not speak Redis).
pub const EXIT_UNREACHABLE: u8 = 2;
/// Exit code: the command line itself is wrong (BSD's `EX_USAGE`).
pub const EXIT_USAGE: u8 = 64;

/// A failure that ends the command: its one-line message and exit code.
#[derive(Debug)]
pub struct CliError {
    /// The exit code ([`EXIT_FAILED`], [`EXIT_UNREACHABLE`] or [`EXIT_USAGE`]).
    pub code: u8,
    /// What went wrong, on one line.
    pub message: String,
}

impl CliError {
    /// The command line is wrong.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// A server refused, or an answer made no sense.
    pub fn failed(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_FAILED,
            message: message.into(),
        }
    }

    /// A node could not be reached.
    pub fn unreachable(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_UNREACHABLE,
            message: message.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the source said.
        let line: String = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        f.write_str(&line)
    }
}

/// Describes a redis-rs error in one line, naming the node; tells an unreachable node
/// apart from one that answered with an error.
pub fn from_redis(address: &str, error: &idgen_client::redis::RedisError) -> CliError {
    if error.is_connection_refusal() {
        CliError::unreachable(format!(
            "{address}: nothing listens there (connection refused): is the server running, \
             and on this port?"
        ))
    } else if error.is_io_error() || error.is_timeout() {
        CliError::unreachable(format!("{address}: cannot reach it: {error}"))
    } else if error.kind() == idgen_client::redis::ErrorKind::Parse {
        CliError::unreachable(format!(
            "{address}: the answer is not Redis's protocol (is this a Redis server?): {error}"
        ))
    } else {
        CliError::failed(format!("{address}: {error}"))
    }
}
