//! The crates' structure, checked from their sources (a pure test, beside the server tests):
//!
//! - no import circles: each file's `crate::` uses form a graph with no cycle, so every
//!   layer can be read and changed from the bottom up;
//! - the module's layers (docs/architecture.md): `ffi/` is the only place allowed `unsafe`
//!   (the compiler enforces it; this checks the attributes that make it so) and imports
//!   nothing above it (it may use `idgen_core`'s plain types: the core is pure Rust); `state/` knows only `ffi/`; `datatype/` knows `ffi/` and
//!   `state/`; `events/` and `commands/` build on all three and never on each other; and a
//!   command's file never imports another command's (shared helpers — argument parsing, the
//!   checks before issuing — sit in files of their own, and only the table names every
//!   command);
//! - across crates: the core depends on no workspace or Redis crate, the module on the core
//!   and `redis-module`, the client on the core and `redis`, the tool on the client and core.
//! - the client's layers (docs/architecture.md): the files beside `lib.rs` (errors, IDs,
//!   the command table, metrics, the lock helper) import only each other; `identity/` knows
//!   only them; `transport/` knows them and `identity/`; `buffers/` knows only them, never
//!   a connection; `api/` joins everything; no circle runs between the folders; and no
//!   client code names an item through `lib.rs`'s re-exports (`crate::Result`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The module paths a text names through `crate::a::b`, `crate::{a, b::c}` or
/// `crate::a::{b, c::D}`, as written (each item's path joined with `::`).
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        collect_paths("", rest, &mut found);
    }
    found
}

/// Adds the paths that `text` (what follows `crate::` or a group's `{`) starts with,
/// prefixed by `prefix`.
fn collect_paths(prefix: &str, text: &str, found: &mut BTreeSet<String>) {
    let mut path = prefix.to_string();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            for item in split_group(group) {
                collect_paths(&path, item.trim(), found);
            }
            return;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[name.len()..];
        if !name.is_empty() {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(&name);
        }
        if let Some(after) = rest.strip_prefix("::") {
            rest = after;
            continue;
        }
        break;
    }
    if !path.is_empty() {
        found.insert(path);
    }
}

/// The top-level items of a `{…}` group whose text starts after the `{`.
fn split_group(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0, 0, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// Every `.rs` file under `dir`, with its module path (`ffi/call.rs` → `ffi::call`,
/// `ffi/mod.rs` → `ffi`, `lib.rs` → the empty path).
fn source_files(dir: &Path) -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, prefix: &[String], out: &mut Vec<(String, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                let mut inner = prefix.to_vec();
                inner.push(name);
                walk(&path, &inner, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut module = prefix.to_vec();
                if name != "mod" && name != "lib" {
                    module.push(name);
                }
                out.push((module.join("::"), path));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &[], &mut out);
    out
}

/// A file's text without its `#[cfg(test)]` module (unit tests may import anything of
/// their file).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// The import graph of a crate's `src`, by module path: each file's imports, resolved to
/// the longest module path that exists (an item's path names its module).
fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = source_files(src);
    let modules: BTreeSet<String> = files.iter().map(|(module, _)| module.clone()).collect();
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let used = imports(without_tests(&text))
            .into_iter()
            .filter_map(|import| resolve(&import, &modules))
            .filter(|used| used != module && !module.starts_with(&format!("{used}::")))
            .filter(|used| !used.is_empty())
            .collect();
        graph.insert(module.clone(), used);
    }
    graph
}

/// The longest module path that `import` starts with.
fn resolve(import: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = import.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
}

/// A cycle in `graph`, as the modules on it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            return Some(path[start..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The layers each layer of the module may import (itself included).
const MAY_IMPORT: [(&str, &[&str]); 5] = [
    ("ffi", &["ffi"]),
    ("state", &["ffi", "state"]),
    ("datatype", &["ffi", "state", "datatype"]),
    ("events", &["ffi", "state", "datatype", "events"]),
    ("commands", &["ffi", "state", "datatype", "commands"]),
];

/// Files of `commands/` that every command may use; the others are commands (or the INFO
/// section), which never import each other. The table names every command.
const SHARED_BY_COMMANDS: [&str; 3] = ["commands", "commands::args", "commands::issuing"];
const COMMAND_TABLE: &str = "commands::table";

/// Every broken layer rule in a module's import graph, one line each.
fn layer_violations(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let layer_of = |module: &str| module.split("::").next().unwrap_or_default().to_string();
    let mut broken = Vec::new();
    for (module, used) in graph {
        let layer = layer_of(module);
        let Some((_, allowed)) = MAY_IMPORT.iter().find(|(name, _)| *name == layer) else {
            if !module.is_empty() {
                broken.push(format!(
                    "{module} is in no layer (ffi, state, datatype, events, commands)"
                ));
            }
            continue;
        };
        for import in used {
            if !allowed.contains(&layer_of(import).as_str()) {
                broken.push(format!(
                    "{module} imports {import}: {layer} may import only {allowed:?}"
                ));
            }
            let between_commands = layer == "commands"
                && layer_of(import) == "commands"
                && module != COMMAND_TABLE
                && !SHARED_BY_COMMANDS.contains(&import.as_str());
            if between_commands {
                broken.push(format!(
                    "{module} imports {import}: commands never import each other"
                ));
            }
        }
    }
    broken
}

