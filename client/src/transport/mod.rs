//! Where a call goes and how it gets there: addresses, pooled connections (each checking its
//! node's identity), TLS, independent nodes, Sentinel, Redis Cluster, retries, and the
//! backend that a topology builds at connect. Knows the identity layer below it, never the
//! buffers or the API above.

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
