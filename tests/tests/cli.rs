//! The `idgen` command-line tool against real servers: every finding of `idgen check` on a
//! sound deployment and on broken ones, its exit codes and JSON, `watch`, `next`, `decode`,
//! and bad input (one line on stderr, exit code, nothing written).

use std::io::{Read, Write};
use std::net::TcpListener;

use idgen_tests::{create_acl_user, run_idgen, Cluster, Server, ServerOptions, ToolRun};
use redis::cmd;
use serde_json::Value;

/// A node as an operator should run it: AOF on (appendfsync everysec), the module's
/// default fences, no eviction.
fn sound_node(step: &str, offset: &str) -> Server {
    Server::start_with(
        ServerOptions::module(&["step", step, "offset", offset])
            .server_args(&["--appendonly", "yes"]),
    )
    .unwrap_or_else(|failure| panic!("server did not start:\n{}", failure.log))
}

/// `idgen check --json` on these URLs (and extra arguments): the run and its document.
fn check(urls: &[String], extra: &[&str]) -> (ToolRun, Value) {
    let mut args = vec!["check", "--json"];
    args.extend(urls.iter().map(String::as_str));
    args.extend(extra);
    let run = run_idgen(&args);
    let json: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {run:?}"));
    assert_eq!(
        json["exit_code"].as_i64().map(|c| c as i32),
        run.code,
        "{run:?}"
    );
    (run, json)
}

/// The findings of one check (`offsets`), with their node (or `null`) and level.
fn findings<'a>(json: &'a Value, check: &str) -> Vec<&'a Value> {
    json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|finding| finding["check"] == check)
        .collect()
}

/// The one finding of `check` about `node` (`None`: the deployment's).
fn finding<'a>(json: &'a Value, check: &str, node: Option<&str>) -> &'a Value {
    let all = findings(json, check);
    let matching: Vec<_> = all
        .into_iter()
        .filter(|finding| finding["node"].as_str() == node)
        .collect();
    assert_eq!(matching.len(), 1, "{check} {node:?} in {json:#}");
    matching[0]
}

fn address(server: &Server) -> String {
    format!("127.0.0.1:{}", server.port())
}

fn level(finding: &Value) -> &str {
    finding["level"].as_str().expect("a level")
}

fn message(finding: &Value) -> &str {
    finding["message"].as_str().expect("a message")
}