/// The client's layers, bottom to top, and what each may import (itself included):
/// `ground` is the files beside `lib.rs`.
const CLIENT_MAY_IMPORT: [(&str, &[&str]); 5] = [
    ("ground", &["ground"]),
    ("identity", &["ground", "identity"]),
    ("transport", &["ground", "identity", "transport"]),
    ("buffers", &["ground", "buffers"]),
    (
        "api",
        &["ground", "identity", "transport", "buffers", "api"],
    ),
];

/// The client's layer of a module path: its folder, or `ground` for a file beside `lib.rs`
/// (and what that file holds), `None` for `lib.rs` itself.
fn client_layer(module: &str) -> Option<&str> {
    let first = module.split("::").next().unwrap_or_default();
    if first.is_empty() {
        return None;
    }
    let folder = CLIENT_MAY_IMPORT.iter().find(|(name, _)| *name == first);
    Some(folder.map_or("ground", |(name, _)| name))
}

/// Every broken layer rule in the client's import graph, one line each: an import of a
/// layer the importer may not know, and a circle between layers.
fn client_layer_violations(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut broken = Vec::new();
    let mut between_layers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, used) in graph {
        let Some(layer) = client_layer(module) else {
            continue;
        };
        let (_, allowed) = CLIENT_MAY_IMPORT
            .iter()
            .find(|(name, _)| *name == layer)
            .unwrap();
        for import in used {
            let Some(imported) = client_layer(import) else {
                continue;
            };
            if !allowed.contains(&imported) {
                broken.push(format!(
                    "{module} imports {import}: {layer} may import only {allowed:?}"
                ));
            }
            if imported != layer {
                let edges = between_layers.entry(layer.to_string()).or_default();
                edges.insert(imported.to_string());
            }
        }
    }
    if let Some(cycle) = find_cycle(&between_layers) {
        broken.push(format!("a circle between the client's layers: {cycle:?}"));
    }
    broken
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn the_module_core_and_client_sources_have_no_import_circle() {
    for crate_dir in ["module", "client", "core"] {
        let graph = graph_of(&crate_src(crate_dir));
        assert!(graph.len() > 8, "read {} files of {crate_dir}", graph.len());
        assert_eq!(
            find_cycle(&graph),
            None,
            "an import circle in {crate_dir}/src"
        );
    }
}

#[test]
fn the_module_keeps_its_layers() {
    let graph = graph_of(&crate_src("module"));
    assert!(graph.keys().any(|m| m.starts_with("ffi::")), "{graph:?}");
    let broken = layer_violations(&graph);
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_compiler_holds_unsafe_code_to_ffi() {
    // The module denies `unsafe` at its root and allows it on `mod ffi;` alone; inside
    // `ffi/`, the `command_table!` macro allows it on the entry points it expands. The
    // compiler then refuses `unsafe` anywhere else, written or expanded.
    let lib = std::fs::read_to_string(crate_src("module").join("lib.rs")).unwrap();
    assert!(lib.contains("#![deny(unsafe_code)]"), "module/src/lib.rs");
    assert!(
        lib.contains("#[allow(unsafe_code)]\nmod ffi;"),
        "module/src/lib.rs allows unsafe on mod ffi"
    );
    let allowing: Vec<String> = source_files(&crate_src("module"))
        .into_iter()
        .filter(|(_, path)| {
            let text = std::fs::read_to_string(path).unwrap();
            text.matches("allow(unsafe_code)").count() > 0
        })
        .map(|(module, _)| module)
        .collect();
    assert_eq!(
        allowing,
        ["", "ffi::command_table"],
        "files that allow unsafe code"
    );
    for pure in ["core", "client"] {
        let lib = std::fs::read_to_string(crate_src(pure).join("lib.rs")).unwrap();
        assert!(lib.contains("#![forbid(unsafe_code)]"), "{pure}/src/lib.rs");
    }
}

/// The workspace crates each crate may depend on (docs/architecture.md): the core on none
/// (and on no Redis crate), the module on the core and `redis-module`, the client on the
/// core and `redis`, the tool on the client and the core.
const MAY_DEPEND_ON: [(&str, &[&str]); 4] = [
    ("core", &[]),
    ("module", &["idgen-core", "redis-module"]),
    ("client", &["idgen-core", "redis"]),
    ("cli", &["idgen-core", "idgen-client"]),
];

/// The `[dependencies]` a crate's Cargo.toml names that are workspace or Redis crates.
fn redis_and_workspace_dependencies(crate_dir: &str) -> BTreeSet<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(manifest).unwrap();
    let Some(section) = text.split("\n[dependencies]\n").nth(1) else {
        return BTreeSet::new();
    };
    section
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split([' ', '=']).next())
        .filter(|name| name.starts_with("idgen-") || name.starts_with("redis"))
        .map(String::from)
        .collect()
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    for (crate_dir, allowed) in MAY_DEPEND_ON {
        let found = redis_and_workspace_dependencies(crate_dir);
        let allowed: BTreeSet<String> = allowed.iter().map(|name| name.to_string()).collect();
        assert_eq!(found, allowed, "{crate_dir}/Cargo.toml");
    }
}

