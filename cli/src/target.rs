//! Which deployment the command line names, and every node in it: the URLs given, a
//! cluster's members from `CLUSTER NODES`, or a Sentinel's master and replicas.

use std::collections::HashMap;
use std::time::Duration;

use idgen_client::redis::{
    self, aio::MultiplexedConnection, AsyncConnectionConfig, ConnectionAddr, ConnectionInfo,
    IntoConnectionInfo, RedisConnectionInfo,
};
use idgen_client::Topology;

use crate::args::TargetArgs;
use crate::error::{from_redis, CliError};

/// The URL used when none is given, as redis-cli does.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

/// The deployment named on the command line.
#[derive(Debug, Clone)]
pub enum Target {
    /// Independent nodes (or one).
    Nodes(Vec<ConnectionInfo>),
    /// A Redis Cluster, by seeds.
    Cluster(Vec<ConnectionInfo>),
    /// A master and replicas under Sentinel.
    Sentinel {
        /// The sentinels.
        sentinels: Vec<ConnectionInfo>,
        /// The monitored master's name.
        service: String,
        /// Credentials and TLS for the data nodes (boxed: a `ConnectionInfo` is large).
        data_nodes: Box<ConnectionInfo>,
    },
}

/// One data node to ask, and what the topology says it is.
#[derive(Debug, Clone)]
pub struct NodeAddress {
    /// How to reach it.
    pub info: ConnectionInfo,
    /// `host:port`.
    pub address: String,
    /// The topology marks it failed (a cluster node flagged `fail`, a replica a sentinel
    /// considers down): it is still asked, and reported if it does not answer.
    pub flagged_down: bool,
}

/// How long to wait for connects and answers.
pub fn connection_config(timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
}

/// Opens a connection to `info`; an error names the node.
pub async fn connect(
    info: &ConnectionInfo,
    timeout: Duration,
) -> Result<MultiplexedConnection, CliError> {
    let address = info.addr().to_string();
    let client = redis::Client::open(info.clone()).map_err(|e| from_redis(&address, &e))?;
    client
        .get_multiplexed_async_connection_with_config(&connection_config(timeout))
        .await
        .map_err(|e| from_redis(&address, &e))
}

/// Parses one URL; a malformed one is a usage error that quotes it.
pub fn parse_url(url: &str) -> Result<ConnectionInfo, CliError> {
    url.into_connection_info().map_err(|error| {
        CliError::usage(format!(
            "{url:?} is not a node URL ({error}); write redis://[user:password@]host:port \
             or rediss://… for TLS"
        ))
    })
}

fn parse_urls(urls: &[String]) -> Result<Vec<ConnectionInfo>, CliError> {
    urls.iter().map(|url| parse_url(url)).collect()
}

impl Target {
    /// The addresses the command line gave: the nodes, the cluster's seeds or the sentinels.
    pub fn addresses(&self) -> &[ConnectionInfo] {
        match self {
            Target::Nodes(infos) | Target::Cluster(infos) => infos,
            Target::Sentinel { sentinels, .. } => sentinels,
        }
    }

    /// The deployment from the topology options, plus node URLs given as positional
    /// arguments (`idgen check URL URL`).
    pub fn from_args(args: &TargetArgs, positional: &[String]) -> Result<Target, CliError> {
        let mut nodes = args.nodes.clone();
        nodes.extend(positional.iter().cloned());
        let topologies = [
            !nodes.is_empty(),
            !args.cluster.is_empty(),
            !args.sentinel.is_empty(),
        ];
        if topologies.iter().filter(|given| **given).count() > 1 {
            return Err(CliError::usage(
                "give node URLs, --cluster or --sentinel, not more than one of them",
            ));
        }
        if !args.sentinel.is_empty() {
            let Some(service) = args.service.clone() else {
                return Err(CliError::usage(
                    "--sentinel needs --service NAME (the master's name in `sentinel monitor`)",
                ));
            };
            let sentinels = parse_urls(&args.sentinel)?;
            let data_nodes = match &args.data_nodes {
                Some(url) => parse_url(url)?,
                None => sentinels[0]
                    .clone()
                    .set_redis_settings(RedisConnectionInfo::default()),
            };
            return Ok(Target::Sentinel {
                sentinels,
                service,
                data_nodes: Box::new(data_nodes),
            });
        }
        if args.service.is_some() || args.data_nodes.is_some() {
            return Err(CliError::usage(
                "--service and --data-nodes go with --sentinel",
            ));
        }
        if !args.cluster.is_empty() {
            return Ok(Target::Cluster(parse_urls(&args.cluster)?));
        }
        if nodes.is_empty() {
            nodes.push(DEFAULT_URL.to_string());
        }
        Ok(Target::Nodes(parse_urls(&nodes)?))
    }

