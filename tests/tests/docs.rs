//! The documentation is a test: every redis-cli transcript in README.md and docs/*.md is
//! replayed against a fresh server, every `ACL SETUSER` line is created and then used as
//! that user, and README.md's shell lines run (or are listed below with the reason they run
//! elsewhere). An example that drifts from the product fails here.
//!
//! How replies are compared (tests/src/transcripts.rs says what a transcript is):
//! - Exactly, line by line, as `redis-cli --no-raw` prints them — except
//! - replies of `SNOWFLAKE.NEXT`, whose IDs carry the time of the call. They are compared by
//!   shape: the same lines with the same list numbering; an integer where the document shows
//!   an integer and a string of the same form where it shows a string (the `FORMAT`'s
//!   alphabet, and its width for base32/base62); each ID decoded by the server has the
//!   documented ID's shard, and the documented ID decodes (with the server's layout) to the
//!   same offset as the issued one — so a reply shown from another step or offset fails —
//!   and the IDs the server issues for a key strictly increase through a document's session.
//!
//! Everything else a document shows (decoded fields, ranges, segment values, identities,
//! errors) is deterministic on a fresh server and compared exactly.
//!
//! Run with `--nocapture` to see the figures (transcripts, commands, ACL users, shell lines).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idgen_client::{Client, SegmentOptions, Topology};
use idgen_core::IdFormat;
use idgen_tests::doc_checks;
use idgen_tests::transcripts::{documented_files, read_document, Document, Step};
use idgen_tests::{module_path, Server, ServerOptions};

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

/// README.md's shell lines this test does not run, and where they do run (or why not).
const SHELL_LINES_RUN_ELSEWHERE: &[(&str, &str)] = &[
    (
        "scripts/demo.sh",
        ".ci/run runs it first, on the CI machine",
    ),
    (
        "scripts/test.sh",
        "it is the test suite itself (.ci/run runs it)",
    ),
    (
        "scripts/deps.sh",
        "needs root and apt-get; scripts/demo.sh and scripts/test.sh run it in CI",
    ),
    (
        "cargo build --release -p idgen-module",
        "the build this test runs against (.ci/run and scripts/test.sh build it); cargo holds \
         the build directory's lock while tests run",
    ),
    (
        "scripts/bench.sh",
        "about 6 minutes on a quiet machine; its output is BENCHMARKS.md",
    ),
    (
        "scripts/module-floor.sh",
        "about 2 minutes on a quiet machine; part of scripts/bench.sh",
    ),
];

fn documents() -> Vec<Document> {
    documented_files(&root())
        .iter()
        .map(|p| read_document(p))
        .collect()
}

fn name(document: &Document) -> String {
    document
        .path
        .strip_prefix(root())
        .unwrap_or(&document.path)
        .display()
        .to_string()
}

/// Runs one line through redis-cli as a user types it (redis-cli splits the words and
/// quotes), returning its output lines.
fn redis_cli(port: u16, user: Option<(&str, &str)>, line: &str) -> Vec<String> {
    let mut command = Command::new("redis-cli");
    command.args(["-p", &port.to_string(), "--no-raw"]);
    if let Some((user, password)) = user {
        // As an application user: the words as arguments. (Typed into its prompt, redis-cli
        // first asks `COMMAND DOCS` for its hints, which an application user is not granted
        // and the ACL log would record.)
        command.args(["--user", user, "--pass", password, "--no-auth-warning"]);
        command.args(line.split_whitespace());
        let output = command.output().expect("run redis-cli");
        return String::from_utf8_lossy(&output.stdout)
            .lines()
            .chain(String::from_utf8_lossy(&output.stderr).lines())
            .map(str::to_string)
            .collect();
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-cli (scripts/deps.sh installs redis-tools)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    text.lines().map(str::to_string).collect()
}

/// The value of a `FORMAT` option in a command line, lower case, if given.
fn format_of(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0].eq_ignore_ascii_case("FORMAT"))
        .map(|w| w[1].to_ascii_lowercase())
}

