//! The nemesis's seeded plan: which faults, in which order, with which parameters. The same
//! seed gives the same plan; what the deployment does under it depends on timing.

/// A small seeded generator (SplitMix64): the plan must not depend on a crate's version.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[low, high]`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// True with probability one half.
    pub fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
}

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// SIGKILL the master; restart it from its AOF after a pause, half the time after
    /// cutting the AOF back to its size up to a second before the kill (a power loss
    /// under `appendfsync everysec`).
    KillMaster,
    /// SIGSTOP the master for longer than the failover takes, then SIGCONT: it wakes up
    /// believing it is the master (a split brain until Sentinel demotes it).
    PauseMaster,
    /// Cut one node off the network (its link down), then restore it.
    Partition,
    /// Step one node's clock (the module's `idgen.debug-clock-offset-ms`) by ±1 s…1 h,
    /// then back.
    ClockStep,
    /// `SENTINEL FAILOVER` (Sentinel) or `CLUSTER FAILOVER` on a replica (Cluster).
    Failover,
    /// SIGKILL a replica and start it again.
    RestartReplica,
    /// `DEBUG RELOAD` on one node.
    DebugReload,
    /// `BGREWRITEAOF` on one node.
    RewriteAof,
    /// Cluster only: move a slot holding soak keys to another master under load, with
    /// MIGRATE or (half the time, on servers that have one) the server's own atomic slot
    /// migration.
    MoveSlot,
    /// Cluster only: an operator's mistake — a master restarted with another master's offset
    /// (or, half the time, with another step), and later restarted with its own again.
    IdentityMistake,
    /// Sentinel only: an operator's mistake — `REPLICAOF NO ONE` on a replica behind
    /// Sentinel's back, so two masters answer until the operator points it back at the
    /// master.
    PromoteByHand,
    /// SIGSTOP of a leased-generator holder for longer than its window, then SIGCONT: it
    /// must issue nothing under the old window when it wakes.
    HolderStop,
    /// A holder's clock (the monotonic clock its generator reads) jumps ahead by 1 s…1 min
    /// (as a paused VM's does), or half the time back by 1–5 s (which a monotonic clock
    /// never does; the generator must still stay inside its window). Not undone: undoing a
    /// jump ahead would be a jump back of up to a minute, which stalls the holder that long
    /// (`leased_generator.rs` checks a minute back with real processes).
    HolderClockStep,
    /// A holder's link taken down for longer than its window, then up.
    HolderPartition,
    /// SIGKILL of a holder, started again 0.2–2 s later (a new process, a new lease).
    HolderRestart,
    /// Sentinel with holders: a lease grant lost — a holder restarted (it acquires a worker
    /// id), the master killed with its AOF cut back to before that grant and restarted at
    /// once, then another holder restarted (it would get the same worker id, while the first
    /// still issues under it, if the restart fence did not hold grants back).
    LostGrant,
}

impl FaultKind {
    /// Whether the fault is aimed at leased-generator holders (drawn on its own, next to
    /// the step's other faults).
    pub fn on_holders(self) -> bool {
        matches!(
            self,
            FaultKind::HolderStop
                | FaultKind::HolderClockStep
                | FaultKind::HolderPartition
                | FaultKind::HolderRestart
                | FaultKind::LostGrant
        )
    }

    /// The kind's name in the output and the docs.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillMaster => "kill-master",
            FaultKind::PauseMaster => "pause-master",
            FaultKind::Partition => "partition",
            FaultKind::ClockStep => "clock-step",
            FaultKind::Failover => "failover",
            FaultKind::RestartReplica => "restart-replica",
            FaultKind::DebugReload => "debug-reload",
            FaultKind::RewriteAof => "bgrewriteaof",
            FaultKind::MoveSlot => "move-slot",
            FaultKind::IdentityMistake => "identity-mistake",
            FaultKind::PromoteByHand => "promote-by-hand",
            FaultKind::HolderStop => "holder-stop",
            FaultKind::HolderClockStep => "holder-clock-step",
            FaultKind::HolderPartition => "holder-partition",
            FaultKind::HolderRestart => "holder-restart",
            FaultKind::LostGrant => "lost-grant",
        }
    }
}