/// Waits until the module on `server` reports a warning in `INFO idgen`.
fn wait_for_warning(server: &Server) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.info_value("idgen", "idgen_warnings").as_deref() == Some("none") {
        assert!(std::time::Instant::now() < deadline, "no warning appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every line on stderr: exactly one, naming the tool.
fn one_line_error(run: &ToolRun) -> &str {
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{run:?}");
    assert!(lines[0].starts_with("idgen: "), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
    lines[0]
}

#[test]
fn a_sound_deployment_passes_every_check() {
    let nodes = [
        sound_node("6", "0"),
        sound_node("6", "1"),
        sound_node("6", "2"),
    ];
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let (run, json) = check(&urls, &[]);
    assert_eq!(run.code, Some(0), "{json:#}");
    for finding in json["findings"].as_array().unwrap() {
        assert_eq!(level(finding), "pass", "{finding}");
    }
    for node in &nodes {
        let node = address(node);
        let node = Some(node.as_str());
        for check in [
            "reach",
            "module",
            "persistence",
            "eviction",
            "clock",
            "warnings",
            "conflicts",
            "permissions",
        ] {
            finding(&json, check, node);
        }
    }
    assert!(message(finding(&json, "offsets", None)).contains("distinct offsets (0, 1, 2)"));
    assert!(message(finding(&json, "room", None)).contains("leaves 3 offsets"));
    assert!(message(finding(&json, "identity", None)).contains("step 6"));
    assert!(message(finding(&json, "versions", None)).contains("every node"));
    finding(&json, "clocks", None);
    // The text report: one line per finding and a summary.
    let text = run_idgen(&["check", &urls[0], &urls[1], &urls[2]]);
    assert_eq!(text.code, Some(0), "{text:?}");
    assert_eq!(
        text.stdout.lines().count(),
        json["findings"].as_array().unwrap().len() + 1
    );
    assert!(text.stdout.lines().last().unwrap().contains("0 fail"));
}

#[test]
fn the_probes_write_nothing_and_count_nothing() {
    let node = sound_node("1", "0");
    let (run, json) = check(&[node.url()], &["--spare-offsets", "0"]);
    assert_eq!(run.code, Some(0), "{json:#}");
    let mut conn = node.conn();
    let keys: i64 = cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 0);
    let info: String = cmd("INFO").arg("idgen").query(&mut conn).unwrap();
    for counter in [
        "idgen_errors:0",
        "idgen_snowflake_calls:0",
        "idgen_segment_calls:0",
    ] {
        assert!(info.contains(counter), "{info}");
    }
}

#[test]
fn a_shared_offset_fails_and_names_both_nodes() {
    let a = sound_node("3", "1");
    let b = sound_node("3", "1");
    let (run, json) = check(&[a.url(), b.url()], &[]);
    assert_eq!(run.code, Some(1));
    let offsets = finding(&json, "offsets", None);
    assert_eq!(level(offsets), "fail");
    assert!(
        message(offsets).contains(&format!(
            "{} and {} share offset 1",
            address(&a),
            address(&b)
        )),
        "{offsets}"
    );
}

#[test]
fn a_mixed_step_fails_and_no_room_warns() {
    let a = sound_node("2", "0");
    let b = sound_node("3", "1");
    let (run, json) = check(&[a.url(), b.url()], &[]);
    assert_eq!(run.code, Some(1));
    let identity = finding(&json, "identity", None);
    assert_eq!(level(identity), "fail");
    assert!(message(identity).contains("disagree on step or layout"));
    assert!(message(identity).contains(&format!("{} has step 2", address(&a))));
    assert!(message(identity).contains(&format!("{} has step 3", address(&b))));
    // Two nodes in step 3: one offset left, fewer than asked for here.
    let room = finding(&json, "room", None);
    assert_eq!(level(room), "pass", "{room}");
    let (_, json) = check(&[a.url(), b.url()], &["--spare-offsets", "2"]);
    assert_eq!(level(finding(&json, "room", None)), "warn");
}

#[test]
fn a_node_without_the_module_fails() {
    let with = sound_node("2", "0");
    let without =
        Server::start_with(ServerOptions::without_module().server_args(&["--appendonly", "yes"]))
            .unwrap_or_else(|failure| panic!("{}", failure.log));
    let (run, json) = check(&[with.url(), without.url()], &[]);
    assert_eq!(run.code, Some(1));
    let module = finding(&json, "module", Some(&address(&without)));
    assert_eq!(level(module), "fail");
    assert!(message(module).contains("not loaded"), "{module}");
    assert_eq!(
        level(finding(&json, "module", Some(&address(&with)))),
        "pass"
    );
}

#[test]
fn aof_off_and_an_evicting_policy_fail() {
    // The harness's default: no AOF, no RDB saves.
    let bare = Server::start(&["step", "2", "offset", "0"]);
    let evicting = Server::start_with(
        ServerOptions::module(&["step", "2", "offset", "1"]).server_args(&[
            "--appendonly",
            "yes",
            "--maxmemory-policy",
            "allkeys-lru",
        ]),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log));
    // The module looks at the settings once a second: wait until both nodes warn.
    for node in [&bare, &evicting] {
        wait_for_warning(node);
    }
    let (run, json) = check(&[bare.url(), evicting.url()], &[]);
    assert_eq!(run.code, Some(1));
    let persistence = finding(&json, "persistence", Some(&address(&bare)));
    assert_eq!(level(persistence), "fail");
    assert!(message(persistence).contains("no persistence"));
    assert_eq!(
        level(finding(&json, "persistence", Some(&address(&evicting)))),
        "pass"
    );
    let eviction = finding(&json, "eviction", Some(&address(&evicting)));
    assert_eq!(level(eviction), "fail");
    assert!(message(eviction).contains("allkeys-lru"));
    assert_eq!(
        level(finding(&json, "eviction", Some(&address(&bare)))),
        "pass"
    );
    // The module itself warns about both.
    for node in [&bare, &evicting] {
        assert_eq!(
            level(finding(&json, "warnings", Some(&address(node)))),
            "warn"
        );
    }
}

#[test]
fn a_node_down_exits_2() {
    let up = sound_node("2", "0");
    let mut down = sound_node("2", "1");
    let down_address = address(&down);
    down.kill();
    let (run, json) = check(&[up.url(), down.url()], &[]);
    assert_eq!(run.code, Some(2), "{json:#}");
    assert_eq!(json["unreachable"], true);
    let reach = finding(&json, "reach", Some(&down_address));
    assert_eq!(level(reach), "fail");
    assert!(
        message(reach).contains("nothing listens there (connection refused)"),
        "{reach}"
    );
    assert_eq!(level(finding(&json, "reach", Some(&address(&up)))), "pass");
    // A wrong password reaches the node: a failed check (exit 1), not exit 2.
    let wrong = format!("redis://nobody:wrong@127.0.0.1:{}/", up.port());
    let (run, json) = check(&[wrong], &[]);
    assert_eq!(run.code, Some(1), "{json:#}");
    let reach = finding(&json, "reach", Some(&address(&up)));
    assert_eq!(level(reach), "fail");
}

#[test]
fn a_user_without_a_needed_command_fails_and_nothing_is_written() {
    let node = sound_node("1", "0");
    // An application user as docs/client.md gives it, without +segment.next; with INFO,
    // CONFIG and TIME so that the other checks can run.
    create_acl_user(
        &node,
        "app",
        "pw",
        &[
            "~orders:*",
            "+idgen.identity",
            "+snowflake.next",
            "+ping",
            "+multi",
            "+discard",
            "+info",
            "+time",
        ],
    );
    let url = format!("redis://app:pw@127.0.0.1:{}/", node.port());
    let (run, json) = check(
        std::slice::from_ref(&url),
        &["--probe-key", "orders:1", "--spare-offsets", "0"],
    );
    assert_eq!(run.code, Some(1), "{json:#}");
    let permissions = finding(&json, "permissions", Some(&address(&node)));
    assert_eq!(level(permissions), "fail");
    assert!(
        message(permissions).contains("may not run SEGMENT.NEXT (+segment.next)"),
        "{permissions}"
    );
    assert!(
        !message(permissions).contains("SNOWFLAKE.NEXT"),
        "{permissions}"
    );
    // A key outside the user's patterns: a warning that says how to check the right one.
    let (_, json) = check(std::slice::from_ref(&url), &[]);
    let permissions = finding(&json, "permissions", Some(&address(&node)));
    assert!(
        message(permissions).contains("SEGMENT.NEXT (+segment.next)"),
        "{permissions}"
    );
    // Nothing written, nothing counted.
    let mut conn = node.conn();
    let keys: i64 = cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 0);
    let info: String = cmd("INFO").arg("idgen").query(&mut conn).unwrap();
    assert!(info.contains("idgen_errors:0"), "{info}");
}

