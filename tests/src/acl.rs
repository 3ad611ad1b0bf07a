//! ACL users on a test server, created as an operator would, and the server's record of
//! what it denied.

use redis::cmd;

use crate::server::Server;

/// The grants docs/client.md gives an application user of one node: the commands the client
/// sends, on the keys the docs' examples use (`orders`, `orders:*`, `invoice`, `events`).
pub const DOCUMENTED_ONE_NODE_GRANTS: [&str; 8] = [
    "~orders",
    "~orders:*",
    "~invoice",
    "~events",
    "+idgen.identity",
    "+snowflake.next",
    "+segment.next",
    "+ping",
];

/// Creates (or resets) the ACL user `name` with `password` and these rules; adds
/// `+client|setinfo` where the server knows that subcommand (Redis 7.2+ and Valkey):
/// redis-rs announces its name and version with it on connect. ACL users are per node:
/// call this on every node the user connects to.
pub fn create_acl_user(server: &Server, name: &str, password: &str, rules: &[&str]) {
    let setuser = |extra: &[&str]| -> redis::RedisResult<()> {
        cmd("ACL")
            .arg("SETUSER")
            .arg(name)
            .arg("reset")
            .arg("on")
            .arg(format!(">{password}"))
            .arg(rules)
            .arg(extra)
            .query(&mut server.conn())
    };
    if setuser(&["+client|setinfo"]).is_err() {
        setuser(&[]).expect("ACL SETUSER"); // Redis 7.0: no CLIENT SETINFO to grant
    }
}

/// `ACL LOG` read as the default user: every command, key and channel denied since the
/// server started (empty when nothing was denied).
pub fn acl_log(server: &Server) -> Vec<redis::Value> {
    cmd("ACL")
        .arg("LOG")
        .query(&mut server.conn())
        .expect("ACL LOG")
}