/// An ID in a reply line: the list prefix (`2) `, with its padding), and the ID as typed
/// (`Ok(integer)` or `Err(string)`).
fn id_in_line(line: &str) -> Option<(String, Result<i64, String>)> {
    let (prefix, value) = match line.find(") ") {
        Some(end) if line[..end].trim().chars().all(|c| c.is_ascii_digit()) => {
            (line[..end + 2].to_string(), &line[end + 2..])
        }
        _ => (String::new(), line),
    };
    if let Some(number) = value.strip_prefix("(integer) ") {
        return Some((prefix, Ok(number.parse().ok()?)));
    }
    let quoted = value.strip_prefix('"')?.strip_suffix('"')?;
    Some((prefix, Err(quoted.to_string())))
}

/// (shard, offset) of an ID as this server decodes it.
fn shard_and_offset(
    conn: &mut redis::Connection,
    id: &Result<i64, String>,
    format: Option<&str>,
) -> Result<(i64, i64), String> {
    let mut command = redis::cmd("SNOWFLAKE.DECODE");
    match id {
        Ok(number) => command.arg(number),
        Err(text) => command.arg(text),
    };
    if let (Err(_), Some(format)) = (id, format) {
        command.arg("FORMAT").arg(format);
    }
    let fields: HashMap<String, redis::Value> = command.query(conn).map_err(|e| e.to_string())?;
    let int = |name: &str| match fields.get(name) {
        Some(redis::Value::Int(n)) => Ok(*n),
        other => Err(format!("no integer {name} in the decoded ID: {other:?}")),
    };
    Ok((int("shard")?, int("offset")?))
}

/// Whether `text` has the form of an ID in `format`.
fn has_form(text: &str, format: Option<&str>) -> bool {
    match format {
        Some("base32") => {
            text.len() == 13
                && text
                    .chars()
                    .all(|c| "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains(c))
        }
        Some("base62") => text.len() == 11 && text.chars().all(|c| c.is_ascii_alphanumeric()),
        _ => !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()),
    }
}

/// Compares a `SNOWFLAKE.NEXT` reply by shape (see the file's documentation). `Err` says
/// how it differs.
fn compare_snowflake_reply(
    conn: &mut redis::Connection,
    step: &Step,
    actual: &[String],
) -> Result<(), String> {
    if actual.len() != step.reply.len() {
        return Err("a reply of another length".into());
    }
    let format = format_of(&step.command);
    for (shown, got) in step.reply.iter().zip(actual) {
        let (Some((shown_prefix, shown_id)), Some((got_prefix, got_id))) =
            (id_in_line(shown), id_in_line(got))
        else {
            // Not an ID (an error, say): exactly.
            if shown != got {
                return Err(format!("`{got}` where the document shows `{shown}`"));
            }
            continue;
        };
        if shown_prefix != got_prefix {
            return Err(format!("`{got}` where the document shows `{shown}`"));
        }
        match (&shown_id, &got_id) {
            (Ok(_), Ok(_)) => {}
            (Err(shown_text), Err(got_text)) => {
                if !has_form(shown_text, format.as_deref()) {
                    return Err(format!(
                        "the document's `{shown_text}` is not an ID of FORMAT {format:?}"
                    ));
                }
                if !has_form(got_text, format.as_deref()) {
                    return Err(format!(
                        "the server's `{got_text}` is not of FORMAT {format:?}"
                    ));
                }
            }
            _ => return Err(format!("`{got}` where the document shows `{shown}`")),
        }
        let shown_parts = shard_and_offset(conn, &shown_id, format.as_deref())
            .map_err(|e| format!("the document's ID in `{shown}` does not decode: {e}"))?;
        let got_parts = shard_and_offset(conn, &got_id, format.as_deref())
            .map_err(|e| format!("the server's ID in `{got}` does not decode: {e}"))?;
        if shown_parts != got_parts {
            return Err(format!(
                "the document's `{shown}` decodes to (shard, offset) {shown_parts:?} on this \
                 server, the server's `{got}` to {got_parts:?}"
            ));
        }
    }
    Ok(())
}

