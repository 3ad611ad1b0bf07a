//! Property test of the write-free rule (`SnowflakeSequence::issue_for_key`): one instance
//! issues for a few keys with random shards and clock moves, and now and then restarts (a
//! new incarnation, every in-memory last ID lost, the floor restored from the recorded
//! bounds) or reloads its data (last IDs lost, same incarnation). Per key, IDs strictly
//! increase; every ID is within its key's recorded bound when answered; no ID repeats; and
//! in a steady stream keys are written about once per lease, not per call. The one-ID fast
//! path (`issue_one_owned`) answers, wherever it answers, exactly as the general rule does,
//! and never while the clock runs past the drift bound.

use std::collections::{HashMap, HashSet};

use idgen_core::{Config, KeyRecord, KeyState, Now, SnowflakeSequence};
use proptest::prelude::*;

const T0: u64 = 1_790_000_000_000;

#[derive(Debug, Clone)]
enum Event {
    Issue {
        key: u8,
        count: u64,
        shard: u64,
        clock_delta_ms: i64,
    },
    Restart {
        clock_delta_ms: u64,
    },
    Reload,
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![
            20 => (0u8..3, prop_oneof![8 => 1u64..4, 1 => 1u64..20_000], prop_oneof![Just(0u64), 0u64..1024], prop_oneof![6 => 0i64..3, 1 => -3000i64..0, 1 => 3i64..3000])
                .prop_map(|(key, count, shard, clock_delta_ms)| Event::Issue { key, count, shard, clock_delta_ms }),
            1 => (1u64..5).prop_map(|clock_delta_ms| Event::Restart { clock_delta_ms }),
            1 => Just(Event::Reload),
        ],
        1..150,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn keys_stay_ordered_and_bounded_across_restarts_and_reloads(events in events()) {
        let config = Config::default();
        let lease = config.snowflake_lease_ms();
        let mut incarnation = 1u64;
        let mut seq = SnowflakeSequence::new(config);
        let (mut wall, mut monotonic) = (T0, 0u64);
        seq.apply_restart_fence(Now { wall_unix_ms: wall, monotonic_ms: monotonic });
        let mut records: HashMap<u8, KeyRecord> = HashMap::new();
        let mut last_issued: HashMap<u8, u64> = HashMap::new();
        let mut last_answered: HashMap<u8, u64> = HashMap::new();
        let mut all = HashSet::new();
        for event in &events {
            match *event {
                Event::Issue { key, count, shard, clock_delta_ms } => {
                    wall = wall.saturating_add_signed(clock_delta_ms);
                    monotonic += clock_delta_ms.max(0) as u64;
                    let state = KeyState {
                        record: records.get(&key).copied(),
                        last_issued: last_issued.get(&key).copied(),
                    };
                    let now = Now { wall_unix_ms: wall, monotonic_ms: monotonic };
                    // The one-ID fast path, tried on a copy: where it answers, the general
                    // rule must give the same ID, no write, and the same state after.
                    let before = seq.clone();
                    let mut fast = seq.clone();
                    let fast_id = (count == 1)
                        .then(|| fast.issue_one_owned(wall, shard, state, incarnation))
                        .flatten();
                    let Ok(issue) = seq.issue_for_key(now, count, shard, state, incarnation, lease) else {
                        prop_assert_eq!(fast_id, None, "the fast path answered a refused call");
                        prop_assert_eq!(&fast, &before);
                        continue;
                    };
                    match fast_id {
                        Some(id) => {
                            prop_assert_eq!(id, issue.batch.first_id());
                            prop_assert_eq!(issue.extend, None);
                            prop_assert_eq!(&fast, &seq, "the fast path left another state");
                            // The module reports "not pacing" on the fast path.
                            prop_assert!(!seq.is_pacing(wall), "the fast path answered while pacing");
                        }
                        None => prop_assert_eq!(&fast, &before, "a declined fast path changed state"),
                    }
                    if let Some(record) = issue.extend {
                        records.insert(key, record);
                    }
                    let bound = records[&key].bound;
                    for id in issue.batch.ids() {
                        prop_assert!(last_answered.get(&key).is_none_or(|&last| id > last), "key {key} went back");
                        prop_assert!(id <= bound, "id {id} above the recorded bound {bound}");
                        prop_assert!(all.insert(id), "duplicate {id}");
                        last_answered.insert(key, id);
                    }
                    last_issued.insert(key, issue.batch.last_id());
                }
                Event::Restart { clock_delta_ms } => {
                    // Everything in memory is gone; the records are on disk. The floor comes
                    // from them (as SNOWFLAKE.SETBOUND replayed from the AOF raises it).
                    incarnation += 1;
                    wall += clock_delta_ms;
                    monotonic += clock_delta_ms;
                    seq = SnowflakeSequence::new(config);
                    let now = Now { wall_unix_ms: wall, monotonic_ms: monotonic };
                    seq.apply_restart_fence(now);
                    for record in records.values() {
                        prop_assert!(seq.accept_bound(record.bound, now, false).is_ok());
                    }
                    last_issued.clear();
                }
                Event::Reload => last_issued.clear(),
            }
        }
    }
}

