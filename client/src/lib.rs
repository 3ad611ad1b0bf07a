//! Async client for redis-idgen: unique IDs
//! generated inside Redis by the `idgen` module, called with pooling (bb8), failover across
//! independent nodes, Redis Cluster routing, and Leaf-style local segments.
//!
//! ```no_run
//! use idgen_client::{Client, SegmentOptions, Topology};
//!
//! # async fn example() -> Result<(), idgen_client::Error> {
//! // Three independent masters, each started with its own offset (step 3, offsets 0..2).
//! let client = Client::connect(Topology::nodes([
//!     "redis://127.0.0.1:7001/",
//!     "redis://127.0.0.1:7002/",
//!     "redis://127.0.0.1:7003/",
//! ])?)
//! .await?;
//!
//! let id = client.next_snowflake("orders").await?;
//! let parts = client.decode(id)?;
//! println!("{id} was issued at {} by offset {}", parts.unix_ms, parts.offset);
//!
//! // Segment values handed out locally from ranges taken from the servers.
//! let invoices = client.segment_buffer("invoice", SegmentOptions::default());
//! let invoice = invoices.next().await?;
//! # let _ = invoice;
//! # Ok(())
//! # }
//! ```
//!
//! Modes ([`Topology`]): a single node; several independent nodes, any of which serves any
//! key (a node that fails is skipped and retried later, and callers see no error while one
//! node answers); a master and replicas managed by Redis Sentinel, whose current master
//! the client follows through a failover; or a Redis Cluster, where commands are routed by
//! key and connection failures are retried while the cluster fails over.
//!
//! Nodes are given as anything redis-rs accepts as connection info ([`Topology::single`],
//! [`Topology::nodes`], [`Topology::cluster`], [`Topology::sentinel`]): `rediss://` URLs for TLS (cargo features
//! `tls-rustls`, the default, or `tls-native-tls`), `user:password@` for ACL users, or a
//! [`redis::ConnectionInfo`] built in code. A tokio runtime is required. A server certificate
//! from a private CA is trusted by naming the CA's PEM file in `SSL_CERT_FILE`; one the client
//! does not trust is reported as [`Error::Certificate`], saying so.
//!
//! At connect the client asks every node (in a cluster, masters and replicas) for its
//! identity with `IDGEN.IDENTITY` — a keyless, read-only command, so an application's ACL
//! user needs no `CONFIG` — and refuses a deployment whose nodes disagree on step or layout
//! or share an offset. With single and independent nodes, every connection opened later checks its
//! node again: a node that comes back with another step, offset or layout (or, unreachable
//! at connect, does not fit the deployment) is not used, and an error is logged.
//!
//! Local buffers: a [`SegmentBuffer`] hands out values with one atomic add and a
//! [`SnowflakeCache`] IDs under one lock, each fetching ahead in the background and taking
//! part in tokio's cooperative budget, so that a caller that never yields still lets the
//! fetch and its siblings run. What a caller can rely on — uniqueness, order, staleness,
//! and how long a call may wait — is stated on each type; [`SegmentBuffer::wait_stats`]
//! counts the calls that waited.
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]

// In layers (docs/architecture.md, checked by tests/tests/import_graph.rs): the files beside
// lib.rs, identity, transport, buffers (beside transport, not above it), api.
/// Builder methods that each set one public field: `setters!(Type { /// doc field: T, });`.
macro_rules! setters {
    ($type:ty { $($(#[doc = $doc:literal])* $field:ident: $field_type:ty,)* }) => {
        impl $type {
            $(
                $(#[doc = $doc])*
                pub fn $field(mut self, $field: $field_type) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}

mod api;
mod buffers;
pub mod commands;
mod error;
mod id;
mod identity;
mod lock;
mod metrics;
mod transport;

pub use api::client::Client;
pub use api::leased::{
    Grant as LeaseGrant, LeaseError, LeasedGenerator, LeasedOptions, MonotonicClock,
    SystemMonotonic,
};
pub use buffers::local_segment::LocalSegmentBuffer;
pub use buffers::options::{SegmentOptions, SnowflakeCacheOptions};
pub use buffers::segment::{NextValue, SegmentBuffer};
pub use buffers::snowflake_cache::SnowflakeCache;
pub use buffers::wait_stats::WaitStats;
pub use commands::IdgenAsyncCommands;
pub use error::{Error, Result};
pub use id::Id;
pub use identity::deployment::{check as check_deployment, Deployment, NodeIdentity};
pub use idgen_core::{DecodedId, IdFormat, IdTextError, Layout, SegmentRange};
pub use metrics::MetricsSnapshot;
pub use transport::cluster_nodes::{cluster_members, ClusterMember};
pub use transport::settings::Settings;
pub use transport::topology::{SentinelTopology, Topology};

/// The redis-rs crate this client is built on (1.x), so that applications can name its
/// types ([`redis::ConnectionInfo`], the error inside [`Error::Transport`]) without a
/// dependency of their own that could resolve to another version.
pub use redis;