    /// The same deployment for the client crate.
    pub fn topology(&self) -> Result<Topology, CliError> {
        let topology = match self {
            Target::Nodes(nodes) if nodes.len() == 1 => Topology::single(nodes[0].clone()),
            Target::Nodes(nodes) => Topology::nodes(nodes.clone()),
            Target::Cluster(seeds) => Topology::cluster(seeds.clone()),
            Target::Sentinel {
                sentinels,
                service,
                data_nodes,
            } => Topology::sentinel(service.clone(), sentinels.clone())
                .and_then(|topology| topology.data_nodes((**data_nodes).clone()))
                .map(Topology::from),
        };
        topology.map_err(|error| CliError::usage(error.to_string()))
    }

    /// Every data node of the deployment: masters and replicas.
    pub async fn discover(&self, timeout: Duration) -> Result<Vec<NodeAddress>, CliError> {
        match self {
            Target::Nodes(nodes) => Ok(nodes.iter().map(|info| node(info, false)).collect()),
            Target::Cluster(seeds) => cluster_members(seeds, timeout).await,
            Target::Sentinel {
                sentinels,
                service,
                data_nodes,
            } => sentinel_members(sentinels, service, data_nodes, timeout).await,
        }
    }
}

fn node(info: &ConnectionInfo, flagged_down: bool) -> NodeAddress {
    NodeAddress {
        address: info.addr().to_string(),
        info: info.clone(),
        flagged_down,
    }
}

/// `template`'s credentials and TLS at `host:port`.
fn at(template: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_string(), port),
    };
    template.clone().set_addr(addr)
}

async fn cluster_members(
    seeds: &[ConnectionInfo],
    timeout: Duration,
) -> Result<Vec<NodeAddress>, CliError> {
    let mut last_error = None;
    for seed in seeds {
        let reply = async {
            let mut conn = connect(seed, timeout).await?;
            redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async::<String>(&mut conn)
                .await
                .map_err(|e| from_redis(&seed.addr().to_string(), &e))
        };
        match reply.await {
            Ok(text) => {
                let mut members = idgen_client::cluster_members(&text);
                // CLUSTER NODES lists members in no set order; reports read better sorted.
                members.sort();
                return Ok(members
                    .into_iter()
                    .map(|member| {
                        let down = member.failed || member.suspected;
                        node(&at(seed, &member.host, member.port), down)
                    })
                    .collect());
            }
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| CliError::usage("--cluster needs a URL")))
}

async fn sentinel_members(
    sentinels: &[ConnectionInfo],
    service: &str,
    data_nodes: &ConnectionInfo,
    timeout: Duration,
) -> Result<Vec<NodeAddress>, CliError> {
    let mut last_error = None;
    for sentinel in sentinels {
        let address = sentinel.addr().to_string();
        let attempt = async {
            let mut conn = connect(sentinel, timeout).await?;
            let master: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(service)
                .query_async(&mut conn)
                .await
                .map_err(|e| from_redis(&address, &e))?;
            let Some((host, port)) = master else {
                return Err(CliError::failed(format!(
                    "{address}: this sentinel does not monitor a master named {service:?}"
                )));
            };
            let replicas: Vec<HashMap<String, String>> = redis::cmd("SENTINEL")
                .arg("REPLICAS")
                .arg(service)
                .query_async(&mut conn)
                .await
                .map_err(|e| from_redis(&address, &e))?;
            let mut members = vec![node(&at(data_nodes, &host, port), false)];
            for replica in replicas {
                let (Some(host), Some(port)) = (
                    replica.get("ip"),
                    replica.get("port").and_then(|p| p.parse().ok()),
                ) else {
                    continue;
                };
                let down = replica
                    .get("flags")
                    .is_some_and(|flags| flags.contains("down"));
                members.push(node(&at(data_nodes, host, port), down));
            }
            Ok(members)
        };
        match attempt.await {
            Ok(members) => return Ok(members),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| CliError::usage("--sentinel needs a URL")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_url_is_a_usage_error() {
        let error = parse_url("http//nowhere").unwrap_err();
        assert_eq!(error.code, crate::error::EXIT_USAGE);
        assert!(error
            .message
            .contains("\"http//nowhere\" is not a node URL"));
    }
}