#[test]
fn a_steady_stream_writes_a_key_once_per_lease() {
    let config = Config::default();
    let lease = config.snowflake_lease_ms();
    let mut seq = SnowflakeSequence::new(Config {
        restart_fence: false,
        ..config
    });
    let mut state = KeyState::default();
    let mut writes = 0;
    // 10 seconds of one call per millisecond.
    for ms in 0..10_000u64 {
        let now = Now {
            wall_unix_ms: T0 + ms,
            monotonic_ms: ms,
        };
        let issue = seq.issue_for_key(now, 1, 0, state, 7, lease).unwrap();
        if let Some(record) = issue.extend {
            writes += 1;
            state.record = Some(record);
        }
        state.last_issued = Some(issue.batch.last_id());
    }
    assert_eq!(lease, 1000);
    assert!(writes <= 11, "{writes} writes for 10,000 calls over 10 s");
    assert!(
        writes >= 10,
        "the bound is extended as time passes: {writes}"
    );
}

#[test]
fn a_replayed_bound_is_taken_in_however_far_ahead() {
    let config = Config::default();
    let mut seq = SnowflakeSequence::new(Config {
        restart_fence: false,
        ..config
    });
    let now = Now::from(T0);
    let wall_ms = T0 - config.layout.epoch_unix_ms;
    let far = config.layout.compose(wall_ms + 3_600_000, 0, 0);
    seq.accept_bound(far, now, false).unwrap();
    assert_eq!(seq.ahead_of_wall_ms(T0), 3_600_000);
    // Issuing goes on above it at once (real-time pace), not an hour later.
    let issue = seq
        .issue_for_key(now, 1, 0, KeyState::default(), 1, 1000)
        .unwrap();
    assert!(issue.batch.first_id() > far);
}

#[test]
fn an_operators_bound_past_the_drift_bound_is_refused_changing_nothing() {
    let config = Config::default();
    let mut seq = SnowflakeSequence::new(Config {
        restart_fence: false,
        ..config
    });
    let now = Now::from(T0);
    let wall_ms = T0 - config.layout.epoch_unix_ms;
    let before = seq.clone();
    let too_far = config
        .layout
        .compose(wall_ms + config.max_drift_ms + 1, 0, 0);
    let error = seq.accept_bound(too_far, now, true).unwrap_err();
    assert_eq!(error.code(), "DRIFT");
    assert!(
        error.to_string().contains("the key was not changed"),
        "{error}"
    );
    assert_eq!(seq, before);
    let near = config.layout.compose(wall_ms + config.max_drift_ms, 0, 0);
    seq.accept_bound(near, now, true).unwrap();
    assert_eq!(seq.ahead_of_wall_ms(T0), config.max_drift_ms);
}

#[test]
fn the_fast_path_answers_calls_within_a_millisecond_and_declines_the_rest() {
    let config = Config {
        restart_fence: false,
        ..Config::default()
    };
    let lease = config.snowflake_lease_ms();
    let mut seq = SnowflakeSequence::new(config);
    let me = 7;
    let mut state = KeyState::default();
    let mut fast = 0;
    for ms in 0..3u64 {
        let wall = T0 + ms;
        for _ in 0..1_000 {
            let id = match seq.issue_one_owned(wall, 0, state, me) {
                Some(id) => {
                    fast += 1;
                    id
                }
                None => {
                    let now = Now {
                        wall_unix_ms: wall,
                        monotonic_ms: ms,
                    };
                    let issue = seq.issue_for_key(now, 1, 0, state, me, lease).unwrap();
                    if let Some(record) = issue.extend {
                        state.record = Some(record);
                    }
                    issue.batch.first_id()
                }
            };
            assert!(state.last_issued.is_none_or(|last| id > last));
            state.last_issued = Some(id);
        }
    }
    // The first call of each millisecond (and the key's first call) take the general rule.
    assert_eq!(fast, 2_997);
    // Another owner's key, or one whose last ID was lost, is never answered by it.
    assert_eq!(seq.issue_one_owned(T0 + 2, 0, state, me + 1), None);
    let lost = KeyState {
        last_issued: None,
        ..state
    };
    assert_eq!(seq.issue_one_owned(T0 + 2, 0, lost, me), None);
}
