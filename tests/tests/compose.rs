//! docker-compose.yml cannot be started here (no Docker engine), so it is validated:
//! `docker-compose config` accepts it, its six nodes have distinct offsets 0..5 and one
//! shared step, and it matches the native scripts/cluster.sh (step, offsets, fence).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The value following each `- NAME` item in the normalized compose output.
fn values_after(config: &str, name: &str) -> Vec<String> {
    let lines: Vec<&str> = config.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == format!("- {name}"))
        .map(|pair| {
            pair[1]
                .trim_start_matches("- ")
                .trim_matches('\'')
                .trim_matches('"')
                .to_string()
        })
        .collect()
}

#[test]
fn the_compose_file_is_valid_and_matches_the_native_cluster() {
    let output = Command::new("docker-compose")
        .arg("-f")
        .arg(root().join("docker-compose.yml"))
        .arg("config")
        .output()
        .expect("docker-compose is installed by scripts/deps.sh");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let config = String::from_utf8(output.stdout).unwrap();

    let steps: BTreeSet<String> = values_after(&config, "step").into_iter().collect();
    let offsets: Vec<u64> = values_after(&config, "offset")
        .iter()
        .map(|o| o.parse().unwrap())
        .collect();
    let ports: BTreeSet<String> = values_after(&config, "--port").into_iter().collect();
    assert_eq!(offsets.len(), 6, "six nodes");
    assert_eq!(
        offsets.iter().copied().collect::<BTreeSet<_>>(),
        (0..6).collect(),
        "distinct offsets 0..5"
    );
    assert_eq!(steps.len(), 1, "one shared step: {steps:?}");
    assert_eq!(ports.len(), 6);
    let step: u64 = steps.iter().next().unwrap().parse().unwrap();
    assert!(step >= 6, "the step covers every node");
    assert!(config.contains("--cluster-replicas") && config.contains("cluster-init"));

    // Both rely on the safe defaults for everything but the identity.
    assert!(
        !config.contains("segment-fence"),
        "the compose file keeps the default fence"
    );

    // The native script: same step, offsets 0..nodes-1, same (default) fence.
    let script = std::fs::read_to_string(root().join("scripts/cluster.sh")).unwrap();
    let setting = |name: &str| {
        script
            .lines()
            .find_map(|line| line.trim().strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("scripts/cluster.sh sets {name}"))
            .to_string()
    };
    assert_eq!(setting("step"), step.to_string());
    assert_eq!(setting("nodes"), offsets.len().to_string());
    assert!(
        script.contains(r#"offset "$i""#),
        "the script gives node i offset i"
    );
    assert!(
        !script.contains("segment-fence"),
        "the script keeps the default fence"
    );
}
