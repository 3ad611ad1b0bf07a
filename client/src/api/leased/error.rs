//! Why a leased generator gave no ID.

use std::fmt;

/// Why the generator gave no ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseError {
    /// No lease yet, and the pool had no worker id free at the last attempt (`-EXHAUSTED`):
    /// every worker id is held, or fenced after a server start or failover.
    NoWorkerFree {
        /// The server's message.
        message: String,
    },
    /// The lease's window ended (or its IDs were used up) and no new lease is in place yet.
    WindowEnded,
    /// The window ended while the server could not be reached (or kept failing): the
    /// generator issued IDs until the window's end, and stops until a server answers.
    Unreachable {
        /// The last failure.
        message: String,
    },
    /// More IDs were asked for than the layout's ceiling allows so far ahead of the clock
    /// (or the window starts ahead): the same call works in about `retry_in_ms`.
    Ahead {
        /// About when an ID is available again.
        retry_in_ms: u64,
    },
    /// The server refused for another reason (leases off, no permission, bad settings): a
    /// change of configuration is needed.
    Refused {
        /// The reply's code and message.
        message: String,
    },
    /// The generator was stopped.
    Stopped,
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::NoWorkerFree { message } => {
                write!(f, "no worker id free in the lease pool: {message}")
            }
            LeaseError::WindowEnded => write!(
                f,
                "the lease window ended and no new lease is in place yet (retry shortly)"
            ),
            LeaseError::Unreachable { message } => write!(
                f,
                "the lease window ended while Redis was unreachable: {message}"
            ),
            LeaseError::Ahead { retry_in_ms } => write!(
                f,
                "IDs asked for faster than the layout's ceiling allows: retry in {retry_in_ms} ms"
            ),
            LeaseError::Refused { message } => write!(f, "the lease was refused: {message}"),
            LeaseError::Stopped => write!(f, "the leased generator was stopped"),
        }
    }
}

impl std::error::Error for LeaseError {}
