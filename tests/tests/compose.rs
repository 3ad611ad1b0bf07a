//! docker-compose.yml cannot be started here (no Docker engine), so it is validated:
//! `docker-compose config` accepts it, its six nodes have distinct offsets 0..5 and one
//! shared step, and it matches the native scripts/cluster.sh (step, offsets, fence); and it
//! is one a user can trust: no obsolete `version` key, every node with a health check that
//! asks the module, the cluster formed only once all are healthy, no node running as root,
//! and the images it builds from pinned to a release.

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

#[test]
fn the_compose_file_is_current_pinned_checked_and_not_root() {
    let compose = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
    assert!(
        !compose.lines().any(|line| line.starts_with("version:")),
        "the `version` key is obsolete in the Compose Specification"
    );
    let output = Command::new("docker-compose")
        .arg("-f")
        .arg(root().join("docker-compose.yml"))
        .arg("config")
        .output()
        .expect("docker-compose is installed by scripts/deps.sh");
    assert!(output.status.success());
    let config = String::from_utf8(output.stdout).unwrap();
    // Each service's block in the normalized output: `  name:` then its indented lines.
    let mut services: Vec<(String, String)> = Vec::new();
    let mut in_services = false;
    for line in config.lines() {
        if line == "services:" {
            in_services = true;
            continue;
        }
        if in_services && !line.starts_with(' ') {
            in_services = false;
        }
        if !in_services {
            continue;
        }
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')) {
            if !name.starts_with(' ') {
                services.push((name.to_string(), String::new()));
                continue;
            }
        }
        if let Some((_, body)) = services.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    let nodes: Vec<&(String, String)> = services
        .iter()
        .filter(|(n, _)| n.starts_with("node"))
        .collect();
    assert_eq!(nodes.len(), 6, "{services:?}");
    for (name, body) in &services {
        assert!(body.contains("user: redis"), "{name} must not run as root");
    }
    for (name, body) in &nodes {
        assert!(
            body.contains("healthcheck:") && body.contains("IDGEN.IDENTITY"),
            "{name} has a health check that asks the module"
        );
    }
    let init = &services
        .iter()
        .find(|(n, _)| n == "cluster-init")
        .unwrap()
        .1;
    assert_eq!(
        init.matches("condition: service_healthy").count(),
        6,
        "the cluster is formed once every node is healthy"
    );

    // The images are pinned: no `latest`, no bare major versions.
    let dockerfile = std::fs::read_to_string(root().join("docker/Dockerfile")).unwrap();
    let from: Vec<&str> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("FROM "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(from.len(), 2, "{from:?}");
    for image in &from {
        let tag = image.split_once(':').map(|(_, t)| t).unwrap_or("latest");
        let version = tag.split('-').next().unwrap();
        assert!(
            version.split('.').count() >= 2 && version.split('.').all(|p| p.parse::<u32>().is_ok()),
            "{image} is not pinned to a release"
        );
    }
    assert!(
        from.iter().any(|image| image.starts_with("redis:8.")),
        "the runtime is a current Redis: {from:?}"
    );
    assert!(dockerfile.lines().any(|l| l.trim() == "USER redis"));
}