#[test]
fn a_user_with_the_documented_grants_passes_without_multi() {
    let node = sound_node("1", "0");
    // Exactly the documented one-node grants: no MULTI, so the ID commands are tried with
    // COUNT 0, which the module refuses after the ACL check; no INFO, CONFIG or TIME.
    create_acl_user(
        &node,
        "app",
        "pw",
        &[
            "~orders:*",
            "~invoice",
            "+idgen.identity",
            "+snowflake.next",
            "+segment.next",
            "+ping",
        ],
    );
    let url = format!("redis://app:pw@127.0.0.1:{}/", node.port());
    let (_, json) = check(std::slice::from_ref(&url), &["--probe-key", "orders:1"]);
    let permissions = finding(&json, "permissions", Some(&address(&node)));
    assert_eq!(level(permissions), "pass", "{permissions}");
    // What it cannot read is a warning, never a failure.
    assert_eq!(
        level(finding(&json, "clock", Some(&address(&node)))),
        "warn"
    );
    let (_, json) = check(&[url], &[]);
    let permissions = finding(&json, "permissions", Some(&address(&node)));
    assert_eq!(level(permissions), "warn", "{permissions}");
    assert!(
        message(permissions).contains("--probe-key"),
        "{permissions}"
    );
    let keys: i64 = cmd("DBSIZE").query(&mut node.conn()).unwrap();
    assert_eq!(keys, 0);
}