/// The IDs in a `SNOWFLAKE.NEXT` reply as numbers (strings read in the call's `FORMAT`).
fn issued_ids(command: &str, reply: &[String]) -> Vec<u64> {
    let format = match format_of(command).as_deref() {
        Some("base32") => IdFormat::Base32,
        Some("base62") => IdFormat::Base62,
        _ => IdFormat::Decimal,
    };
    reply
        .iter()
        .filter_map(|line| id_in_line(line))
        .filter_map(|(_, id)| match id {
            Ok(number) => u64::try_from(number).ok(),
            Err(text) => format.decode(&text).ok(),
        })
        .collect()
}

/// Replays every session of one document; returns (commands run, failures).
fn replay(document: &Document) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut commands = 0;
    let mut server: Option<Server> = None;
    // The last ID issued per key on the current server.
    let mut last_ids: HashMap<String, u64> = HashMap::new();
    for session in &document.sessions {
        if let Some(args) = &session.fresh_server {
            drop(server.take());
            last_ids.clear();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match Server::start_with(ServerOptions::module(&args)) {
                Ok(started) => server = Some(started),
                Err(failure) => {
                    failures.push(format!(
                        "{}:{}: the server for `<!-- server: {} -->` did not start:\n{}",
                        name(document),
                        session.line,
                        args.join(" "),
                        failure.log
                    ));
                    return (commands, failures);
                }
            }
        }
        let Some(server) = server.as_ref() else {
            return (commands, failures); // reported by the parser
        };
        let mut conn = server.conn();
        for step in &session.steps {
            commands += 1;
            let actual = redis_cli(server.port(), None, &step.command);
            let verb = step
                .command
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            let outcome = if verb == "SNOWFLAKE.NEXT" {
                compare_snowflake_reply(&mut conn, step, &actual).and_then(|()| {
                    let key = step
                        .command
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("")
                        .to_string();
                    for id in issued_ids(&step.command, &actual) {
                        if let Some(&last) = last_ids.get(&key) {
                            if id <= last {
                                return Err(format!("ID {id} for {key} is not above {last}"));
                            }
                        }
                        last_ids.insert(key.clone(), id);
                    }
                    Ok(())
                })
            } else if actual == step.reply {
                Ok(())
            } else {
                Err("a different reply".into())
            };
            if let Err(why) = outcome {
                failures.push(format!(
                    "{}:{}: `{}`: {why}\n  document:\n    {}\n  server:\n    {}",
                    name(document),
                    step.line,
                    step.command,
                    step.reply.join("\n    "),
                    actual.join("\n    ")
                ));
            }
        }
    }
    (commands, failures)
}

/// The keys the documents' examples use with each issuing command: from transcripts, and
/// from code examples (the client's methods, generic command calls in other languages).
fn keys_in_examples(documents: &[Document]) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut keys: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
    let snowflake_markers = [
        "next_snowflake(\"",
        "next_snowflakes(\"",
        "snowflake_cache(\"",
        "\"SNOWFLAKE.NEXT\", \"",
        "'SNOWFLAKE.NEXT', '",
    ];
    let segment_markers = [
        "segment_buffer(\"",
        "take_segment_range(\"",
        "\"SEGMENT.NEXT\", \"",
        "'SEGMENT.NEXT', '",
    ];
    for document in documents {
        for session in &document.sessions {
            for step in &session.steps {
                let words: Vec<&str> = step.command.split_whitespace().collect();
                match (words.first().map(|w| w.to_ascii_lowercase()), words.get(1)) {
                    (Some(verb), Some(key)) if verb == "snowflake.next" => {
                        keys.entry("snowflake.next")
                            .or_default()
                            .insert(key.to_string());
                    }
                    (Some(verb), Some(key)) if verb == "segment.next" => {
                        keys.entry("segment.next")
                            .or_default()
                            .insert(key.to_string());
                    }
                    _ => {}
                }
            }
        }
        for block in &document.code_blocks {
            let code = &block.text;
            for (command, markers) in [
                ("snowflake.next", &snowflake_markers[..]),
                ("segment.next", &segment_markers[..]),
            ] {
                for marker in markers {
                    let quote = marker.chars().last().unwrap();
                    for (at, _) in code.match_indices(marker) {
                        let rest = &code[at + marker.len()..];
                        if let Some(end) = rest.find(quote) {
                            keys.entry(command)
                                .or_default()
                                .insert(rest[..end].to_string());
                        }
                    }
                }
            }
        }
    }
    keys
}

