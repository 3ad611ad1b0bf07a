//! Property test of the lease window rules: whatever the sequence of grants, renewals,
//! releases, expiries, clock steps (forward, and back or forth within the drift
//! allowance: two nodes' clocks, or one node's clock over time, differ by at most that) and
//! crashes or failovers that lose the last writes, no two holders of one worker id ever
//! have overlapping windows — across two pools on one instance too.

use idgen_core::{LeaseError, LeaseFences, LeasePool, LeaseRules, Window};
use proptest::prelude::*;

const RULES: LeaseRules = LeaseRules {
    max_units: 60,
    allowance_units: 8,
};
const WORKERS: [u64; 3] = [1021, 1022, 1023];

#[derive(Debug, Clone)]
enum Step {
    Acquire {
        pool: usize,
        duration: u64,
    },
    Renew {
        grant: usize,
        duration: u64,
    },
    Release {
        grant: usize,
    },
    /// Real time passes.
    Clock {
        delta: u64,
    },
    /// The node's clock steps to `skew` from real time (half the allowance either way).
    Skew {
        skew: i64,
    },
    /// The instance restarts, or a replica is promoted, having lost the last `lose` writes;
    /// the new node's clock differs by `skew` (within the allowance).
    Crash {
        lose: usize,
        skew: i64,
    },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0usize..2, 1u64..=60).prop_map(|(pool, duration)| Step::Acquire { pool, duration }),
        4 => (0usize..64, 1u64..=60).prop_map(|(grant, duration)| Step::Renew { grant, duration }),
        1 => (0usize..64).prop_map(|grant| Step::Release { grant }),
        4 => prop_oneof![4 => 0u64..30, 1 => 30u64..200].prop_map(|delta| Step::Clock { delta }),
        1 => (-4i64..=4).prop_map(|skew| Step::Skew { skew }),
        1 => (0usize..4, -4i64..=4).prop_map(|(lose, skew)| Step::Crash { lose, skew }),
    ];
    prop::collection::vec(step, 1..200)
}

/// A holder's grant as the holder knows it: what it was told, ever (renewals included,
/// even those the server later lost).
struct Held {
    pool: usize,
    worker: u64,
    holder: Vec<u8>,
    window: Window,
}

fn shift(now: u64, delta: i64) -> u64 {
    now.saturating_add_signed(delta).max(1)
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut real: u64 = 10_000;
    let mut skew: i64 = 0;
    let mut pools = [LeasePool::new(), LeasePool::new()];
    let mut fences = LeaseFences::new();
    // Pool states after each write, newest last: what a crash can fall back to.
    let mut history: Vec<[LeasePool; 2]> = vec![pools.clone()];
    let mut held: Vec<Held> = Vec::new();
    for step in steps {
        let now = shift(real, skew);
        match *step {
            Step::Acquire { pool, duration } => {
                let holder = format!("h{}", held.len()).into_bytes();
                match pools[pool].acquire(&mut fences, RULES, &holder, now, duration, WORKERS) {
                    Ok(grant) => {
                        prop_assert!(grant.window.start >= now);
                        prop_assert!(grant.window.end < now + RULES.max_units);
                        prop_assert!(grant.window.start <= grant.window.end);
                        held.push(Held {
                            pool,
                            worker: grant.worker,
                            holder,
                            window: grant.window,
                        });
                        history.push(pools.clone());
                    }
                    Err(LeaseError::Exhausted { retry_at, .. }) => {
                        prop_assert!(retry_at > now, "retry_at {retry_at} now {now}");
                    }
                    Err(other) => prop_assert!(false, "{other}"),
                }
            }
            Step::Renew { grant, duration } => {
                let Some(h) = held.get_mut(grant) else {
                    continue;
                };
                let before = pools[h.pool].clone();
                match pools[h.pool].renew(&mut fences, RULES, h.worker, &h.holder, now, duration) {
                    Ok(renewed) => {
                        prop_assert_eq!(renewed.window.start, h.window.start);
                        prop_assert!(renewed.window.end >= h.window.end);
                        // Extended ends are below now + max (an end may stay where it was
                        // when the clock stepped back).
                        prop_assert!(
                            renewed.window.end < now + RULES.max_units
                                || renewed.window.end == h.window.end
                        );
                        h.window = renewed.window;
                        history.push(pools.clone());
                    }
                    Err(_) => {
                        prop_assert_eq!(&pools[h.pool], &before, "a refusal changed the pool")
                    }
                }
            }
            Step::Release { grant } => {
                let Some(h) = held.get(grant) else { continue };
                if pools[h.pool].release(h.worker, &h.holder).is_ok() {
                    history.push(pools.clone());
                }
            }
            Step::Clock { delta } => real += delta,
            Step::Skew { skew: new } => skew = new,
            Step::Crash { lose, skew: new } => {
                skew = new;
                let now = shift(real, skew);
                let keep = history.len().saturating_sub(lose).max(1);
                history.truncate(keep);
                pools = history[keep - 1].clone();
                // The new node learns the pools from the data, then fences.
                fences = LeaseFences::new();
                for pool in &mut pools {
                    for lease in pool.leases().cloned().collect::<Vec<_>>() {
                        pool.put(lease, &mut fences);
                    }
                }
                fences.fence_all(RULES, now);
            }
        }
        for (i, a) in held.iter().enumerate() {
            for b in &held[i + 1..] {
                prop_assert!(
                    a.worker != b.worker || !a.window.overlaps(&b.window),
                    "worker {} held twice at once: {:?} and {:?}",
                    a.worker,
                    a.window,
                    b.window
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn windows_of_one_worker_id_never_overlap(steps in steps()) {
        run(&steps)?;
    }
}

/// The control: without the fence after a crash, a lost grant is granted again.
#[test]
fn without_the_fence_a_lost_grant_overlaps() {
    let mut pool = LeasePool::new();
    let mut fences = LeaseFences::new();
    let lost = pool
        .acquire(&mut fences, RULES, b"a", 100, 60, [7])
        .unwrap();
    // The grant is lost with the crash: the pool is back to empty, and no fence is applied.
    let mut pool = LeasePool::new();
    let mut fences = LeaseFences::new();
    let again = pool
        .acquire(&mut fences, RULES, b"b", 101, 60, [7])
        .unwrap();
    assert!(lost.window.overlaps(&again.window));
    // With it, a grant waits until half the window fits after the fence (101 + 60 + 8).
    let mut fenced = LeaseFences::new();
    fenced.fence_all(RULES, 101);
    let after = LeasePool::new()
        .acquire(&mut fenced, RULES, b"b", 140, 60, [7])
        .unwrap();
    assert!(!lost.window.overlaps(&after.window));
}
