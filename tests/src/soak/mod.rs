//! A randomized fault soak: a deployment with the module (Sentinel or Cluster), clients of
//! the project's crate that follow the master and plain clients pinned to one node, a
//! seeded nemesis, and a checker over everything the clients received. `scripts/soak.sh`
//! runs it; `src/bin/soak.rs` is its command line.

pub mod checker;
pub mod clients;
pub mod cluster_topology;
pub mod deployment;
pub mod history;
pub mod holders;
pub mod nemesis;
pub mod report;
pub mod schedule;
pub mod sentinel_topology;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deployment::{Network, Nodes};
use history::History;
use nemesis::{Nemesis, Topology};
use schedule::FaultKind;

/// Builds the topology the clients that follow the master connect with.
type FollowTopology = Box<dyn Fn() -> idgen_client::Result<idgen_client::Topology> + Send + Sync>;

/// Which deployment to soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Three data nodes and three sentinels.
    Sentinel,
    /// Three masters and three replicas.
    Cluster,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long the clients and the nemesis run.
    pub seconds: u64,
    /// The nemesis's seed.
    pub seed: u64,
    /// The deployment.
    pub shape: Shape,
    /// Every node on offset 0 (forbidden by the docs): the run must find duplicates.
    pub control_shared_offset: bool,
    /// Cluster: every node under `identity-conflicts warn` (the guard reports but lets the
    /// node issue), and only identity mistakes (another node's offset): the run must find
    /// duplicates — what the guard prevents in every other run.
    pub control_identity_warn: bool,
    /// Sentinel: the module's lease fence at a start or promotion turned off (the hidden
    /// `idgen.debug-lease-fence-off`), and only lost grants: the run must find duplicates.
    pub control_lease_fence: bool,
    /// Leased-generator holder processes (`lease_holder`); 0 runs none.
    pub holders: usize,
    /// Where the nodes run.
    pub network: Network,
    /// Where the nodes' files and, on a failure, the history go.
    pub run_dir: PathBuf,
}

/// The figures of a finished soak.
#[derive(Debug)]
pub struct Outcome {
    /// The closing line.
    pub summary: String,
    /// Whether the run passed (for a control: whether it found duplicates).
    pub passed: bool,
}

