//! The code examples the docs mark `<!-- run: python -->` or `<!-- run: node -->` run as
//! written against a fresh server (module arguments from the document's first
//! `<!-- server: ARGS -->` comment, none if it has none), with the test server's port in
//! place of 6379. An example fails the test when its program exits with an error (the
//! examples check what they show with `assert`/`throw`).
//!
//! Needs redis-py (`python3-redis` or `pip install redis`) and Node.js with npm
//! (scripts/deps.sh --test installs them); the Node.js clients are installed from
//! tests/node/package-lock.json as tests/tests/javascript.rs does.

use std::path::{Path, PathBuf};
use std::process::Command;

use idgen_tests::transcripts::{documented_files, read_document, Document};
use idgen_tests::{install_node_clients, node_dir, Server, ServerOptions};

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

/// The Python interpreter that has redis-py: `python3` from the PATH, else Debian's
/// (`python3-redis` installs into /usr/bin/python3's packages).
fn python_with_redis() -> String {
    for python in ["python3", "/usr/bin/python3"] {
        let ok = Command::new(python)
            .args(["-c", "import redis"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return python.to_string();
        }
    }
    panic!(
        "no python3 with redis-py: run scripts/deps.sh --test (python3-redis) or pip install redis"
    );
}

/// Runs one example; `Err` has its output.
fn run_example(runner: &str, code: &str, port: u16, tag: &str) -> Result<String, String> {
    let code = code.replace("6379", &port.to_string());
    let (program, file) = match runner {
        "python" => {
            let file = std::env::temp_dir().join(format!("idgen-doc-{tag}.py"));
            (python_with_redis(), file)
        }
        "node" => {
            install_node_clients();
            // Inside tests/node so that `import "ioredis"` finds its node_modules.
            let file = node_dir().join(format!("doc-example-{tag}.mjs"));
            ("node".to_string(), file)
        }
        other => return Err(format!("unknown runner `{other}`: use python or node")),
    };
    std::fs::write(&file, code).unwrap();
    let output = Command::new(&program).arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let output = output.map_err(|e| format!("cannot run {program}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

fn server_args(document: &Document) -> Vec<String> {
    document
        .sessions
        .iter()
        .find_map(|s| s.fresh_server.clone())
        .unwrap_or_default()
}

#[test]
fn marked_python_and_node_examples_run_against_a_real_server() {
    let mut failures = Vec::new();
    let mut ran: Vec<String> = Vec::new();
    for path in documented_files(&root()) {
        let document = read_document(&path);
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        for block in &document.code_blocks {
            let Some(runner) = &block.run else {
                // docs/languages.md promises that its Python and JavaScript examples run.
                let runnable = matches!(block.language.as_str(), "python" | "js" | "javascript");
                if name == "docs/languages.md" && runnable {
                    failures.push(format!(
                        "{name}:{}: a {} example without `<!-- run: … -->`: the page says \
                         these run in CI",
                        block.line, block.language
                    ));
                }
                continue;
            };
            let args = server_args(&document);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let server = Server::start_with(ServerOptions::module(&args))
                .unwrap_or_else(|failure| panic!("server did not start:\n{}", failure.log));
            let tag = format!("{}-{}", std::process::id(), block.line);
            match run_example(runner, &block.text, server.port(), &tag) {
                Ok(output) => {
                    ran.push(format!("{name}:{} ({runner})", block.line));
                    println!("{name}:{} ({runner}):\n{output}", block.line);
                }
                Err(output) => failures.push(format!(
                    "{name}:{} ({runner}) failed:\n{output}",
                    block.line
                )),
            }
        }
    }
    println!("examples run: {}: {}", ran.len(), ran.join(", "));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // languages.md has one Python and two Node.js examples; a parser that found none
    // would pass vacuously.
    assert!(ran.len() >= 3, "only {} examples ran: {ran:?}", ran.len());
}