/// Creates the user of an ACL line on a fresh server and uses it: every granted idgen
/// command on every key the examples use with it, and — for a line that grants an issuing
/// command, an application's user — the client crate connected as that user. `ACL LOG`
/// must stay empty.
async fn check_acl_line(
    document: &Document,
    acl: &idgen_tests::transcripts::AclLine,
    keys: &BTreeMap<&'static str, BTreeSet<String>>,
) -> Result<(), String> {
    let server = Server::start(&[]);
    let mut admin = server.conn();
    let created: redis::RedisResult<()> = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&acl.words)
        .query(&mut admin);
    created.map_err(|e| format!("ACL SETUSER refused it: {e}"))?;
    // Redis 7.2+ and Valkey: redis-rs announces itself with CLIENT SETINFO; docs/client.md
    // gives this grant for those servers. Redis 7.0 has no such subcommand.
    let _: redis::RedisResult<()> = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(acl.user())
        .arg("+client|setinfo")
        .query(&mut admin);
    let password = acl
        .password()
        .ok_or("the line sets no password (`>pw`), so no one can log in as that user")?;
    let user = Some((acl.user(), password));
    let granted = acl.granted_commands();
    let mut uses = Vec::new();
    for command in &granted {
        match command.as_str() {
            "snowflake.next" | "segment.next" => {
                for key in keys.get(command.as_str()).into_iter().flatten() {
                    uses.push(format!("{command} {key}"));
                }
            }
            "snowflake.decode" => uses.push("SNOWFLAKE.DECODE 382781309610622978".into()),
            "idgen.identity" | "ping" => uses.push(command.clone()),
            _ => {}
        }
    }
    for line in &uses {
        let reply = redis_cli(server.port(), user, line);
        if reply.iter().any(|l| l.starts_with("(error)")) {
            return Err(format!(
                "as {}, `{line}` answered {}",
                acl.user(),
                reply.join(" ")
            ));
        }
    }
    let issues = granted
        .iter()
        .any(|c| c == "snowflake.next" || c == "segment.next");
    if issues {
        let url = format!(
            "redis://{}:{password}@127.0.0.1:{}/",
            acl.user(),
            server.port()
        );
        let client = Client::connect(Topology::single(url).map_err(|e| e.to_string())?)
            .await
            .map_err(|e| format!("the client crate cannot connect as {}: {e}", acl.user()))?;
        if granted.iter().any(|c| c == "snowflake.next") {
            for key in keys.get("snowflake.next").into_iter().flatten() {
                client.next_snowflake(key).await.map_err(|e| {
                    format!("the client as {}: next_snowflake({key}): {e}", acl.user())
                })?;
            }
        }
        if granted.iter().any(|c| c == "segment.next") {
            for key in keys.get("segment.next").into_iter().flatten() {
                client
                    .segment_buffer(key, SegmentOptions::default())
                    .next()
                    .await
                    .map_err(|e| format!("the client as {}: segment {key}: {e}", acl.user()))?;
            }
        }
    }
    let log: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    if !log.is_empty() {
        return Err(format!(
            "the server denied {} something (ACL LOG): {log:?}",
            acl.user()
        ));
    }
    let _ = document;
    Ok(())
}

