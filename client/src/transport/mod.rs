//! Where a call goes: addresses, pooled connections (each checking its node's identity),
//! nodes, Sentinel, Cluster, retries, the backend a topology builds. Never knows a buffer.

pub(crate) mod address;
pub(crate) mod backend;
pub(crate) mod cluster;
pub(crate) mod cluster_nodes;
pub(crate) mod connect;
pub(crate) mod connection;
pub(crate) mod node;
pub(crate) mod node_set;
pub(crate) mod retry;
pub(crate) mod sentinel;
pub(crate) mod settings;
pub(crate) mod topology;
