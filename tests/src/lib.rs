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
pub use traffic::{write_traffic, WriteTraffic};
pub use values::{
    assert_strictly_increasing, assert_unique, count_duplicates, digest, info_field, info_line,
    now_ms, snowflake_batch,
};