/// The kinds of fault a topology gets (`holders`: leased-generator holders run too).
pub fn kinds(cluster: bool, partitions: bool, holders: bool) -> Vec<FaultKind> {
    use FaultKind::*;
    let mut kinds = vec![
        KillMaster,
        PauseMaster,
        ClockStep,
        Failover,
        RestartReplica,
        DebugReload,
        RewriteAof,
    ];
    if partitions {
        kinds.push(Partition);
    }
    if cluster {
        kinds.push(MoveSlot);
        kinds.push(IdentityMistake);
    } else {
        // REPLICAOF is refused in cluster mode.
        kinds.push(PromoteByHand);
    }
    if holders {
        kinds.extend([HolderStop, HolderClockStep, HolderRestart]);
        if partitions {
            kinds.push(HolderPartition);
        }
        if !cluster {
            kinds.push(LostGrant);
        }
    }
    kinds
}

/// One step of the plan: one fault, or two at once.
#[derive(Debug, Clone)]
pub struct Step {
    /// Pause before this step, after the previous one healed.
    pub pause_ms: u64,
    /// The faults, applied together.
    pub faults: Vec<Fault>,
}

/// One fault with its drawn parameters.
#[derive(Debug, Clone)]
pub struct Fault {
    /// What to do.
    pub kind: FaultKind,
    /// Chooses the node (among those the kind applies to) and other choices.
    pub pick: u64,
    /// How long the fault lasts (kill → restart, stop → continue, cut → restore, clock
    /// step → back), in ms.
    pub hold_ms: u64,
    /// For clock steps, the step in ms (±1 s…1 h); for kills, whether to cut the AOF back;
    /// for identity mistakes, 0 for another master's offset, 1 for another step.
    pub amount: i64,
}

/// The plan for `seed`: `count` steps, about one in five two faults at once, and, when the
/// kinds include faults on holders, half the steps one of those besides. The first step is
/// always a paused master (if the kinds include it): every run, however short, has at least
/// one split brain, where two nodes both believe they are the master.
pub fn plan(seed: u64, count: usize, kinds: &[FaultKind]) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let (on_holders, others): (Vec<FaultKind>, Vec<FaultKind>) =
        kinds.iter().partition(|kind| kind.on_holders());
    let (main, besides) = if others.is_empty() {
        (on_holders, Vec::new())
    } else {
        (others, on_holders)
    };
    (0..count)
        .map(|index| {
            let together = if rng.between(0, 4) == 0 { 2 } else { 1 };
            let mut faults: Vec<Fault> = (0..together).map(|_| fault(&mut rng, &main)).collect();
            if !besides.is_empty() && rng.coin() {
                let on_holders = fault(&mut rng, &besides);
                if on_holders.kind == FaultKind::LostGrant {
                    // Alone: it kills and restarts the master at once, and a second kill with
                    // its AOF cut within the same second (a crash loop inside the fsync
                    // window) would lose the restart's own fence writes.
                    faults.clear();
                }
                faults.push(on_holders);
            }
            if index == 0 && kinds.contains(&FaultKind::PauseMaster) {
                faults[0].kind = FaultKind::PauseMaster;
                faults[0].hold_ms = 2_000 + faults[0].hold_ms % 4_000;
            }
            Step {
                pause_ms: rng.between(1_000, 4_000),
                faults,
            }
        })
        .collect()
}

