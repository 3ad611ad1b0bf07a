//! No import circles in the crates' sources: each file's `crate::` uses form a graph with no
//! cycle, so every layer can be read and changed from the bottom up (in the module: call and
//! keys, then the commands, then the registry; in the client: connections and nodes, then
//! the modes, then the client). A pure test, beside the server tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules a file's text names through `crate::x` or `crate::{x, y::z}`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found
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

/// The import graph of one crate's `src`, by file.
fn graph_of(crate_dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            let text = std::fs::read_to_string(&path).unwrap();
            let mut used = imports(&text);
            used.remove(&name);
            graph.insert(name, used);
        }
    }
    graph
}

#[test]
fn the_module_core_and_client_sources_have_no_import_circle() {
    for crate_dir in ["module", "client", "core"] {
        let graph = graph_of(crate_dir);
        assert!(graph.len() > 8, "read {} files of {crate_dir}", graph.len());
        assert_eq!(
            find_cycle(&graph),
            None,
            "an import circle in {crate_dir}/src"
        );
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
    let cycle = find_cycle(&graph).expect("call -> key -> call");
    assert_eq!(cycle, ["call", "key"]);
}
