//! Finding every member of a Redis Cluster (masters and replicas), so that each one's
//! identity can be checked at connect.

use redis::ConnectionInfo;

use crate::address;
use crate::error::{Error, Result};
use crate::node_link::short_connection;
use crate::settings::Settings;

/// Every live member of the cluster, from `CLUSTER NODES` on the first seed that answers.
/// Each member gets the seed's credentials and TLS settings: a password-protected or TLS
/// cluster needs them on every node.
pub(crate) async fn members(
    seeds: &[ConnectionInfo],
    settings: &Settings,
) -> Result<Vec<ConnectionInfo>> {
    let mut last_error = None;
    for seed in seeds {
        let attempt = async {
            let (_, mut conn) = short_connection(seed, settings).await?;
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async(&mut conn)
                .await?;
            Ok::<String, Error>(nodes)
        };
        match attempt.await {
            Ok(nodes) => {
                return parse_cluster_nodes(&nodes)
                    .into_iter()
                    .map(|(host, port)| address::at(seed, "a cluster seed", host, port))
                    .collect()
            }
            Err(Error::Auth { code, .. }) if code == "NOPERM" => {
                return Err(Error::Deployment(format!(
                    "the ACL user may not run CLUSTER NODES on {}: grant +cluster|nodes \
                     (and +cluster|slots, which redis-rs needs to route by slot)",
                    seed.addr()
                )))
            }
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| Error::InvalidArgument("no cluster seed given".into())))
}

/// `(host, port)` of the nodes in a `CLUSTER NODES` reply that are not marked failed.
fn parse_cluster_nodes(reply: &str) -> Vec<(String, u16)> {
    reply
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let address = fields.get(1)?.split('@').next()?;
            let flags = fields.get(2)?;
            let failed = flags
                .split(',')
                .any(|flag| matches!(flag, "fail" | "noaddr" | "handshake"));
            let (host, port) = address.rsplit_once(':')?;
            (!failed && !host.is_empty()).then(|| Some((host.to_string(), port.parse().ok()?)))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lists_live_masters_and_replicas() {
        let reply = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected
d4 127.0.0.1:7004@17004 slave,fail b2 0 0 2 disconnected
e5 :0@0 master,noaddr - 0 0 0 disconnected
";
        assert_eq!(
            parse_cluster_nodes(reply),
            [
                ("127.0.0.1".to_string(), 7000),
                ("127.0.0.1".to_string(), 7001),
                ("127.0.0.1".to_string(), 7003)
            ]
        );
    }
}
