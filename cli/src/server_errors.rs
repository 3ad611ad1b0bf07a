//! The server's refusals the tool tells apart, by their code word or Redis's own text.

use idgen_client::redis::RedisError;

/// The ACL user may not run the command or touch the key.
pub fn is_noperm(error: &RedisError) -> bool {
    error.code() == Some("NOPERM")
}

/// The server does not know the command: Redis's and Valkey's own text for it (`ERR unknown
/// command '…'`), the sign of a node without the module.
pub fn is_unknown_command(error: &RedisError) -> bool {
    error
        .detail()
        .unwrap_or_default()
        .to_lowercase()
        .contains("unknown command")
}
