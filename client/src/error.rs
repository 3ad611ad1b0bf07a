//! The client's error type: the module's refusals by their codes, connection failures,
//! credentials and permissions, unreadable replies, and deployment problems — each saying
//! whether a retry can help ([`Error::is_retryable`]).

use std::fmt;

mod certificate;

/// Everything that can go wrong. New variants may be added; match with a `_` arm. Cloned
/// for each caller that waited on a fetch that failed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The server refused because the ID clock would run more than `max-drift-ms` ahead of
    /// its wall clock (`-DRIFT`): a burst too large, the clock stepped back, or the server
    /// just started with its restart fence on. Nothing was issued; retrying later works.
    Drift {
        /// The server's message.
        message: String,
        /// When the same request fits, as the server says (`… fits in R ms`); `None` if the
        /// message does not say.
        retry_in: Option<std::time::Duration>,
    },
    /// A segment counter would pass 2^63 − 1 (`-OVERFLOW`). Nothing was issued.
    Overflow {
        /// The server's message.
        message: String,
    },
    /// The snowflake layout's time field has run out (`-EXHAUSTED`).
    Exhausted {
        /// The server's message.
        message: String,
    },
    /// Any other error reply (`-ERR`, `-WRONGTYPE`, `-READONLY`, …), with its code.
    Server {
        /// The reply's code, such as `ERR` or `WRONGTYPE`.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The connection failed or timed out. The error is redis-rs's, re-exported as
    /// [`crate::redis`] so that matching on it needs no separate dependency. Retryable: the
    /// node is marked down and another (or the same, later) is tried.
    Transport(redis::RedisError),
    /// The server refused the credentials (`WRONGPASS`, `NOAUTH`) or the ACL user may not run
    /// the command or touch the key (`NOPERM`). Not retryable: it needs a change of
    /// configuration, and it does not mark the node down.
    Auth {
        /// The reply's code (`NOPERM`, `WRONGPASS`, `NOAUTH`), or `AUTH` when redis-rs
        /// reports a failed authentication without one.
        code: String,
        /// The server's message.
        message: String,
    },
    /// A reply could not be read as the type asked for, or could not be parsed: a program
    /// error or a server that is not what the client expects. Not retryable.
    Protocol(redis::RedisError),
    /// No node could serve the call; `last` is the last node's error.
    NoNodeAvailable {
        /// The nodes tried, by address.
        tried: Vec<String>,
        /// What the last one answered.
        last: Box<Error>,
    },
    /// The deployment is misconfigured: nodes disagree on step or layout, two share an
    /// offset, or a node does not have the module loaded. Names the nodes.
    Deployment(String),
    /// A call's arguments were rejected before anything was sent.
    InvalidArgument(String),
    /// The server's TLS certificate was not accepted: signed by a CA the client does not
    /// trust (a private CA, a self-signed certificate), expired, or issued for another name.
    /// The message says how to trust a private CA. Not retryable: it needs a change of
    /// configuration; in `Nodes` mode the node is set aside and another tried.
    Certificate(String),
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Whether another node (or a later retry) may succeed where this failed: connection
    /// failures, drift refusals, a node still loading its data (`LOADING`) or comparing its
    /// identity with the cluster's after a start (`TRYAGAIN`). The client
    /// tries these again by itself (Sentinel mode also what a failover causes: `READONLY`,
    /// `MASTERDOWN`, `TRYAGAIN`); a connection failure or `LOADING` sets that node aside
    /// for `node_retry_after`, and so does a node refused by the identity check, which
    /// another node may replace though no retry mends it. Credentials, permissions,
    /// unreadable replies and the module's other refusals are returned at once.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Transport(_) | Error::Drift { .. } => true,
            // TRYAGAIN: a cluster node that started moments ago and is still comparing its
            // identity with the others (a second at most, normally).
            Error::Server { code, .. } => code == "LOADING" || code == "TRYAGAIN",
            _ => false,
        }
    }

    /// When the same request fits, if this is a DRIFT refusal that says so (at least a
    /// millisecond: the server rounds down); in `Nodes` mode, the last node's.
    pub(crate) fn fits_in(&self) -> Option<std::time::Duration> {
        match self {
            Error::Drift {
                retry_in: Some(wait),
                ..
            } => Some((*wait).max(std::time::Duration::from_millis(1))),
            Error::NoNodeAvailable { last, .. } => last.fits_in(),
            _ => None,
        }
    }

    /// This error, with `address` named if it is a certificate problem (the TLS library does
    /// not say which server it was talking to).
    pub(crate) fn naming_node(self, address: &str) -> Error {
        match self {
            Error::Certificate(problem) => Error::Certificate(format!("{address}: {problem}")),
            other => other,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(error: redis::RedisError) -> Self {
        let message = error.detail().unwrap_or_default().to_string();
        match error.kind() {
            redis::ErrorKind::AuthenticationFailed => {
                return Error::Auth {
                    code: error.code().unwrap_or("AUTH").to_string(),
                    message: error.to_string(),
                }
            }
            redis::ErrorKind::UnexpectedReturnType | redis::ErrorKind::Parse => {
                return Error::Protocol(error)
            }
            redis::ErrorKind::Io if certificate::is_certificate_error(&error) => {
                return Error::Certificate(certificate::explain_certificate_error(&error))
            }
            _ => {}
        }
        match error.code() {
            Some(DRIFT) => Error::Drift {
                retry_in: retry_in(&message),
                message,
            },
            Some(OVERFLOW) => Error::Overflow { message },
            Some(EXHAUSTED) => Error::Exhausted { message },
            Some(code @ ("NOPERM" | "WRONGPASS" | "NOAUTH")) => Error::Auth {
                code: code.to_string(),
                message,
            },
            Some(code) => Error::Server {
                code: code.to_string(),
                message,
            },
            None => Error::Transport(error),
        }
    }
}

/// The error codes of the module's own refusals (`-DRIFT …`), as `idgen_core::IdError::code`
/// gives them; every other refusal of the module is a plain `-ERR` about the arguments.
const DRIFT: &str = "DRIFT";
const OVERFLOW: &str = "OVERFLOW";
const EXHAUSTED: &str = "EXHAUSTED";

/// The wait a DRIFT refusal names: "… the same request fits in 12 ms …". The one value read
/// from a refusal's text, because the reply has no other place for it (an error reply is a
/// code and one line); every module release so far writes it so, and a test below holds
/// this to the text the module's core writes.
fn retry_in(message: &str) -> Option<std::time::Duration> {
    let (_, rest) = message.split_once("fits in ")?;
    let ms: u64 = rest.split(' ').next()?.parse().ok()?;
    Some(std::time::Duration::from_millis(ms))
}

impl<E: Into<Error>> From<bb8::RunError<E>> for Error {
    fn from(error: bb8::RunError<E>) -> Self {
        match error {
            bb8::RunError::User(error) => error.into(),
            bb8::RunError::TimedOut => Error::Transport(redis::RedisError::from((
                redis::ErrorKind::Io,
                "timed out waiting for a pooled connection",
            ))),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Drift { message, .. } => write!(f, "refused (DRIFT): {message}"),
            Error::Overflow { message } => write!(f, "refused (OVERFLOW): {message}"),
            Error::Exhausted { message } => write!(f, "refused (EXHAUSTED): {message}"),
            Error::Server { code, message } => write!(f, "{code}: {message}"),
            Error::Transport(error) => write!(f, "connection failed: {error}"),
            Error::Auth { code, message } => write!(f, "not allowed ({code}): {message}"),
            Error::Protocol(error) => write!(f, "unexpected reply: {error}"),
            Error::NoNodeAvailable { tried, last } => {
                write!(
                    f,
                    "no node could serve the call (tried {}); last error: {last}",
                    tried.join(", ")
                )
            }
            Error::Deployment(problem) => write!(f, "misconfigured deployment: {problem}"),
            Error::InvalidArgument(problem) => write!(f, "invalid argument: {problem}"),
            Error::Certificate(problem) => write!(f, "TLS certificate not accepted: {problem}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport(error) | Error::Protocol(error) => Some(error),
            Error::NoNodeAvailable { last, .. } => Some(last.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drift_refusal_says_when_the_request_fits() {
        // The reply as it comes off the wire.
        let refusal = redis::parse_redis_value(
            b"-DRIFT this burst would run the ID clock 2003 ms ahead of the wall clock; \
              nothing was issued: the same request fits in 3 ms, or ask for fewer IDs now\r\n",
        )
        .unwrap()
        .extract_error()
        .unwrap_err();
        let error = Error::from(refusal);
        assert!(
            matches!(error, Error::Drift { retry_in: Some(wait), .. } if wait.as_millis() == 3),
            "{error:?}"
        );
        assert!(error.is_retryable());
    }

    /// Each refusal of the module, as it writes it (`-CODE text`, from `idgen_core`), is
    /// read as the matching variant — by its code — and DRIFT's wait is found in its text.
    #[test]
    fn the_modules_refusals_are_known_by_their_codes() {
        use idgen_core::IdError;
        let wire = |refusal: &IdError| format!("-{} {refusal}\r\n", refusal.code());
        for restart_fence in [false, true] {
            let drift = IdError::Drift {
                ahead_ms: 2010,
                limit_ms: 2000,
                retry_in_ms: 17,
                restart_fence,
            };
            let error = reply_error(wire(&drift).as_bytes());
            assert!(
                matches!(&error, Error::Drift { retry_in: Some(wait), message }
                    if wait.as_millis() == 17 && *message == drift.to_string()),
                "{error:?}"
            );
        }
        let bound_ahead = IdError::BoundAhead {
            bound: 1,
            ahead_ms: 5000,
            limit_ms: 2000,
        };
        let error = reply_error(wire(&bound_ahead).as_bytes());
        assert!(
            matches!(&error, Error::Drift { retry_in: None, .. }),
            "{error:?}"
        );
        let overflow = IdError::Overflow {
            current: i64::MAX - 9,
            count: 10,
            fence: 0,
            room: 9,
            room_without_fence: 9,
        };
        assert!(matches!(
            reply_error(wire(&overflow).as_bytes()),
            Error::Overflow { .. }
        ));
        let exhausted = IdError::TimeExhausted {
            expires_unix_ms: 1_800_000_000_000,
        };
        assert!(matches!(
            reply_error(wire(&exhausted).as_bytes()),
            Error::Exhausted { .. }
        ));
        let count = IdError::CountOutOfRange { count: 0, max: 9 };
        assert!(matches!(
            reply_error(wire(&count).as_bytes()),
            Error::Server { code, .. } if code == "ERR"
        ));
    }

    fn reply_error(wire: &[u8]) -> Error {
        Error::from(
            redis::parse_redis_value(wire)
                .unwrap()
                .extract_error()
                .unwrap_err(),
        )
    }

    #[test]
    fn each_kind_of_failure_says_whether_a_retry_helps() {
        let noperm = reply_error(b"-NOPERM User ids has no permissions to access the 'x' key\r\n");
        assert!(
            matches!(&noperm, Error::Auth { code, .. } if code == "NOPERM"),
            "{noperm:?}"
        );
        assert!(!noperm.is_retryable());
        let wrongpass = reply_error(b"-WRONGPASS invalid username-password pair\r\n");
        assert!(matches!(&wrongpass, Error::Auth { .. }), "{wrongpass:?}");
        let wrongtype = reply_error(b"-WRONGTYPE Operation against a key\r\n");
        assert!(matches!(&wrongtype, Error::Server { code, .. } if code == "WRONGTYPE"));
        assert!(!wrongtype.is_retryable());
        let loading = reply_error(b"-LOADING Redis is loading the dataset in memory\r\n");
        assert!(matches!(&loading, Error::Server { code, .. } if code == "LOADING"));
        assert!(
            loading.is_retryable(),
            "a node loading its data serves soon"
        );
        let io = Error::from(redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(
            matches!(io, Error::Transport(_)) && io.is_retryable(),
            "{io:?}"
        );
        let not_a_number =
            redis::from_redis_value::<i64>(redis::Value::SimpleString("OK".into())).unwrap_err();
        let protocol = Error::from(redis::RedisError::from(not_a_number));
        assert!(
            matches!(protocol, Error::Protocol(_)) && !protocol.is_retryable(),
            "{protocol:?}"
        );
        assert!(
            protocol.to_string().starts_with("unexpected reply: "),
            "{protocol}"
        );
    }
}
