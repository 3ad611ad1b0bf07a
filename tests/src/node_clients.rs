//! The Node.js Redis clients (ioredis, node-redis) that the JavaScript tests run, pinned by
//! `tests/node/package-lock.json`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the Node.js scripts and their `node_modules` live.
pub fn node_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/node")).to_path_buf()
}

/// Installs the clients pinned by the lock file, once (`npm ci`).
pub fn install_node_clients() {
    if node_dir().join("node_modules/.package-lock.json").exists() {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--silent", "--no-audit", "--no-fund"])
        .current_dir(node_dir())
        .status()
        .expect("run npm (install Node.js: scripts/deps.sh --test)");
    assert!(
        status.success(),
        "npm ci failed in {}",
        node_dir().display()
    );
}