#[test]
fn the_cycle_finder_finds_a_circle_through_a_group_import() {
    let mut graph = BTreeMap::new();
    graph.insert("call".to_string(), imports("use crate::key::Keyspace;"));
    graph.insert(
        "key".to_string(),
        imports("use crate::{decimal, refusal::Refusal, call::Arg};"),
    );
    graph.insert("decimal".to_string(), BTreeSet::new());
    let modules = ["call", "key", "decimal", "refusal"]
        .map(String::from)
        .into_iter()
        .collect();
    for used in graph.values_mut() {
        *used = used.iter().filter_map(|i| resolve(i, &modules)).collect();
    }
    let cycle = find_cycle(&graph).expect("call -> key -> call");
    assert_eq!(cycle, ["call", "key"]);
}

#[test]
fn nested_group_imports_resolve_to_their_modules() {
    let found = imports(
        "use crate::ffi::{call::Call, keyspace::{Keyspace, Read}};\nuse crate::state::stats;",
    );
    assert!(found.contains("ffi::call::Call"), "{found:?}");
    assert!(found.contains("ffi::keyspace::Read"), "{found:?}");
    assert!(found.contains("state::stats"), "{found:?}");
}

#[test]
fn the_layer_rules_catch_each_kind_of_break() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("ffi::call", vec!["state::stats"]),
        ("state::stats", vec!["commands::info"]),
        (
            "commands::segment_next",
            vec!["commands::snowflake_next", "commands::args"],
        ),
        ("commands::table", vec!["commands::segment_next"]),
        ("events::key_events", vec!["commands::issuing"]),
        ("helpers", vec![]),
    ]
    .into_iter()
    .map(|(m, used)| (m.to_string(), used.into_iter().map(String::from).collect()))
    .collect();
    let broken = layer_violations(&graph);
    for expected in [
        "ffi::call imports state::stats",
        "state::stats imports commands::info",
        "commands::segment_next imports commands::snowflake_next: commands never import each other",
        "events::key_events imports commands::issuing",
        "helpers is in no layer",
    ] {
        assert!(
            broken.iter().any(|line| line.starts_with(expected)),
            "{expected} not caught in {broken:?}"
        );
    }
    assert_eq!(broken.len(), 5, "{broken:?}");
}

#[test]
fn the_client_keeps_its_layers() {
    let graph = graph_of(&crate_src("client"));
    for layer in ["api", "buffers", "identity", "transport"] {
        assert!(
            graph
                .keys()
                .filter(|m| client_layer(m) == Some(layer))
                .count()
                >= 3,
            "{layer}/ holds files: {graph:?}"
        );
    }
    let broken = client_layer_violations(&graph);
    assert!(
        broken.is_empty(),
        "the client's layer rules broken:\n{}",
        broken.join("\n")
    );
}

/// The lines of `text`'s code (not its comments) that name an item through `lib.rs`'s
/// re-exports (`crate::Result`, `crate::Client`): an arrow up to the crate's top from
/// whatever layer the file is in.
fn names_through_lib(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .filter(|line| {
            line.match_indices("crate::").any(|(at, _)| {
                line[at + "crate::".len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_uppercase())
            })
        })
        .collect()
}

#[test]
fn client_code_imports_from_its_modules_not_through_lib() {
    let mut found = Vec::new();
    for (module, path) in source_files(&crate_src("client")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in names_through_lib(without_tests(&text)) {
            found.push(format!("{module}: {}", line.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "names taken through lib.rs:\n{}",
        found.join("\n")
    );
    assert_eq!(
        names_through_lib("/// See [`crate::Client`].\nfn f() -> crate::Result<()> {}"),
        ["fn f() -> crate::Result<()> {}"]
    );
}

#[test]
fn the_client_layer_rules_catch_each_kind_of_break() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("error", vec!["transport::connection"]),
        ("identity::guard", vec!["transport::node", "error", "lock"]),
        (
            "transport::connection",
            vec!["identity", "buffers::segment"],
        ),
        (
            "buffers::segment",
            vec!["transport::backend", "buffers::source"],
        ),
        (
            "api::client",
            vec!["transport::connect", "buffers::segment"],
        ),
        ("lock", vec![]),
    ]
    .into_iter()
    .map(|(m, used)| (m.to_string(), used.into_iter().map(String::from).collect()))
    .collect();
    let broken = client_layer_violations(&graph);
    for expected in [
        "error imports transport::connection",
        "identity::guard imports transport::node",
        "transport::connection imports buffers::segment",
        "buffers::segment imports transport::backend",
        "a circle between the client's layers",
    ] {
        assert!(
            broken.iter().any(|line| line.starts_with(expected)),
            "{expected} not caught in {broken:?}"
        );
    }
    assert_eq!(broken.len(), 5, "{broken:?}");
}
