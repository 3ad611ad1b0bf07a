//! Starts real `redis-server` processes with the idgen module for the integration tests,
//! and stops them (by pid) when they go out of scope.
//!
//! ```no_run
//! let server = idgen_tests::Server::start(&["step", "3", "offset", "1"]);
//! let mut conn = server.conn();
//! let id: i64 = redis::cmd("SNOWFLAKE.NEXT").arg("orders").query(&mut conn).unwrap();
//! ```
#![deny(missing_docs)]

mod acl;
mod cluster;
pub mod doc_checks;
mod idgen_tool;
mod node_clients;
mod sentinel;
mod server;
pub mod soak;
mod tls;
mod traffic;
pub mod transcripts;
mod values;

pub use acl::{acl_log, create_acl_user, DOCUMENTED_ONE_NODE_GRANTS};
pub use cluster::{Cluster, NodeInfo, NODES, PASSWORD as CLUSTER_PASSWORD};
pub use idgen_tool::{idgen_tool_path, run_idgen, ToolRun};
pub use node_clients::{install_node_clients, node_dir};
pub use sentinel::{Sentinels, MASTER_NAME as SENTINEL_MASTER_NAME};
pub use server::{
    module_path, previous_module_path, server_has_tls, LoadFailure, Server, ServerOptions,
};
pub use tls::TlsFiles;

/// Module arguments for lease tests: four leased worker ids, short leases and a small drift
/// bound, so that the fence after a start or promotion (max-drift-ms + lease-max-ms) passes
/// in about a second.
pub const SHORT_LEASES: [&str; 6] = [
    "lease-workers",
    "4",
    "lease-max-ms",
    "1000",
    "max-drift-ms",
    "100",
];
pub use traffic::{write_traffic, WriteTraffic};
pub use values::{
    assert_strictly_increasing, assert_unique, count_duplicates, digest, info_field, info_line,
    now_ms, snowflake_batch,
};