/// Runs a README line that starts a server with the module: with `--port` and a directory
/// of the test's appended, waits until it answers with the module loaded, stops it.
fn run_server_line(line: &str) -> Result<(), String> {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = std::env::temp_dir().join(format!("idgen-docs-readme-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = module_path()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {line} --port {port} --bind 127.0.0.1 --save '' --dir '{}' --logfile '{}/log'",
            dir.display(),
            dir.display()
        ))
        .current_dir(root())
        .env("CARGO_TARGET_DIR", target)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let outcome = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!(
                "the server exited ({status}):\n{}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            ));
        }
        let modules = redis_cli(port, None, "MODULE LIST");
        if modules.iter().any(|l| l.contains("\"idgen\"")) {
            break Ok(());
        }
        if Instant::now() > deadline {
            break Err("the server did not answer within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

#[tokio::test(flavor = "multi_thread")]
async fn every_transcript_acl_line_and_readme_shell_line_works_as_documented() {
    let documents = documents();
    let mut failures: Vec<String> = Vec::new();
    for document in &documents {
        for error in &document.errors {
            failures.push(format!("{}: {error}", name(document)));
        }
    }

    let mut transcripts = 0;
    let mut commands = 0;
    for document in &documents {
        let (run, found) = tokio::task::block_in_place(|| replay(document));
        transcripts += document.sessions.len();
        commands += run;
        failures.extend(found);
    }

    let keys = keys_in_examples(&documents);
    let mut acl_users = 0;
    for document in &documents {
        for acl in &document.acl_lines {
            acl_users += 1;
            if let Err(why) = check_acl_line(document, acl, &keys).await {
                failures.push(format!(
                    "{}:{}: `ACL SETUSER {}`: {why}",
                    name(document),
                    acl.line,
                    acl.words.join(" ")
                ));
            }
        }
    }

    let readme = documents
        .iter()
        .find(|d| d.path.ends_with("README.md"))
        .unwrap();
    let mut shell_run = 0;
    let mut shell_elsewhere = 0;
    for line in &readme.shell_lines {
        if let Some((_, _why)) = SHELL_LINES_RUN_ELSEWHERE
            .iter()
            .find(|(known, _)| *known == line.command)
        {
            shell_elsewhere += 1;
        } else if line.command.starts_with("redis-server --loadmodule ") {
            shell_run += 1;
            if let Err(why) = tokio::task::block_in_place(|| run_server_line(&line.command)) {
                failures.push(format!(
                    "README.md:{}: `{}`: {why}",
                    line.line, line.command
                ));
            }
        } else {
            failures.push(format!(
                "README.md:{}: `{}` is a shell line this test neither runs nor lists in \
                 SHELL_LINES_RUN_ELSEWHERE (tests/tests/docs.rs): add it to one of them",
                line.line, line.command
            ));
        }
    }

    println!(
        "docs: {} files, {transcripts} transcripts, {commands} commands replayed, {acl_users} \
         ACL users created and used, README shell lines: {shell_run} run here, {shell_elsewhere} \
         run elsewhere (keys used by examples: {keys:?})",
        documents.len()
    );
    assert!(
        failures.is_empty(),
        "{} documented examples do not work as written:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The rows of the table after `<!-- layouts: … -->` in docs/commands.md: cells without
/// backticks and thousands separators.
fn layout_rows() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join("docs/commands.md")).unwrap();
    let start = text
        .find("<!-- layouts:")
        .expect("docs/commands.md has its layout table (<!-- layouts: … -->)");
    text[start..]
        .lines()
        .skip(3) // the comment, the header, the separator
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().trim_matches('`').replace(',', ""))
                .collect()
        })
        .collect()
}

