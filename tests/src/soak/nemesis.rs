//! Applies the plan's faults to the running deployment, heals it after each step, and logs
//! what it did and when.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::deployment::{Network, Nodes};
use super::holders::Holders;
use super::schedule::{Fault, FaultKind, Step};

/// What the nemesis needs to know about the topology: who is a master, how to fail over,
/// when the deployment is whole again.
pub trait Topology: Sync {
    /// The index of a master (among several, chosen by `pick`), if one can be found.
    fn master(&self, nodes: &Nodes, pick: u64) -> Option<usize>;
    /// Asks for a failover; what happened, for the log.
    fn failover(&self, nodes: &Nodes, pick: u64) -> String;
    /// Moves a slot (Cluster); what happened, for the log.
    fn move_slot(&self, _nodes: &Nodes, _pick: u64) -> String {
        "skipped: not a cluster".into()
    }
    /// Whether the deployment is whole: one master per shard, answering.
    fn healed(&self, nodes: &Nodes) -> bool;
    /// A line for the soak's summary (Cluster: how the slot moves were made and ended).
    fn summary(&self) -> Option<String> {
        None
    }
}

/// A line of the fault log: when (ms since the start) and what.
pub type LogLine = (u64, String);

/// The nemesis.
pub struct Nemesis<'a> {
    /// The nodes.
    pub nodes: &'a Nodes,
    /// Where they run.
    pub network: &'a Network,
    /// The topology's own operations.
    pub topology: &'a dyn Topology,
    /// The leased-generator holders (none when the soak runs without).
    pub holders: &'a Holders,
    /// When the soak started.
    pub start: Instant,
    /// Everything done, in order.
    pub log: Mutex<Vec<LogLine>>,
    /// Faults applied.
    pub applied: Mutex<Vec<FaultKind>>,
}

