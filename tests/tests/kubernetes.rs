//! deploy/kubernetes/statefulset.yaml: the fields the deployment relies on (a headless
//! Service the StatefulSet names, the pods' labels, the port, a step with room above the
//! replica count, persistence on a volume per pod that scaling keeps, the image of this
//! release with the module where docker/Dockerfile puts it), and its startup command, run
//! with `sh` as a pod would run it: the pod name's ordinal becomes the offset, and the
//! server it starts (a real one, with this build's module) has that identity.
//! No Kubernetes runs here: the manifest is checked as YAML, as compose.rs checks
//! docker-compose.yml.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use idgen_tests::{Server, ServerOptions};
use redis::cmd;
use yaml_rust2::{Yaml, YamlLoader};

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

fn manifest() -> Vec<Yaml> {
    let path = root().join("deploy/kubernetes/statefulset.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    let found: Vec<&Yaml> = docs
        .iter()
        .filter(|doc| doc["kind"].as_str() == Some(kind))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} in the manifest");
    found[0]
}

fn text<'a>(yaml: &'a Yaml, what: &str) -> &'a str {
    yaml.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {yaml:?}"))
}

/// The StatefulSet's one container.
fn container(statefulset: &Yaml) -> &Yaml {
    let containers = statefulset["spec"]["template"]["spec"]["containers"]
        .as_vec()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// A plain `value:` of the container's environment.
fn env_value(container: &Yaml, name: &str) -> Option<String> {
    container["env"]
        .as_vec()?
        .iter()
        .find(|var| var["name"].as_str() == Some(name))
        .and_then(|var| var["value"].as_str().map(String::from))
}

fn step(statefulset: &Yaml) -> u64 {
    env_value(container(statefulset), "IDGEN_STEP")
        .expect("IDGEN_STEP in the container's env")
        .parse()
        .unwrap()
}

#[test]
fn the_manifest_has_what_the_deployment_relies_on() {
    let docs = manifest();
    let service = of_kind(&docs, "Service");
    let statefulset = of_kind(&docs, "StatefulSet");
    assert_eq!(text(&statefulset["apiVersion"], "apiVersion"), "apps/v1");
    // A headless Service, which the StatefulSet names: each pod gets its DNS name.
    assert_eq!(text(&service["spec"]["clusterIP"], "clusterIP"), "None");
    assert_eq!(
        statefulset["spec"]["serviceName"],
        service["metadata"]["name"]
    );
    // The labels: the Service and the StatefulSet select the pods the template makes.
    let labels = &statefulset["spec"]["template"]["metadata"]["labels"];
    assert!(labels.as_hash().is_some_and(|h| !h.is_empty()));
    assert_eq!(&statefulset["spec"]["selector"]["matchLabels"], labels);
    assert_eq!(&service["spec"]["selector"], labels);
    // Room to grow: the step is above the replica count and within the sequence's 4096.
    let replicas = statefulset["spec"]["replicas"].as_i64().expect("replicas") as u64;
    let step = step(statefulset);
    assert!(
        replicas < step && step <= 4096,
        "replicas {replicas}, step {step}"
    );
    // The port, by name, from the Service to the container.
    let container = container(statefulset);
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"].as_i64(), Some(6379));
    assert_eq!(service["spec"]["ports"][0]["port"].as_i64(), Some(6379));
    assert_eq!(
        service["spec"]["ports"][0]["targetPort"], port["name"],
        "the Service's targetPort names the container's port"
    );
    // The pod's name reaches the startup command.
    let pod_name = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|var| var["name"].as_str() == Some("POD_NAME"))
        .expect("POD_NAME in the env");
    assert_eq!(
        text(
            &pod_name["valueFrom"]["fieldRef"]["fieldPath"],
            "POD_NAME's fieldPath"
        ),
        "metadata.name"
    );
    // Persistence: a volume per pod at the server's --dir, kept when the set scales down.
    let claims = statefulset["spec"]["volumeClaimTemplates"]
        .as_vec()
        .expect("volumeClaimTemplates");
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    let mount = container["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| m["name"] == claim["metadata"]["name"])
        .expect("the claim is mounted");
    assert_eq!(text(&mount["mountPath"], "mountPath"), "/data");
    assert_eq!(
        text(&claim["spec"]["accessModes"][0], "accessModes"),
        "ReadWriteOnce"
    );
    assert!(claim["spec"]["resources"]["requests"]["storage"]
        .as_str()
        .is_some());
    let retention = &statefulset["spec"]["persistentVolumeClaimRetentionPolicy"];
    assert_eq!(text(&retention["whenScaled"], "whenScaled"), "Retain");
    assert_eq!(text(&retention["whenDeleted"], "whenDeleted"), "Retain");
    // The image of this release, built by docker/Dockerfile, which puts the module where
    // the command loads it.
    let image = text(&container["image"], "image");
    assert!(
        image.contains(&format!(":{}-", env!("CARGO_PKG_VERSION"))),
        "{image} is not release {}",
        env!("CARGO_PKG_VERSION")
    );
    let dockerfile = std::fs::read_to_string(root().join("docker/Dockerfile")).unwrap();
    let module = dockerfile
        .lines()
        .find_map(|line| line.strip_prefix("COPY --from=build "))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .expect("the Dockerfile copies the module into the image");
    assert!(
        startup_script(statefulset).contains(&format!("--loadmodule {module}")),
        "the command loads {module}"
    );
}

fn startup_script(statefulset: &Yaml) -> &str {
    let command = container(statefulset)["command"].as_vec().expect("command");
    assert_eq!(text(&command[0], "command[0]"), "sh");
    assert_eq!(text(&command[1], "command[1]"), "-c");
    text(&command[2], "the startup script")
}

/// Runs the startup script as pod `pod_name` would, with `redis-server` replaced by a
/// program that prints its arguments one a line.
fn run_startup(statefulset: &Yaml, pod_name: &str, env: &HashMap<&str, &str>) -> Output {
    // A directory per run: the tests run in parallel in one process.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let bin = std::env::temp_dir().join(format!("idgen-k8s-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("redis-server");
    std::fs::write(&fake, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(startup_script(statefulset))
        .env_clear()
        .env("PATH", path)
        .env("POD_NAME", pod_name)
        .env("IDGEN_STEP", step(statefulset).to_string());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run sh");
    let _ = std::fs::remove_dir_all(&bin);
    output
}

fn lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn the_startup_command_takes_the_offset_from_the_pod_ordinal() {
    let docs = manifest();
    let statefulset = of_kind(&docs, "StatefulSet");
    let step = step(statefulset).to_string();
    let output = run_startup(statefulset, "idgen-2", &HashMap::new());
    assert!(output.status.success(), "{output:?}");
    let args = lines(&output);
    let loadmodule = args
        .iter()
        .position(|a| a == "--loadmodule")
        .expect("--loadmodule");
    let module_args = &args[loadmodule + 2..];
    assert_eq!(module_args, ["step", step.as_str(), "offset", "2"]);
    let server_args = &args[..loadmodule];
    for pair in [["--appendonly", "yes"], ["--dir", "/data"]] {
        assert!(
            server_args.windows(2).any(|w| w == pair),
            "{pair:?} in {server_args:?}"
        );
    }
    assert!(!server_args.contains(&"--requirepass".to_string()));
    // The server the command starts has that identity: this build's module, the same
    // server and module arguments (the harness picks the port and the directory).
    let mut kept: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < server_args.len() {
        if server_args[i] == "--port" || server_args[i] == "--dir" {
            i += 2;
            continue;
        }
        kept.push(&server_args[i]);
        i += 1;
    }
    let module_args: Vec<&str> = module_args.iter().map(String::as_str).collect();
    let server = Server::start_with(ServerOptions::module(&module_args).server_args(&kept))
        .unwrap_or_else(|failure| panic!("{}", failure.log));
    let identity: HashMap<String, redis::Value> =
        cmd("IDGEN.IDENTITY").query(&mut server.conn()).unwrap();
    assert_eq!(identity["offset"], redis::Value::Int(2));
    assert_eq!(identity["step"], redis::Value::Int(step.parse().unwrap()));
    assert_eq!(
        server.info_value("persistence", "aof_enabled").as_deref(),
        Some("1")
    );

    // A password from the Secret, when there is one.
    let output = run_startup(
        statefulset,
        "idgen-0",
        &HashMap::from([("REDIS_PASSWORD", "s3cret")]),
    );
    let args = lines(&output);
    assert!(args.windows(2).any(|w| w == ["--requirepass", "s3cret"]));
    assert!(args.ends_with(&["offset".into(), "0".into()]));
}

#[test]
fn a_pod_beyond_the_step_or_without_an_ordinal_does_not_start() {
    let docs = manifest();
    let statefulset = of_kind(&docs, "StatefulSet");
    let step = step(statefulset);
    for pod in [format!("idgen-{step}"), "idgen".to_string()] {
        let output = run_startup(statefulset, &pod, &HashMap::new());
        assert!(!output.status.success(), "{pod}: {output:?}");
        assert!(lines(&output).is_empty(), "{pod} started a server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("idgen: "), "{pod}: {stderr}");
    }
    let last = run_startup(statefulset, &format!("idgen-{}", step - 1), &HashMap::new());
    assert!(last.status.success(), "{last:?}");
}