/// Runs a soak and prints what happened.
pub fn run(options: &Options) -> Result<Outcome, String> {
    std::fs::create_dir_all(&options.run_dir).map_err(|e| e.to_string())?;
    let step = if options.shape == Shape::Sentinel {
        4
    } else {
        8
    };
    let node_count = if options.shape == Shape::Sentinel {
        3
    } else {
        6
    };
    let offsets: Vec<u64> = (0..node_count)
        .map(|i| if options.control_shared_offset { 0 } else { i })
        .collect();
    println!(
        "soak: {:?}, seed {}, {} s, step {step}, offsets {offsets:?}, {}",
        options.shape,
        options.seed,
        options.seconds,
        if options.network.namespaces {
            "nodes in network namespaces (partitions on)"
        } else {
            "nodes on 127.0.0.1 (no network namespaces: partitions skipped)"
        }
    );
    let lease_config = holders::module_config(options.control_lease_fence);
    let (nodes, topology, keys, follow_topology): (
        Nodes,
        Box<dyn Topology>,
        Vec<String>,
        FollowTopology,
    ) = match options.shape {
        Shape::Sentinel => {
            let offsets = [offsets[0], offsets[1], offsets[2]];
            let (nodes, topology) = sentinel_topology::start(
                &options.network,
                &options.run_dir,
                step,
                offsets,
                &lease_config,
            )?;
            let urls = topology.sentinels.urls();
            let follow: FollowTopology = Box::new(move || {
                idgen_client::Topology::sentinel(
                    deployment::MASTER_NAME,
                    urls.iter().map(String::as_str),
                )
                .map(Into::into)
            });
            let keys = (0..4).map(|i| format!("soak:{i}")).collect();
            (nodes, Box::new(topology) as Box<dyn Topology>, keys, follow)
        }
        Shape::Cluster => {
            let guard = if options.control_identity_warn {
                "idgen.identity-conflicts warn\n"
            } else {
                ""
            };
            let (nodes, topology) = cluster_topology::start(
                &options.network,
                &options.run_dir,
                step,
                &offsets,
                &format!("{guard}{lease_config}"),
            )?;
            let urls: Vec<String> = nodes.iter().map(|n| n.lock().unwrap().url()).collect();
            let follow: FollowTopology =
                Box::new(move || idgen_client::Topology::cluster(urls.iter().map(String::as_str)));
            (
                nodes,
                Box::new(topology) as Box<dyn Topology>,
                cluster_topology::keys(),
                follow,
            )
        }
    };
    let node_urls: Vec<String> = nodes.iter().map(|n| n.lock().unwrap().url()).collect();
    let holders: holders::Holders = (0..options.holders)
        .map(|i| {
            Mutex::new(holders::Holder::new(
                &options.network,
                i,
                &options.run_dir,
                node_urls.clone(),
            ))
        })
        .collect();
    for holder in &holders {
        holder.lock().unwrap().start()?;
    }
    println!(
        "soak: deployment up, clients and {} leased-generator holders starting \
         (lease-workers {}, lease-max-ms {}{})",
        holders.len(),
        holders::LEASE_WORKERS,
        holders::LEASE_MAX_MS,
        if options.control_lease_fence {
            ", lease fence OFF"
        } else {
            ""
        }
    );
    let start = Instant::now();
    let start_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let shared = clients::Shared {
        start,
        stop: Arc::new(AtomicBool::new(false)),
        keys: Arc::new(keys),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let follow_topology = Arc::new(follow_topology);
    let mut tasks = Vec::new();
    for i in 0..3u64 {
        let topology = follow_topology.clone();
        tasks.push(runtime.spawn(clients::follow(
            format!("follow-{i}"),
            move || topology(),
            shared.clone(),
            options.seed ^ ((i + 1) * 0x1000),
        )));
    }
    for node in &nodes {
        let node = node.lock().unwrap();
        tasks.push(runtime.spawn(clients::pinned(
            format!("pinned-{}", node.label),
            node.label.clone(),
            node.url(),
            shared.clone(),
            options.seed ^ ((node.index as u64 + 1) * 0x10_0000),
        )));
    }
    let nemesis = Nemesis {
        nodes: &nodes,
        network: &options.network,
        topology: topology.as_ref(),
        holders: &holders,
        start,
        log: Mutex::new(Vec::new()),
        applied: Mutex::new(Vec::new()),
    };
    let kinds = if options.control_identity_warn {
        vec![FaultKind::IdentityMistake]
    } else if options.control_lease_fence {
        vec![FaultKind::LostGrant]
    } else {
        schedule::kinds(
            options.shape == Shape::Cluster,
            options.network.namespaces,
            !holders.is_empty(),
        )
    };
    let mut plan = schedule::plan(options.seed, 100_000, &kinds);
    if options.control_lease_fence {
        // Lost grants only, each with a few seconds for both holders to issue.
        for fault in plan.iter_mut().flat_map(|step| step.faults.iter_mut()) {
            fault.kind = FaultKind::LostGrant;
            fault.hold_ms = fault.hold_ms.max(3_000);
        }
        for step in &mut plan {
            step.faults.truncate(1);
        }
    }
    if options.control_identity_warn {
        // Shared offsets only: the mistake that repeats IDs most surely once unguarded.
        for fault in plan.iter_mut().flat_map(|step| step.faults.iter_mut()) {
            fault.amount = 0;
        }
    }
    if options.control_shared_offset && options.shape == Shape::Sentinel {
        // The second step is always a replica promoted by hand: two masters on one offset for
        // seconds, which repeats IDs surely. A split brain after a paused master alone may
        // end before both masters answer (a CI run found no duplicate that way).
        if let Some(step) = plan.get_mut(1) {
            step.faults[0].kind = FaultKind::PromoteByHand;
            step.faults[0].hold_ms = 4_000;
        }
    }
    let nemesis_stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| nemesis.run(&plan, &nemesis_stop));
        std::thread::sleep(Duration::from_secs(options.seconds));
        nemesis_stop.store(true, Ordering::Relaxed);
    });
    // The last step has healed: a few seconds of traffic on the whole deployment.
    std::thread::sleep(Duration::from_secs(2));
    // Every holder issues again after the last fault (a fence lasts 4.5 s at most).
    let stalled = holders::stalled(&holders, Duration::from_secs(20));
    shared.stop.store(true, Ordering::Relaxed);
    for holder in &holders {
        holder.lock().unwrap().stop();
    }
    let duration_ms = start.elapsed().as_millis() as u64;
    let mut history = History::default();
    for task in tasks {
        history.merge(runtime.block_on(task).map_err(|e| e.to_string())?);
    }
    drop(runtime);
    let checked = checker::Deployment {
        step,
        sequence_bits: 12,
        offsets: nodes
            .iter()
            .map(|n| {
                let n = n.lock().unwrap();
                (n.label.clone(), n.offset)
            })
            .collect::<BTreeMap<_, _>>(),
    };
    let mut verdict = checker::check(&history, &checked, duration_ms);
    let generations: Vec<holders::Generation> = holders
        .iter()
        .flat_map(|h| h.lock().unwrap().collect())
        .collect();
    let holder_ids: Vec<&[u64]> = generations.iter().map(|g| g.ids.as_slice()).collect();
    checker::check_leased(
        &history,
        &holder_ids,
        &checked,
        (1 << 10) - holders::LEASE_WORKERS,
        &mut verdict,
    );
    let log = nemesis.log.into_inner().unwrap();
    let applied = nemesis.applied.into_inner().unwrap();
    if let Some(summary) = topology.summary() {
        println!("soak: {summary}");
    }
    drop(holders);
    drop(topology);
    drop(nodes);
    Ok(report::report(
        options,
        &history,
        &verdict,
        &report::Leased {
            generations: &generations,
            start_unix_ms,
            stalled: &stalled,
        },
        &log,
        &applied,
        duration_ms,
    ))
}
