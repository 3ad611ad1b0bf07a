//! The code examples the docs mark `<!-- run: python -->` or `<!-- run: node -->` run as
//! written against a fresh server (module arguments from the document's first
//! `<!-- server: ARGS -->` comment, none if it has none), with the test server's port in
//! place of 6379. An example fails the test when its program exits with an error (the
//! examples check what they show with `assert`/`throw`).
//!
//! Each runs with every installation of its language's clients that people have: the
//! distribution's (Debian's `python3-redis` for /usr/bin/python3, Debian's `node-redis`)
//! and the latest release (`pip install redis` into a venv, `npm install ioredis redis`),
//! both cached under the target directory (`doc-clients/`; delete it to take newer
//! releases), and the Node.js clients pinned by tests/node/package-lock.json, as
//! tests/tests/javascript.rs runs them. scripts/deps.sh --test installs the Debian packages.

use std::path::{Path, PathBuf};
use std::process::Command;

use idgen_tests::transcripts::{documented_files, read_document, Document};
use idgen_tests::{install_node_clients, node_dir, Server, ServerOptions};

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

/// Where the latest clients are installed, once: `$CARGO_TARGET_DIR/doc-clients`.
fn cache_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
        .join("doc-clients")
}

/// One installation of a language's clients.
struct Clients {
    /// `python` or `node`, as the `<!-- run: … -->` comment names it.
    runner: &'static str,
    /// Which installation, with the versions, for the messages.
    label: String,
    /// The interpreter.
    program: PathBuf,
    /// Where example files are written (a Node.js example's imports resolve from there).
    dir: PathBuf,
    /// Environment for the interpreter.
    env: Vec<(&'static str, String)>,
    /// The packages it has (an example importing another is not run with it).
    packages: &'static [&'static str],
}

fn run(program: &Path, args: &[&str], dir: Option<&Path>) -> String {
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn python_version(python: &Path) -> String {
    run(
        python,
        &["-c", "import redis; print(redis.__version__)"],
        None,
    )
}

fn node_package_version(dir: &Path, package: &str, env: &[(&str, String)]) -> String {
    let mut command = Command::new("node");
    command
        .args([
            "-e",
            &format!("console.log(require('{package}/package.json').version)"),
        ])
        .current_dir(dir);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run node");
    assert!(
        output.status.success(),
        "{package} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Debian's redis-py, in /usr/bin/python3.
fn python_debian() -> Clients {
    let python = PathBuf::from("/usr/bin/python3");
    let ok = Command::new(&python)
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "/usr/bin/python3 has no redis-py: run scripts/deps.sh --test (python3-redis)"
    );
    Clients {
        runner: "python",
        label: format!("Debian's redis-py {}", python_version(&python)),
        program: python,
        dir: std::env::temp_dir(),
        env: Vec::new(),
        packages: &["redis"],
    }
}

/// The latest redis-py from PyPI, in a venv of its own.
fn python_latest() -> Clients {
    let venv = cache_dir().join("python-latest");
    let python = venv.join("bin/python");
    if !venv.join(".installed").exists() {
        let _ = std::fs::remove_dir_all(&venv);
        std::fs::create_dir_all(cache_dir()).unwrap();
        run(
            Path::new("/usr/bin/python3"),
            &["-m", "venv", venv.to_str().unwrap()],
            None,
        );
        run(
            &python,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "redis",
            ],
            None,
        );
        std::fs::write(venv.join(".installed"), "").unwrap();
    }
    Clients {
        runner: "python",
        label: format!("redis-py {} from PyPI", python_version(&python)),
        program: python,
        dir: std::env::temp_dir(),
        env: Vec::new(),
        packages: &["redis"],
    }
}

/// The clients tests/node/package-lock.json pins.
fn node_pinned() -> Clients {
    install_node_clients();
    node_clients(node_dir(), "tests/node's lock file")
}

/// ioredis and node-redis as installed in `dir` (`source` says from where).
fn node_clients(dir: PathBuf, source: &str) -> Clients {
    Clients {
        runner: "node",
        label: format!(
            "ioredis {} and node-redis {} ({source})",
            node_package_version(&dir, "ioredis", &[]),
            node_package_version(&dir, "redis", &[])
        ),
        program: PathBuf::from("node"),
        dir,
        env: Vec::new(),
        packages: &["ioredis", "redis"],
    }
}

/// The latest ioredis and node-redis from npm.
fn node_latest() -> Clients {
    let dir = cache_dir().join("node-latest");
    if !dir.join(".installed").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("package.json"),
            r#"{"private": true, "type": "module"}"#,
        )
        .unwrap();
        run(
            Path::new("npm"),
            &[
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "ioredis@latest",
                "redis@latest",
            ],
            Some(&dir),
        );
        std::fs::write(dir.join(".installed"), "").unwrap();
    }
    node_clients(dir, "latest from npm")
}