impl Nemesis<'_> {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Logs a line (and prints it).
    pub fn note(&self, text: String) {
        let at = self.now_ms();
        println!("[{:7.1} s] {text}", at as f64 / 1000.0);
        self.log.lock().unwrap().push((at, text));
    }

    /// Runs the plan's steps until `stop` is set or the plan runs out.
    pub fn run(&self, plan: &[Step], stop: &AtomicBool) {
        for step in plan {
            if sleep_unless(stop, Duration::from_millis(step.pause_ms)) {
                return;
            }
            std::thread::scope(|scope| {
                for fault in &step.faults {
                    scope.spawn(move || self.apply(fault));
                }
            });
            self.heal();
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    fn apply(&self, fault: &Fault) {
        self.applied.lock().unwrap().push(fault.kind);
        let n = self.nodes.len();
        let hold = Duration::from_millis(fault.hold_ms);
        let any = (fault.pick % n as u64) as usize;
        let name = fault.kind.name();
        match fault.kind {
            FaultKind::KillMaster => {
                let Some(m) = self.topology.master(self.nodes, fault.pick) else {
                    return self.note(format!("{name}: no master found, skipped"));
                };
                let tail = self.nodes[m].lock().unwrap().aof_tail();
                std::thread::sleep(Duration::from_millis(100 + fault.pick % 800));
                let label = {
                    let mut node = self.nodes[m].lock().unwrap();
                    node.kill();
                    node.label.clone()
                };
                let mut cut = String::new();
                if fault.amount == 1 {
                    if let Some((file, size)) = tail {
                        let now = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                        let same_file = self.nodes[m]
                            .lock()
                            .unwrap()
                            .aof_tail()
                            .is_some_and(|(newest, _)| newest == file);
                        if same_file && now > size {
                            let truncated = std::fs::OpenOptions::new()
                                .write(true)
                                .open(&file)
                                .and_then(|f| f.set_len(size));
                            cut = match truncated {
                                Ok(()) => format!(", AOF cut back by {} bytes", now - size),
                                Err(e) => format!(", AOF not cut: {e}"),
                            };
                        } else {
                            cut = ", AOF not cut (nothing written since, or rewritten)".into();
                        }
                    }
                }
                self.note(format!("{name} {label} (SIGKILL{cut})"));
                std::thread::sleep(hold);
                let result = self.nodes[m].lock().unwrap().start();
                self.note(format!("{name} {label}: restarted from its AOF {result:?}"));
            }
            FaultKind::PauseMaster => {
                let Some(m) = self.topology.master(self.nodes, fault.pick) else {
                    return self.note(format!("{name}: no master found, skipped"));
                };
                let label = self.label(m);
                self.nodes[m].lock().unwrap().signal(libc::SIGSTOP);
                self.note(format!("{name} {label} (SIGSTOP for {} ms)", fault.hold_ms));
                std::thread::sleep(hold);
                self.nodes[m].lock().unwrap().signal(libc::SIGCONT);
                self.note(format!("{name} {label}: SIGCONT"));
            }
            FaultKind::Partition => {
                if !self.network.namespaces {
                    return self.note(format!("{name}: skipped, no network namespaces"));
                }
                let target = if fault.pick & 1 == 0 {
                    self.topology.master(self.nodes, fault.pick >> 1)
                } else {
                    None
                }
                .unwrap_or(any);
                let label = self.label(target);
                let result = self.network.set_link(target, false);
                self.note(format!(
                    "{name} {label} cut off for {} ms {result:?}",
                    fault.hold_ms
                ));
                std::thread::sleep(hold);
                let result = self.network.set_link(target, true);
                self.note(format!("{name} {label}: link up again {result:?}"));
            }
            FaultKind::ClockStep => {
                let label = self.label(any);
                let result = self.set_clock(any, fault.amount);
                self.note(format!(
                    "{name} {label} by {:+} ms for {} ms {result:?}",
                    fault.amount, fault.hold_ms
                ));
                std::thread::sleep(hold);
                let result = self.set_clock(any, 0);
                self.note(format!("{name} {label}: clock back {result:?}"));
            }
            FaultKind::Failover => {
                let result = self.topology.failover(self.nodes, fault.pick);
                self.note(format!("{name}: {result}"));
            }
            FaultKind::RestartReplica => {
                let target = (0..n)
                    .map(|i| (any + i) % n)
                    .find(|&i| self.nodes[i].lock().unwrap().role().as_deref() == Some("slave"));
                let Some(r) = target else {
                    return self.note(format!("{name}: no replica found, skipped"));
                };
                let label = self.label(r);
                self.nodes[r].lock().unwrap().kill();
                self.note(format!("{name} {label} (SIGKILL)"));
                std::thread::sleep(hold);
                let result = self.nodes[r].lock().unwrap().start();
                self.note(format!("{name} {label}: restarted {result:?}"));
            }
            FaultKind::DebugReload => {
                let label = self.label(any);
                let result = self.command(any, &["DEBUG", "RELOAD"]);
                self.note(format!("{name} {label} {result:?}"));
            }
            FaultKind::RewriteAof => {
                let label = self.label(any);
                let result = self.command(any, &["BGREWRITEAOF"]);
                self.note(format!("{name} {label} {result:?}"));
            }
            FaultKind::IdentityMistake => {
                let Some(m) = self.topology.master(self.nodes, fault.pick) else {
                    return self.note(format!("{name}: no master found, skipped"));
                };
                let other_master = (1..8u64)
                    .filter_map(|i| self.topology.master(self.nodes, (fault.pick >> 8) + i))
                    .find(|&other| other != m);
                let mistake = match (fault.amount, other_master) {
                    // Another master's offset, as a copied configuration file gives it.
                    (0, Some(other)) => {
                        format!("offset {}", self.nodes[other].lock().unwrap().offset)
                    }
                    (0, None) => return self.note(format!("{name}: no other master, skipped")),
                    _ => "step 6".to_string(),
                };
                let label = self.label(m);
                // Half the shared-offset mistakes come with a one-way link: the node whose
                // offset was copied cannot reach the mistaken one, which must learn the
                // verdict from the others.
                let one_way = match other_master {
                    Some(other)
                        if fault.amount == 0
                            && self.network.namespaces
                            && (fault.pick >> 16) & 1 == 1 =>
                    {
                        let port = self.nodes[m].lock().unwrap().port;
                        let cut = self.network.set_one_way_cut(other, m, port, true);
                        self.note(format!(
                            "{name}: {} cannot reach {label}'s bus (one way) {cut:?}",
                            self.label(other)
                        ));
                        Some(other)
                    }
                    _ => None,
                };
                let result = {
                    let mut node = self.nodes[m].lock().unwrap();
                    node.kill();
                    node.set_mistake(Some(mistake.clone()));
                    node.start()
                };
                self.note(format!(
                    "{name} {label}: restarted with {mistake} {result:?}"
                ));
                if one_way.is_some() {
                    // Past the 5 s a start waits to hear every node: the mistaken node now
                    // refuses on the verdict the other nodes relay, or not at all.
                    std::thread::sleep(Duration::from_millis(6_500));
                    let node = self.nodes[m].lock().unwrap();
                    let standing = node.info("idgen", "idgen_identity_standing");
                    let why = node.info("idgen", "idgen_identity_refusal");
                    drop(node);
                    self.note(format!("{name} {label}: {standing:?}, {why:?}"));
                }
                std::thread::sleep(hold);
                let result = {
                    let mut node = self.nodes[m].lock().unwrap();
                    node.kill();
                    node.set_mistake(None);
                    node.start()
                };
                self.note(format!(
                    "{name} {label}: restarted with its own settings {result:?}"
                ));
                if let Some(other) = one_way {
                    let port = self.nodes[m].lock().unwrap().port;
                    let restored = self.network.set_one_way_cut(other, m, port, false);
                    self.note(format!("{name}: one-way cut restored {restored:?}"));
                }
            }
            FaultKind::PromoteByHand => {
                let Some(m) = self.topology.master(self.nodes, fault.pick) else {
                    return self.note(format!("{name}: no master found, skipped"));
                };
                let target = (0..n).map(|i| (any + i) % n).find(|&i| {
                    i != m && self.nodes[i].lock().unwrap().role().as_deref() == Some("slave")
                });
                let Some(r) = target else {
                    return self.note(format!("{name}: no replica found, skipped"));
                };
                let label = self.label(r);
                let result = self.command(r, &["REPLICAOF", "NO", "ONE"]);
                self.note(format!(
                    "{name} {label} (REPLICAOF NO ONE for {} ms) {result:?}",
                    fault.hold_ms
                ));
                std::thread::sleep(hold);
                // Back under whichever node is the master now (Sentinel may have moved it).
                let master = self.topology.master(self.nodes, fault.pick).unwrap_or(m);
                let (host, port) = {
                    let node = self.nodes[master].lock().unwrap();
                    (node.host.clone(), node.port.to_string())
                };
                let result = if master == r {
                    Ok(())
                } else {
                    self.command(r, &["REPLICAOF", &host, &port])
                };
                self.note(format!(
                    "{name} {label}: a replica of {} again {result:?}",
                    self.label(master)
                ));
            }
            FaultKind::MoveSlot => {
                let result = self.topology.move_slot(self.nodes, fault.pick);
                self.note(format!("{name}: {result}"));
            }
            FaultKind::HolderStop
            | FaultKind::HolderClockStep
            | FaultKind::HolderPartition
            | FaultKind::HolderRestart => self.apply_to_holder(fault),
            FaultKind::LostGrant => self.lose_a_grant(fault),
        }
    }

    fn apply_to_holder(&self, fault: &Fault) {
        let name = fault.kind.name();
        if self.holders.is_empty() {
            return self.note(format!("{name}: skipped, no holders"));
        }
        let h = (fault.pick % self.holders.len() as u64) as usize;
        let holder = &self.holders[h];
        let label = holder.lock().unwrap().label.clone();
        let worker = holder.lock().unwrap().worker();
        let hold = Duration::from_millis(fault.hold_ms);
        match fault.kind {
            FaultKind::HolderStop => {
                holder.lock().unwrap().signal(libc::SIGSTOP);
                self.note(format!(
                    "{name} {label} (worker {worker:?}; SIGSTOP for {} ms)",
                    fault.hold_ms
                ));
                std::thread::sleep(hold);
                holder.lock().unwrap().signal(libc::SIGCONT);
                self.note(format!("{name} {label}: SIGCONT"));
            }
            FaultKind::HolderClockStep => {
                let result = holder.lock().unwrap().step_clock(fault.amount);
                self.note(format!(
                    "{name} {label} (worker {worker:?}) by {:+} ms, offset now {result:?}",
                    fault.amount
                ));
                std::thread::sleep(hold);
            }
            FaultKind::HolderPartition => {
                if !self.network.namespaces {
                    return self.note(format!("{name}: skipped, no network namespaces"));
                }
                let result = self.network.set_holder_link(h, false);
                self.note(format!(
                    "{name} {label} (worker {worker:?}) cut off for {} ms {result:?}",
                    fault.hold_ms
                ));
                std::thread::sleep(hold);
                let result = self.network.set_holder_link(h, true);
                self.note(format!("{name} {label}: link up again {result:?}"));
            }
            _ => {
                holder.lock().unwrap().kill();
                self.note(format!("{name} {label} (worker {worker:?}; SIGKILL)"));
                std::thread::sleep(hold);
                let result = holder.lock().unwrap().start();
                self.note(format!("{name} {label}: started again {result:?}"));
            }
        }
    }

    /// A grant the master lost: see [`FaultKind::LostGrant`].
    fn lose_a_grant(&self, fault: &Fault) {
        let name = fault.kind.name();
        if self.holders.len() < 2 {
            return self.note(format!("{name}: skipped, fewer than two holders"));
        }
        let Some(m) = self.topology.master(self.nodes, fault.pick) else {
            return self.note(format!("{name}: no master found, skipped"));
        };
        let master = self.label(m);
        let Some((file, size)) = self.nodes[m].lock().unwrap().aof_tail() else {
            return self.note(format!("{name}: {master} has no AOF, skipped"));
        };
        let a = (fault.pick % self.holders.len() as u64) as usize;
        let b = (a + 1) % self.holders.len();
        let (label_a, label_b) = (
            self.holders[a].lock().unwrap().label.clone(),
            self.holders[b].lock().unwrap().label.clone(),
        );
        // The grant to lose: a restarted holder's first lease.
        let started = {
            let mut holder = self.holders[a].lock().unwrap();
            holder.kill();
            holder.start()
        };
        let worker_a = self.holders[a]
            .lock()
            .unwrap()
            .wait_for_lease(None, Duration::from_secs(10));
        self.note(format!(
            "{name}: {label_a} restarted {started:?}, leased worker {worker_a:?} from {master}"
        ));
        // The master dies and comes back at once (before Sentinel acts) without the grant.
        let cut = {
            let mut node = self.nodes[m].lock().unwrap();
            node.kill();
            let now = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            let same_file = node.aof_tail().is_some_and(|(newest, _)| newest == file);
            let cut = if same_file && now > size {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .and_then(|f| f.set_len(size))
                    .map(|()| now - size)
                    .map_err(|e| e.to_string())
            } else {
                Err("nothing written since, or rewritten".to_string())
            };
            let restarted = node.start();
            (cut, restarted)
        };
        self.note(format!(
            "{name}: {master} SIGKILL, AOF cut back by {:?} bytes, restarted {:?}",
            cut.0, cut.1
        ));
        // Another holder asks for a lease now, while the first still issues under its own.
        let started = {
            let mut holder = self.holders[b].lock().unwrap();
            holder.kill();
            holder.start()
        };
        let worker_b = self.holders[b]
            .lock()
            .unwrap()
            .wait_for_lease(None, Duration::from_secs(10));
        self.note(format!(
            "{name}: {label_b} restarted {started:?}, leased worker {worker_b:?} \
             ({label_a} holds {worker_a:?})"
        ));
        std::thread::sleep(Duration::from_millis(fault.hold_ms));
    }

    fn label(&self, index: usize) -> String {
        self.nodes[index].lock().unwrap().label.clone()
    }

    fn command(&self, index: usize, args: &[&str]) -> Result<(), String> {
        let mut conn = self.nodes[index]
            .lock()
            .unwrap()
            .conn()
            .map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        redis::cmd(args[0])
            .arg(&args[1..])
            .query::<redis::Value>(&mut conn)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Sets the module's test clock offset (`idgen.debug-clock-offset-ms`) on one node.
    fn set_clock(&self, index: usize, offset_ms: i64) -> Result<(), String> {
        let offset = offset_ms.to_string();
        self.command(
            index,
            &["CONFIG", "SET", "idgen.debug-clock-offset-ms", &offset],
        )
    }

    /// Undoes what a fault may have left: every process continued and running, every link
    /// up, every clock back; then waits (up to 60 s) until the topology is whole.
    pub fn heal(&self) {
        for index in 0..self.nodes.len() {
            let restarted = {
                let mut node = self.nodes[index].lock().unwrap();
                node.signal(libc::SIGCONT);
                if node.running() {
                    None
                } else {
                    Some(node.start())
                }
            };
            if let Some(result) = restarted {
                self.note(format!("heal: {} started {result:?}", self.label(index)));
            }
            if self.network.namespaces {
                let _ = self.network.set_link(index, true);
            }
            let _ = self.set_clock(index, 0);
        }
        for (index, holder) in self.holders.iter().enumerate() {
            let mut holder = holder.lock().unwrap();
            holder.signal(libc::SIGCONT);
            if self.network.namespaces {
                let _ = self.network.set_holder_link(index, true);
            }
            if !holder.running() {
                let result = holder.start();
                let label = holder.label.clone();
                drop(holder);
                self.note(format!("heal: {label} started {result:?}"));
            }
        }
        let started = Instant::now();
        while !self.topology.healed(self.nodes) {
            if started.elapsed() > Duration::from_secs(60) {
                return self.note("heal: the deployment is not whole after 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Sleeps up to `duration`; true if `stop` was set meanwhile.
pub fn sleep_unless(stop: &AtomicBool, duration: Duration) -> bool {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    stop.load(Ordering::Relaxed)
}
