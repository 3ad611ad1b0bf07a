//! Metrics where monitoring already looks: scripts/monitoring/idgen.lua run as
//! redis_exporter runs it (`EVAL script 0 0`, or `EVAL_RO` with `-lua-script-read-only`),
//! its values read as the exporter reads them (redigo's `StringMap`: bulk strings, pairs;
//! then Go's `strconv.ParseFloat` on each value), and the Prometheus rules in
//! scripts/monitoring/idgen-alerts.yml checked against the keys the script yields.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use idgen_tests::{info_line, Server, ServerOptions};
use redis::{cmd, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// Keys that only module versions comparing identities over the cluster bus report.
const CONFLICT_KEYS: [&str; 3] = [
    "idgen_conflicts",
    "idgen_issuing_refused",
    "idgen_identity_policy_refuse",
];

fn monitoring_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/monitoring")
        .join(name)
}

fn script() -> String {
    std::fs::read_to_string(monitoring_file("idgen.lua")).expect("read idgen.lua")
}

/// Runs the script with `command` (EVAL or EVAL_RO) exactly as the exporter does and reads
/// the reply as it does: an even number of bulk strings, key then value, every value a
/// float.
fn exporter_values(server: &Server, command: &str) -> BTreeMap<String, f64> {
    let reply: Value = cmd(command)
        .arg(script())
        .arg(0)
        .arg(0)
        .query(&mut server.conn())
        .unwrap_or_else(|error| panic!("{command} of idgen.lua failed: {error}"));
    let Value::Array(items) = reply else {
        panic!("{command} returned {reply:?}, not an array");
    };
    assert!(items.len() % 2 == 0, "odd number of items: {items:?}");
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).expect("UTF-8"),
        other => panic!("{other:?} is not a bulk string: redigo's StringMap refuses it"),
    };
    let mut values = BTreeMap::new();
    for pair in items.chunks(2) {
        let (key, value) = (text(&pair[0]), text(&pair[1]));
        let number: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("{key} = {value:?} does not parse as a float"));
        assert!(number.is_finite(), "{key} = {value}");
        assert!(values.insert(key.clone(), number).is_none(), "{key} twice");
    }
    values
}

#[test]
fn the_script_returns_every_numeric_info_field_under_eval_and_eval_ro() {
    let server = Server::start(&["step", "3", "offset", "2"]);
    let _: i64 = cmd("SNOWFLAKE.NEXT")
        .arg("orders")
        .query(&mut server.conn())
        .unwrap();
    // The module looks at the server's settings once a second: wait for its warning about
    // the harness's missing persistence.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.info_value("idgen", "idgen_warnings").as_deref() == Some("none") {
        assert!(std::time::Instant::now() < deadline, "no warning appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let info: String = cmd("INFO").arg("idgen").query(&mut server.conn()).unwrap();
    for command in ["EVAL", "EVAL_RO"] {
        let values = exporter_values(&server, command);
        assert_eq!(values["idgen_module_loaded"], 1.0);
        assert_eq!(values["idgen_step"], 3.0);
        assert_eq!(values["idgen_offset"], 2.0);
        assert!(values["idgen_snowflake_ids_issued"] >= 1.0);
        // The harness's server has no persistence: the module warns, the script counts its
        // warnings (joined with " | " in INFO).
        let warnings = info_line(&info, "idgen_warnings").unwrap();
        assert_eq!(
            values["idgen_warnings_count"],
            warnings.split(" | ").count() as f64,
            "{warnings}"
        );
        // Every numeric field of INFO idgen is there, under its own name.
        for line in info.lines().filter(|line| line.starts_with("idgen_")) {
            let (field, value) = line.trim().split_once(':').unwrap();
            if value.parse::<i64>().is_ok() {
                assert!(
                    values.contains_key(field),
                    "{field} missing from {values:?}"
                );
            }
        }
    }
    let warnings = info_line(&info, "idgen_warnings").unwrap();
    assert_ne!(warnings, "none");
}

#[test]
fn the_script_runs_read_only_on_a_replica() {
    let master = Server::start(&["step", "2", "offset", "0"]);
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let values = exporter_values(&replica, "EVAL_RO");
    assert_eq!(values["idgen_offset"], 1.0);
    assert_eq!(values["idgen_module_loaded"], 1.0);
}

#[test]
fn a_node_without_the_module_reports_it() {
    let server = Server::start_with(ServerOptions::without_module())
        .unwrap_or_else(|failure| panic!("{}", failure.log));
    for command in ["EVAL", "EVAL_RO"] {
        let values = exporter_values(&server, command);
        assert_eq!(
            values,
            BTreeMap::from([("idgen_module_loaded".to_string(), 0.0)])
        );
    }
}

/// The `key="…"` values an expression selects.
fn keys_in(expr: &str) -> Vec<String> {
    expr.split("key=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_rules_are_valid_yaml_and_use_the_keys_the_script_yields() {
    let text = std::fs::read_to_string(monitoring_file("idgen-alerts.yml")).unwrap();
    let documents = YamlLoader::load_from_str(&text).expect("valid YAML");
    assert_eq!(documents.len(), 1);
    let groups = documents[0]["groups"].as_vec().expect("groups");
    let server = Server::start(&["step", "2", "offset", "0"]);
    let yielded = exporter_values(&server, "EVAL");
    let reports_conflicts = yielded.contains_key("idgen_conflicts");
    if !reports_conflicts {
        eprintln!(
            "note: this module does not report idgen_conflicts; the rules' {CONFLICT_KEYS:?} \
             are checked against the contract list instead"
        );
    }
    let mut alerts = Vec::new();
    for group in groups {
        assert!(group["name"].as_str().is_some());
        for rule in group["rules"].as_vec().expect("rules") {
            let alert = rule["alert"].as_str().expect("every rule is an alert");
            let expr = rule["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{alert}: expr"));
            assert!(
                expr.contains("redis_script_values") || expr.contains("redis_script_result"),
                "{alert}: {expr}"
            );
            assert!(rule["labels"]["severity"].as_str().is_some(), "{alert}");
            assert!(rule["annotations"]["summary"].as_str().is_some(), "{alert}");
            assert!(
                rule["annotations"]["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("docs/operations.md")),
                "{alert}"
            );
            if !matches!(rule["for"], Yaml::BadValue) {
                let duration = rule["for"].as_str().expect("for: a duration");
                assert!(
                    duration.ends_with('m') || duration.ends_with('s'),
                    "{alert}"
                );
            }
            for key in keys_in(expr) {
                let known = yielded.contains_key(&key)
                    || (!reports_conflicts && CONFLICT_KEYS.contains(&key.as_str()));
                assert!(known, "{alert} uses {key}, which the script does not yield");
            }
            alerts.push(alert.to_string());
        }
    }
    for expected in [
        "IdgenIdentityConflict",
        "IdgenGuaranteeWarnings",
        "IdgenClockPaced",
        "IdgenDriftRefusalsRising",
        "IdgenErrorsRising",
        "IdgenModuleMissing",
    ] {
        assert!(alerts.iter().any(|a| a == expected), "{expected} missing");
    }
}