/// Debian's node-redis (in /usr/share/nodejs; Debian has no ioredis). An example's `import`
/// resolves through a `node_modules` link beside it, the package's own `require`s through
/// NODE_PATH.
fn node_debian() -> Clients {
    let packages = Path::new("/usr/share/nodejs");
    assert!(
        packages.join("redis/package.json").exists(),
        "Debian's node-redis is not installed: run scripts/deps.sh --test (node-redis)"
    );
    let dir = cache_dir().join("node-debian");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("node_modules");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(packages, &link).unwrap();
    }
    std::fs::write(
        dir.join("package.json"),
        r#"{"private": true, "type": "module"}"#,
    )
    .unwrap();
    let env = vec![("NODE_PATH", packages.display().to_string())];
    Clients {
        runner: "node",
        label: format!(
            "Debian's node-redis {}",
            node_package_version(&dir, "redis", &env)
        ),
        program: PathBuf::from("node"),
        dir,
        env,
        packages: &["redis"],
    }
}

/// The packages an example imports (`import redis`, `from "ioredis"`).
fn imports(runner: &str, code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            match runner {
                "python" => line
                    .strip_prefix("import ")
                    .or_else(|| line.strip_prefix("from "))
                    .and_then(|rest| rest.split([' ', '.', ',']).next()),
                _ => line
                    .starts_with("import ")
                    .then(|| line.rsplit_once(" from ")?.1.split('"').nth(1))
                    .flatten(),
            }
        })
        .map(String::from)
        .collect()
}

/// Runs one example with `clients`; `Err` has its output.
fn run_example(clients: &Clients, code: &str, port: u16, tag: &str) -> Result<String, String> {
    let code = code.replace("6379", &port.to_string());
    let extension = if clients.runner == "python" {
        "py"
    } else {
        "mjs"
    };
    let file = clients.dir.join(format!("doc-example-{tag}.{extension}"));
    std::fs::write(&file, code).unwrap();
    let mut command = Command::new(&clients.program);
    command.arg(&file);
    for (name, value) in &clients.env {
        command.env(name, value);
    }
    let output = command.output();
    let _ = std::fs::remove_file(&file);
    let output = output.map_err(|e| format!("cannot run {}: {e}", clients.program.display()))?;
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
    let installations = [
        python_debian(),
        python_latest(),
        node_pinned(),
        node_latest(),
        node_debian(),
    ];
    for clients in &installations {
        println!("{}: {}", clients.runner, clients.label);
    }
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
            if runner != "python" && runner != "node" {
                failures.push(format!(
                    "{name}:{}: unknown runner `{runner}`: use python or node",
                    block.line
                ));
                continue;
            }
            let needs = imports(runner, &block.text);
            let args = server_args(&document);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            for clients in installations.iter().filter(|c| c.runner == runner) {
                if !needs.iter().all(|n| clients.packages.contains(&n.as_str())) {
                    println!(
                        "{name}:{} not run with {}: it imports {needs:?}",
                        block.line, clients.label
                    );
                    continue;
                }
                let server = Server::start_with(ServerOptions::module(&args))
                    .unwrap_or_else(|failure| panic!("server did not start:\n{}", failure.log));
                let tag = format!("{}-{}", std::process::id(), block.line);
                match run_example(clients, &block.text, server.port(), &tag) {
                    Ok(output) => {
                        ran.push(format!("{name}:{} ({})", block.line, clients.label));
                        println!("{name}:{} ({}):\n{output}", block.line, clients.label);
                    }
                    Err(output) => failures.push(format!(
                        "{name}:{} with {} failed:\n{output}",
                        block.line, clients.label
                    )),
                }
            }
        }
    }
    println!("examples run: {}:\n  {}", ran.len(), ran.join("\n  "));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // languages.md has one Python example (two installations) and two Node.js examples
    // (ioredis: two installations; node-redis: three); a parser that found none would pass
    // vacuously.
    assert!(ran.len() >= 7, "only {} examples ran: {ran:?}", ran.len());
}

#[test]
fn imports_are_read_from_the_examples() {
    assert_eq!(imports("python", "import redis\nx = 1"), ["redis"]);
    assert_eq!(
        imports("node", "import Redis from \"ioredis\";\nconst a = 1;"),
        ["ioredis"]
    );
    assert_eq!(
        imports("node", "import { createClient } from \"redis\";"),
        ["redis"]
    );
}
