//! Connecting: building the backend for a topology, finding every data node (cluster
//! members, the master and replicas Sentinel names), and checking that they form one
//! deployment.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::identity::deployment::{check, Deployment};
use crate::identity::guard::IdentityGuard;
use crate::transport::backend::Backend;
use crate::transport::cluster::{self, Cluster};
use crate::transport::node::Node;
use crate::transport::node_set::NodeSet;
use crate::transport::sentinel::SentinelMaster;
use crate::transport::settings::Settings;
use crate::transport::topology::Topology;

/// The backend for `topology`, and the deployment its nodes form (see
/// [`crate::Client::connect_with`]).
#[tracing::instrument(level = "debug", skip(settings))]
pub(crate) async fn connect(
    topology: Topology,
    settings: Settings,
) -> Result<(Backend, Deployment)> {
    let guard = Arc::new(IdentityGuard::default());
    let (backend, members) = match &topology {
        Topology::Single(node) => {
            let node_set =
                NodeSet::new(vec![Node::new(node, &settings, guard.clone())?], &settings);
            (Backend::Nodes(node_set), vec![node.as_ref().clone()])
        }
        Topology::Nodes(nodes) => {
            if nodes.is_empty() {
                return Err(Error::InvalidArgument(
                    "Topology::Nodes needs at least one node".into(),
                ));
            }
            let pools = nodes
                .iter()
                .map(|node| Node::new(node, &settings, guard.clone()))
                .collect::<Result<_>>()?;
            (
                Backend::Nodes(NodeSet::new(pools, &settings)),
                nodes.clone(),
            )
        }
        Topology::Cluster(seeds) => {
            if seeds.is_empty() {
                return Err(Error::InvalidArgument(
                    "Topology::Cluster needs at least one seed".into(),
                ));
            }
            let members = cluster::members(seeds, &settings).await?;
            (
                Backend::Cluster(Cluster::new(seeds, &settings, guard.clone())?),
                members,
            )
        }
        Topology::Sentinel(sentinel) => {
            let master = SentinelMaster::new(sentinel, &settings, guard.clone())?;
            let members = master.members().await.map_err(|error| {
                Error::Deployment(format!(
                    "the sentinels named no reachable master for '{}': {error}",
                    sentinel.master_name
                ))
            })?;
            master.start_with(&members.master)?;
            let mut nodes = vec![members.master];
            nodes.extend(members.replicas);
            (Backend::Sentinel(Box::new(master)), nodes)
        }
    };
    let mut identities = Vec::new();
    let mut unreachable = Vec::new();
    for member in &members {
        // The guard admits every node until the deployment is set below: here it only reads.
        match crate::transport::connection::admit_at(member, &settings, &guard).await {
            Ok(identity) => identities.push(identity),
            Err(Error::Transport(error)) => {
                let address = member.addr().to_string();
                tracing::warn!(node = %address, %error, "node unreachable at connect; not checked");
                unreachable.push(address);
            }
            Err(other) => return Err(other),
        }
    }
    if identities.is_empty() {
        return Err(Error::Deployment(format!(
            "no node could be reached to check the deployment (tried {})",
            unreachable.join(", ")
        )));
    }
    let deployment = check(identities)?;
    guard.set(&deployment);
    Ok((backend, deployment))
}