#[test]
fn the_layout_table_says_what_the_module_reports() {
    let rows = layout_rows();
    assert!(rows.len() >= 5, "{rows:?}");
    let mut failures = Vec::new();
    for row in &rows {
        let args: Vec<&str> = if row[1] == "(none)" {
            Vec::new()
        } else {
            row[1].split_whitespace().collect()
        };
        for (step, column) in [("1", 2), ("8", 3)] {
            let mut all = vec!["step", step, "offset", "0"];
            all.extend(&args);
            let server = Server::start(&all);
            let info = |field: &str| server.info_value("idgen", field).unwrap();
            let per_unit: u64 = info("idgen_snowflake_ids_per_unit").parse().unwrap();
            let unit_ms: u64 = info("idgen_time_unit_ms").parse().unwrap();
            let per_second = (per_unit * 1000 / unit_ms).to_string();
            let shards = (1u64 << info("idgen_shard_bits").parse::<u32>().unwrap()).to_string();
            let runs_out = info("idgen_layout_runs_out");
            let seen = [(column, per_second), (4, shards), (5, runs_out)];
            for (cell, value) in seen {
                if row[cell] != value {
                    failures.push(format!(
                        "{} at step {step}: the table says {}, the module {value}",
                        row[0], row[cell]
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_changed_reply_is_caught() {
    // The comparison itself must be able to fail: an exact reply that differs, and a
    // snowflake ID shown from another offset.
    let server = Server::start(&["step", "6", "offset", "2"]);
    let mut conn = server.conn();
    let step = Step {
        line: 1,
        command: "SNOWFLAKE.NEXT orders".into(),
        // Decodes to offset 0 under step 6 (sequence 0).
        reply: vec!["(integer) 382781309610622976".into()],
    };
    let actual = redis_cli(server.port(), None, &step.command);
    let outcome = compare_snowflake_reply(&mut conn, &step, &actual);
    assert!(outcome.is_err(), "{outcome:?}");

    let right = Step {
        reply: vec!["(integer) 382781309610622978".into()],
        ..step
    };
    assert_eq!(compare_snowflake_reply(&mut conn, &right, &actual), Ok(()));

    assert_eq!(
        issued_ids(
            "SNOWFLAKE.NEXT k FORMAT base62",
            &["1) \"0SJ1IWe1bGk\"".to_string()]
        ),
        vec![IdFormat::Base62.decode("0SJ1IWe1bGk").unwrap()]
    );

    let string = Step {
        line: 1,
        command: "SNOWFLAKE.NEXT orders FORMAT base62".into(),
        reply: vec!["(integer) 382781309610622978".into()],
    };
    let actual = redis_cli(server.port(), None, &string.command);
    assert!(compare_snowflake_reply(&mut conn, &string, &actual).is_err());
}

// The docs' own text: links, names, figures, length. The checks are in
// tests/src/doc_checks.rs, where unit tests show each failing on a planted error.

#[test]
fn every_internal_link_reaches_a_file_and_a_heading() {
    let root = root();
    let pages = doc_checks::pages(&root);
    let failures = doc_checks::broken_links(&pages, &doc_checks::file_exists(&root));
    let links: usize = pages.iter().map(|p| doc_checks::links(&p.text).len()).sum();
    println!("links: {} pages, {links} links", pages.len());
    assert!(
        failures.is_empty(),
        "{} broken links:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Hyphenated names in code spans that are neither idgen's settings nor the server's, each
/// with what it is. (Crates, the client's features and the soak's fault names are read from
/// the source instead.)
const OTHER_HYPHENATED_NAMES: &[(&str, &str)] = &[
    ("allkeys-lru", "a value of Redis's maxmemory-policy"),
    ("allow-busy", "a flag of Redis module commands"),
    ("deny-oom", "a flag of Redis module commands"),
    ("apt-get", "Debian's package tool"),
    ("docker-compose", "a program"),
    ("redis-cli", "a program"),
    ("redis-server", "a program"),
    ("redis-benchmark", "a program"),
    ("redis-sentinel", "a Debian package"),
    ("redis-tools", "a Debian package"),
    ("golang-go", "a Debian package"),
    ("libclang-dev", "a Debian package"),
    ("redis-module", "the Rust crate the module is built on"),
    ("rust-version", "a Cargo.toml field"),
    ("default-features", "a Cargo.toml field"),
    ("down-after-milliseconds", "a Sentinel setting"),
    ("failover-timeout", "a Sentinel setting"),
    ("parallel-syncs", "a Sentinel setting"),
    ("soak-c", "a network namespace the soak creates"),
];

/// Hyphenated string literals of a Rust source file (the soak's fault names).
fn hyphenated_literals(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.contains('-')
                && !s.starts_with('-')
                && s.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        })
        .map(str::to_string)
        .collect()
}

/// The workspace's crate names and the client's Cargo features.
fn crates_and_features() -> Vec<String> {
    let mut names = Vec::new();
    for manifest in ["core", "client", "module", "cli", "tests", "bench"] {
        let text =
            std::fs::read_to_string(root().join(manifest).join("Cargo.toml")).unwrap_or_default();
        let mut in_features = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_features = line == "[features]";
                continue;
            }
            if let Some(name) = line
                .strip_prefix("name = \"")
                .and_then(|r| r.strip_suffix('"'))
            {
                names.push(name.to_string());
            }
            if in_features {
                if let Some((feature, _)) = line.split_once('=') {
                    names.push(feature.trim().to_string());
                }
            }
        }
    }
    names
}

#[test]
fn every_command_setting_and_info_field_named_in_the_docs_exists_in_the_live_module() {
    let pages: Vec<_> = doc_checks::pages(&root())
        .into_iter()
        // History: the CHANGELOG names what releases had, renamed settings included.
        .filter(|p| p.path != "CHANGELOG.md")
        .collect();
    let server = Server::start(&[]);
    let mut conn = server.conn();

    let commands: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut conn).unwrap();
    let commands: BTreeSet<String> = commands.into_iter().map(|c| c.to_lowercase()).collect();
    let mut failures = doc_checks::unknown_commands(&pages, &commands);

    // A setting is idgen's when `CONFIG GET idgen.<name>` answers it by its exact name: that
    // also finds the hidden test setting (debug-clock-offset-ms), which `CONFIG GET idgen.*`
    // does not list.
    let mut config_get = |name: &str| -> bool {
        let reply: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(&mut conn)
            .unwrap_or_default();
        !reply.is_empty()
    };
    let mut others: BTreeSet<String> = OTHER_HYPHENATED_NAMES
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    others.extend(crates_and_features());
    let soak = root().join("tests/src/soak");
    for entry in std::fs::read_dir(&soak)
        .expect("read tests/src/soak")
        .flatten()
    {
        others.extend(hyphenated_literals(&entry.path()));
    }
    let named: BTreeSet<String> = pages
        .iter()
        .flat_map(|p| doc_checks::settings_named(&p.text))
        .map(|(_, name)| name)
        .collect();
    let known: BTreeSet<String> = named
        .iter()
        .filter(|name| {
            others.contains(*name)
                || commands.contains(&format!("idgen.{name}"))
                || config_get(&format!("idgen.{name}"))
                || config_get(name)
        })
        .cloned()
        .collect();
    failures.extend(doc_checks::unknown_settings(&pages, &|name| {
        known.contains(name)
    }));

    // INFO fields: what the live module reports, the keys the exporter script returns
    // (scripts/monitoring/idgen.lua), and the crates' paths (`idgen_client::…`).
    let info: String = redis::cmd("INFO").arg("idgen").query(&mut conn).unwrap();
    let mut fields: BTreeSet<String> = info
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect();
    let script = std::fs::read_to_string(root().join("scripts/monitoring/idgen.lua"))
        .expect("read scripts/monitoring/idgen.lua");
    fields.extend(
        script
            .split('\'')
            .skip(1)
            .step_by(2)
            .filter(|s| s.starts_with("idgen_"))
            .map(str::to_string),
    );
    fields.extend(crates_and_features().iter().map(|c| c.replace('-', "_")));
    failures.extend(doc_checks::unknown_info_fields(&pages, &|name| {
        fields.contains(name)
    }));
    println!(
        "names: {} commands known to the module, {} setting-like names in the docs, {} known, \
         {} INFO fields, exporter keys and crates",
        commands.len(),
        named.len(),
        known.len(),
        fields.len()
    );
    assert!(
        failures.is_empty(),
        "{} names in the docs that the module does not have:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn measured_figures_are_stated_in_benchmarks_md_only() {
    let pages = doc_checks::pages(&root());
    let failures = doc_checks::misplaced_figures(&pages);
    assert!(
        failures.is_empty(),
        "{} figures outside BENCHMARKS.md (the rule is in tests/src/doc_checks.rs, \
         misplaced_figures):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_readme_is_short_and_no_sentence_of_it_or_the_tutorial_is_long() {
    let pages = doc_checks::pages(&root());
    let readme = pages.iter().find(|p| p.path == "README.md").unwrap();
    // As `wc -w README.md` counts: every word of the file, code and transcripts included.
    let words = readme.text.split_whitespace().count();
    let mut failures = Vec::new();
    if words > 1000 {
        failures.push(format!("README.md has {words} words (at most 1,000)"));
    }
    for path in ["README.md", "docs/tutorial.md"] {
        let page = pages.iter().find(|p| p.path == path).unwrap();
        failures.extend(doc_checks::long_sentences(page, 40));
    }
    println!("README.md: {words} words");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