fn fault(rng: &mut Rng, kinds: &[FaultKind]) -> Fault {
    let kind = kinds[rng.between(0, kinds.len() as u64 - 1) as usize];
    let pick = rng.next_u64();
    let hold_ms = match kind {
        FaultKind::KillMaster
        | FaultKind::PauseMaster
        | FaultKind::Partition
        | FaultKind::IdentityMistake
        | FaultKind::PromoteByHand => rng.between(2_000, 6_000),
        // Past the soak's 2.5 s lease windows.
        FaultKind::HolderStop | FaultKind::HolderPartition => rng.between(3_000, 7_000),
        FaultKind::ClockStep | FaultKind::HolderClockStep | FaultKind::LostGrant => {
            rng.between(2_000, 8_000)
        }
        FaultKind::HolderRestart => rng.between(200, 2_000),
        _ => rng.between(500, 2_000),
    };
    let amount = match kind {
        FaultKind::ClockStep => {
            // Log-uniform between 1 s and 1 h, either way.
            let exponent = rng.between(0, 1000) as f64 / 1000.0;
            let magnitude = (1_000.0 * 3600f64.powf(exponent)) as i64;
            if rng.coin() {
                magnitude
            } else {
                -magnitude
            }
        }
        FaultKind::HolderClockStep => {
            // Ahead: log-uniform between 1 s and 1 min; back: uniform between 1 and 5 s.
            let draw = rng.between(0, 1000);
            if rng.coin() {
                (1_000.0 * 60f64.powf(draw as f64 / 1000.0)) as i64
            } else {
                -(1_000 + 4 * draw as i64)
            }
        }
        FaultKind::KillMaster | FaultKind::IdentityMistake => i64::from(rng.coin()),
        _ => 0,
    };
    Fault {
        kind,
        pick,
        hold_ms,
        amount,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_plan() {
        let kinds = kinds(false, true, true);
        let render = |steps: Vec<Step>| format!("{steps:?}");
        assert_eq!(render(plan(7, 50, &kinds)), render(plan(7, 50, &kinds)));
        assert_ne!(render(plan(7, 50, &kinds)), render(plan(8, 50, &kinds)));
    }

    #[test]
    fn clock_steps_are_between_one_second_and_one_hour_either_way() {
        let steps = plan(3, 2000, &[FaultKind::ClockStep]);
        let amounts: Vec<i64> = steps
            .iter()
            .flat_map(|s| s.faults.iter().map(|f| f.amount))
            .collect();
        assert!(amounts
            .iter()
            .all(|a| (1_000..=3_600_000).contains(&a.abs())));
        assert!(amounts.iter().any(|&a| a < 0) && amounts.iter().any(|&a| a > 0));
        assert!(amounts.iter().any(|&a| a.abs() > 600_000));
    }

    #[test]
    fn every_plan_opens_with_a_split_brain() {
        for seed in 0..50 {
            let first = &plan(seed, 3, &kinds(false, false, true))[0].faults[0];
            assert_eq!(first.kind, FaultKind::PauseMaster);
            assert!((2_000..6_000).contains(&first.hold_ms));
        }
    }

    #[test]
    fn every_kind_is_drawn() {
        for kinds in [kinds(true, true, true), kinds(false, true, true)] {
            let steps = plan(11, 300, &kinds);
            for kind in &kinds {
                assert!(steps
                    .iter()
                    .any(|s| s.faults.iter().any(|f| f.kind == *kind)));
            }
        }
    }

    #[test]
    fn a_lost_grant_is_never_applied_with_another_fault() {
        let steps = plan(9, 2000, &kinds(false, true, true));
        let lost: Vec<&Step> = steps
            .iter()
            .filter(|s| s.faults.iter().any(|f| f.kind == FaultKind::LostGrant))
            .collect();
        assert!(!lost.is_empty());
        assert!(lost.iter().all(|s| s.faults.len() == 1));
    }

    #[test]
    fn holder_faults_come_only_with_holders_and_outlast_a_window() {
        assert!(!kinds(false, true, false).contains(&FaultKind::HolderStop));
        assert!(!kinds(true, true, true).contains(&FaultKind::LostGrant));
        assert!(!kinds(false, false, true).contains(&FaultKind::HolderPartition));
        let steps = plan(
            5,
            2000,
            &[FaultKind::HolderStop, FaultKind::HolderClockStep],
        );
        for fault in steps.iter().flat_map(|s| &s.faults) {
            match fault.kind {
                FaultKind::HolderStop => assert!(fault.hold_ms > 2_500),
                _ => assert!(
                    (1_000..=60_000).contains(&fault.amount)
                        || (-5_000..=-1_000).contains(&fault.amount)
                ),
            }
        }
    }
}
