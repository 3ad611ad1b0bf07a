//! The `idgen` command-line tool (crate `cli/`), run as a user runs it.

use std::path::PathBuf;
use std::process::Command;

/// The `idgen` binary of this build: `$IDGEN_TOOL`, or `idgen` beside the module in
/// `$CARGO_TARGET_DIR/<profile>` (built by `cargo build --release -p idgen-cli`, which
/// scripts/test.sh runs).
pub fn idgen_tool_path() -> PathBuf {
    crate::server::build_artifact("IDGEN_TOOL", "idgen", "idgen-cli")
}

/// What one run of the tool did.
#[derive(Debug)]
pub struct ToolRun {
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `idgen` with `args` and waits for it.
pub fn run_idgen(args: &[&str]) -> ToolRun {
    let output = Command::new(idgen_tool_path())
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run the idgen tool");
    ToolRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