#[test]
fn a_cluster_is_checked_with_every_member_and_its_slots() {
    let cluster = Cluster::start();
    let seed = cluster.urls()[0].clone();
    let mut args = vec!["check", "--json", "--cluster", seed.as_str()];
    args.extend(["--probe-key", "orders:1"]);
    let run = run_idgen(&args);
    let json: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{run:?}"));
    assert_eq!(findings(&json, "reach").len(), 6, "{json:#}");
    assert_eq!(level(finding(&json, "slots", None)), "pass", "{json:#}");
    // The module follows whatever way this server moves slots (MIGRATE everywhere; CLUSTER
    // MIGRATION on Redis 8.4+, CLUSTER MIGRATESLOTS on Valkey 9).
    let resharding = finding(&json, "resharding", None);
    assert_eq!(level(resharding), "pass", "{json:#}");
    assert!(message(resharding).contains("MIGRATE"), "{resharding}");
    assert_eq!(level(finding(&json, "offsets", None)), "pass", "{json:#}");
    assert_eq!(level(finding(&json, "identity", None)), "pass", "{json:#}");
    for permissions in findings(&json, "permissions") {
        assert_eq!(level(permissions), "pass", "{permissions}");
        assert!(message(permissions).contains("CLUSTER SLOTS"));
    }
}

