//! The `idgen` command-line tool (crate `cli/`), run as a user runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `idgen` binary of this build: `$IDGEN_TOOL`, or `idgen` beside the module in
/// `$CARGO_TARGET_DIR/<profile>` (built by `cargo build --release -p idgen-cli`, which
/// scripts/test.sh runs).
pub fn idgen_tool_path() -> PathBuf {
    if let Some(path) = std::env::var_os("IDGEN_TOOL") {
        return PathBuf::from(path);
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join(profile).join("idgen");
    assert!(
        path.exists(),
        "{} does not exist: build the tool first with `cargo build -p idgen-cli{}` \
         (scripts/test.sh does this)",
        path.display(),
        if profile == "release" {
            " --release"
        } else {
            ""
        }
    );
    path
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