#[test]
fn conflicts_the_nodes_report_fail_the_check() {
    let cluster = Cluster::start();
    let ports = cluster.ports();
    let info: String = cmd("INFO")
        .arg("idgen")
        .query(&mut cluster.node_conn(ports[0]))
        .unwrap();
    if !info.contains("idgen_conflicts:") {
        eprintln!(
            "skipped: this module does not report idgen_conflicts in INFO idgen (identity \
             comparison over the cluster bus is not in this build)"
        );
        return;
    }
    // The node on the second port restarts with the first one's offset.
    let first_offset = idgen_tests::info_field(&mut cluster.node_conn(ports[0]), "offset");
    cluster.restart_node_with(
        ports[1],
        &idgen_tests::module_path(),
        &["offset", &first_offset],
    );
    let seed = cluster.urls()[0].clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let run = run_idgen(&["check", "--json", "--cluster", &seed]);
        let json: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{run:?}"));
        let failing: Vec<_> = findings(&json, "conflicts")
            .into_iter()
            .filter(|finding| level(finding) == "fail")
            .collect();
        if !failing.is_empty() {
            assert_eq!(run.code, Some(1), "{json:#}");
            assert!(
                message(failing[0]).contains("identity conflicts"),
                "{json:#}"
            );
            // It names the setting as operators write it (it once said identity-policy).
            assert!(
                message(failing[0]).contains("(identity-conflicts refuse)"),
                "{json:#}"
            );
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no conflict reported: {json:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[test]
fn watch_prints_rates_per_node_and_stops_after_its_iterations() {
    let node = sound_node("1", "0");
    let run = run_idgen(&[
        "watch",
        &node.url(),
        "--iterations",
        "3",
        "--interval-ms",
        "200",
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{run:?}");
    assert!(lines[0].contains("snowflake/s") && lines[0].contains("paced"));
    // The first sample has no rate yet; the next ones do.
    assert!(lines[1].contains(&address(&node)) && lines[1].contains(" - "));
    assert!(!lines[2].contains(" - "), "{run:?}");
}

#[test]
fn next_and_decode_round_trip() {
    let node = sound_node("4", "3");
    let url = node.url();
    let run = run_idgen(&["--node", &url, "next", "orders", "--count", "3"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let ids: Vec<i64> = run.stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let decoded = run_idgen(&["-u", &url, "decode", &ids[0].to_string(), "--json"]);
    let parts: Value =
        serde_json::from_str(&decoded.stdout).unwrap_or_else(|_| panic!("{decoded:?}"));
    assert_eq!(parts["offset"], 3);
    let base62 = run_idgen(&["-u", &url, "next", "orders", "--format", "base62"]);
    let text = base62.stdout.trim();
    assert_eq!(text.len(), 11, "{base62:?}");
    let decoded = run_idgen(&["-u", &url, "decode", text, "--json"]);
    let parts: Value =
        serde_json::from_str(&decoded.stdout).unwrap_or_else(|_| panic!("{decoded:?}"));
    assert_eq!(parts["offset"], 3);
    let segment = run_idgen(&["-u", &url, "next", "invoice", "--segment", "-n", "2"]);
    let values: Vec<i64> = segment.stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), 2, "{segment:?}");
    assert_eq!(values[1] - values[0], 4);
    assert!(values.iter().all(|v| v % 4 == 3));
}

/// The parts `SNOWFLAKE.DECODE` gives (RESP2: a flat list of names and values).
fn server_decode(conn: &mut redis::Connection, id: i64) -> std::collections::HashMap<String, i64> {
    let reply: Vec<redis::Value> = cmd("SNOWFLAKE.DECODE").arg(id).query(conn).unwrap();
    reply
        .chunks(2)
        .filter_map(|pair| {
            let name: String = redis::from_redis_value_ref(&pair[0]).ok()?;
            let value: i64 = redis::from_redis_value_ref(&pair[1]).ok()?;
            Some((name, value))
        })
        .collect()
}

#[test]
fn decode_needs_no_server_with_the_default_layout_or_one_given() {
    // IDs from a server on the default layout and from one on another layout.
    let default = sound_node("4", "3");
    let other_args = [
        "step",
        "4",
        "offset",
        "2",
        "time-unit-ms",
        "10",
        "time-bits",
        "38",
        "shard-bits",
        "13",
        "sequence-bits",
        "12",
    ];
    let other = Server::start(&other_args);
    for (server, options) in [
        (&default, vec![]),
        (
            &other,
            vec![
                "--time-unit-ms",
                "10",
                "--time-bits",
                "38",
                "--shard-bits",
                "13",
                "--sequence-bits",
                "12",
            ],
        ),
    ] {
        let mut conn = server.conn();
        let id: i64 = cmd("SNOWFLAKE.NEXT")
            .arg("orders")
            .arg("SHARD")
            .arg(5)
            .query(&mut conn)
            .unwrap();
        let expected = server_decode(&mut conn, id);
        let id_text = id.to_string();
        let mut args = vec!["decode", id_text.as_str(), "--json", "--step", "4"];
        args.extend(options.iter().copied());
        let run = run_idgen(&args);
        assert_eq!(run.code, Some(0), "{run:?}");
        let parts: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{run:?}"));
        for field in ["unix_ms", "shard", "sequence", "offset"] {
            assert_eq!(
                parts[field], expected[field],
                "{field}: {run:?} {expected:?}"
            );
        }
        // Without --step the offset is not guessed.
        let mut args = vec!["decode", id_text.as_str()];
        args.extend(options.iter().copied());
        let run = run_idgen(&args);
        assert_eq!(run.code, Some(0), "{run:?}");
        assert!(run.stdout.contains("give --step N"), "{run:?}");
        assert!(run.stdout.contains("offline"), "{run:?}");
    }
    // A layout that cannot be, and layout options beside a node, are usage errors.
    let wide = run_idgen(&["decode", "12345", "--time-bits", "50"]);
    assert_eq!(wide.code, Some(64), "{wide:?}");
    assert!(one_line_error(&wide).contains("at most 63"), "{wide:?}");
    let both = run_idgen(&["-u", &default.url(), "decode", "12345", "--step", "4"]);
    assert_eq!(both.code, Some(64), "{both:?}");
}

#[test]
fn nothing_listening_is_said_plainly() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    let address = format!("127.0.0.1:{port}: nothing listens there");
    for args in [
        vec!["-u", url.as_str(), "decode", "384539602628644189"],
        vec!["-u", url.as_str(), "next", "orders"],
        vec!["-u", url.as_str(), "next", "invoice", "--segment"],
        vec!["-u", url.as_str(), "leases", "pool"],
        vec!["--cluster", url.as_str(), "next", "orders"],
        vec![
            "--sentinel",
            url.as_str(),
            "--service",
            "m",
            "next",
            "orders",
        ],
        vec!["check", url.as_str()],
    ] {
        let run = run_idgen(&args);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(said.contains(&address), "{args:?}: {run:?}");
        assert!(!said.contains("misconfigured"), "{args:?}: {run:?}");
    }
    // `idgen check` names the one cause; the deployment-wide findings point to it.
    let run = run_idgen(&["check", &url]);
    for line in run.stdout.lines().filter(|line| line.starts_with("FAIL")) {
        assert!(
            line.contains("nothing listens there") || line.contains("no node answered (see reach)"),
            "{line}\n{run:?}"
        );
    }
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let node = sound_node("1", "0");
    let url = node.url();
    let mut conn = node.conn();
    let _: () = cmd("RPUSH")
        .arg("a-list")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let digest_before = idgen_tests::digest(&mut conn);

    let malformed = run_idgen(&["check", "http//nowhere"]);
    assert_eq!(malformed.code, Some(64));
    assert!(one_line_error(&malformed).contains("is not a node URL"));

    let unknown_flag = run_idgen(&["check", "--frobnicate", &url]);
    assert_eq!(unknown_flag.code, Some(64));
    assert!(one_line_error(&unknown_flag).contains("--frobnicate"));

    let no_service = run_idgen(&["check", "--sentinel", &url]);
    assert_eq!(no_service.code, Some(64));
    assert!(one_line_error(&no_service).contains("--service"));

    for segment in [false, true] {
        let mut args = vec!["-u", url.as_str(), "next", "a-list"];
        if segment {
            args.push("--segment");
        }
        let wrong_type = run_idgen(&args);
        assert_eq!(wrong_type.code, Some(1));
        assert!(
            one_line_error(&wrong_type).contains("WRONGTYPE"),
            "{wrong_type:?}"
        );
    }
    assert_eq!(idgen_tests::digest(&mut conn), digest_before);
    let keys: i64 = cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 1);

    let bad_id = run_idgen(&["-u", &url, "decode", "not-an-id"]);
    assert_eq!(bad_id.code, Some(64));
    assert!(one_line_error(&bad_id).contains("is not an ID"));
}

#[test]
fn a_node_that_is_not_redis_is_reported_as_unreachable() {
    // Something that answers like a web server.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 512];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let url = format!("redis://127.0.0.1:{port}/");
    let (run, json) = check(std::slice::from_ref(&url), &[]);
    assert_eq!(run.code, Some(2));
    let reach = finding(&json, "reach", Some(&format!("127.0.0.1:{port}")));
    assert!(
        message(reach).contains("is this a Redis server?"),
        "{reach}"
    );
    let next = run_idgen(&["-u", &url, "next", "orders"]);
    assert_eq!(next.code, Some(2), "{next:?}");
    assert!(one_line_error(&next).contains("is this a Redis server?"));
}

#[test]
fn a_paced_clock_warns() {
    let node = Server::start_with(
        ServerOptions::module(&["step", "1", "offset", "0"]).server_args(&[
            "--appendonly",
            "yes",
            "--enable-protected-configs",
            "yes",
        ]),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log));
    let mut conn = node.conn();
    let set_offset = |conn: &mut redis::Connection, offset_ms: i64| {
        let _: () = cmd("CONFIG")
            .arg("SET")
            .arg("idgen.debug-clock-offset-ms")
            .arg(offset_ms)
            .query(conn)
            .unwrap();
    };
    // The wall clock an hour ahead for one call, then corrected: the snowflake clock stays
    // ahead and runs paced.
    set_offset(&mut conn, 3_600_000);
    let _: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("orders")
        .query(&mut conn)
        .unwrap();
    set_offset(&mut conn, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while node.info_value("idgen", "idgen_clock_paced").as_deref() != Some("1") {
        let _: i64 = cmd("SNOWFLAKE.NEXT")
            .arg("orders")
            .query(&mut conn)
            .unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "the clock never paced"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (run, json) = check(&[node.url()], &["--spare-offsets", "0"]);
    assert_eq!(run.code, Some(0), "warnings only: {json:#}");
    let clock = finding(&json, "clock", Some(&address(&node)));
    assert_eq!(level(clock), "warn");
    assert!(message(clock).contains("paced"), "{clock}");
}

#[test]
fn a_sentinel_deployment_is_checked_with_master_and_replica() {
    let master = sound_node("4", "0");
    let replica = Server::start_with(
        ServerOptions::module(&["step", "4", "offset", "1"]).server_args(&[
            "--appendonly",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &master.port().to_string(),
        ]),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log));
    replica.wait_in_sync();
    let sentinels = idgen_tests::Sentinels::start(1, master.port(), 1000);
    // A sentinel learns the replicas from the master's INFO.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let replicas: Vec<redis::Value> = cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(idgen_tests::SENTINEL_MASTER_NAME)
            .query(&mut sentinels.conn(0))
            .unwrap();
        if !replicas.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sentinel never saw the replica"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let sentinel_url = sentinels.urls()[0].clone();
    let run = run_idgen(&[
        "check",
        "--json",
        "--sentinel",
        &sentinel_url,
        "--service",
        idgen_tests::SENTINEL_MASTER_NAME,
    ]);
    let json: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("{run:?}"));
    assert_eq!(run.code, Some(0), "{json:#}");
    let reach = findings(&json, "reach");
    assert_eq!(reach.len(), 2, "{json:#}");
    assert!(message(finding(&json, "reach", Some(&address(&master)))).contains("master"));
    assert!(message(finding(&json, "reach", Some(&address(&replica)))).contains("replica"));
    let permissions = finding(&json, "permissions", Some(&address(&replica)));
    assert!(message(permissions).contains("ROLE"), "{permissions}");
}

#[test]
fn a_tls_node_with_an_acl_user_is_checked() {
    if !idgen_tests::server_has_tls() {
        eprintln!("skipped: this server binary was built without TLS");
        return;
    }
    let dir = std::env::temp_dir().join(format!("idgen-cli-tls-{}", std::process::id()));
    let files = idgen_tests::TlsFiles::generate(&dir);
    let node = Server::start_with(
        ServerOptions::module(&["step", "2", "offset", "1"])
            .server_args(&["--appendonly", "yes"])
            .tls_only(files),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log));
    let mut conn = node.conn();
    let _: () = cmd("ACL")
        .arg(&["SETUSER", "ops", "on", ">pw", "~*", "+@all"])
        .query(&mut conn)
        .unwrap();
    let url = format!("rediss://ops:pw@127.0.0.1:{}/#insecure", node.port());
    let (run, json) = check(std::slice::from_ref(&url), &[]);
    assert_eq!(run.code, Some(0), "{json:#}");
    assert_eq!(
        level(finding(&json, "module", Some(&address(&node)))),
        "pass"
    );
    // Without #insecure the self-signed certificate is refused: the node is unreachable.
    let strict = format!("rediss://ops:pw@127.0.0.1:{}/", node.port());
    let (run, _) = check(&[strict], &[]);
    assert_eq!(run.code, Some(2));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn mixed_module_versions_warn() {
    let Some(previous) = std::env::var_os("IDGEN_PREVIOUS_MODULE") else {
        eprintln!(
            "skipped: IDGEN_PREVIOUS_MODULE is not set (scripts/test.sh sets it to the previous \
             release's module)"
        );
        return;
    };
    let current = sound_node("2", "0");
    let old = Server::start_with(
        ServerOptions::module(&["step", "2", "offset", "1"])
            .server_args(&["--appendonly", "yes"])
            .module_library(previous.into()),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log));
    let (run, json) = check(&[current.url(), old.url()], &[]);
    let versions = finding(&json, "versions", None);
    assert_eq!(level(versions), "warn", "{json:#}");
    assert!(message(versions).contains("rolling upgrade"));
    assert_eq!(run.code, Some(0), "a warning alone passes: {json:#}");
}
