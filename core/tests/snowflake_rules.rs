//! Scenario tests of the snowflake sequence, driven by an injected wall clock.

use std::cell::Cell;

use idgen_core::{Clocks, Config, IdError, Identity, Layout, Now, Request, SnowflakeSequence};

const T0: u64 = 1_790_000_000_000;

fn sequence(step: u64, offset: u64) -> SnowflakeSequence {
    let config = Config {
        identity: Identity { step, offset },
        ..Config::default()
    };
    config.validate(T0).unwrap();
    SnowflakeSequence::new(config)
}

fn one(shard: u64, above: Option<u64>) -> Request {
    Request {
        count: 1,
        shard,
        above,
    }
}

fn next(seq: &mut SnowflakeSequence, wall: u64) -> u64 {
    seq.issue(wall, one(0, None)).unwrap().first_id()
}

#[test]
fn sequence_within_a_millisecond_runs_offset_plus_multiples_of_step() {
    let mut seq = sequence(6, 2);
    let layout = seq.config().layout;
    let ids: Vec<u64> = (0..5).map(|_| next(&mut seq, T0)).collect();
    let sequences: Vec<u64> = ids
        .iter()
        .map(|&id| layout.decode(id as i64, 6).unwrap().sequence)
        .collect();
    assert_eq!(sequences, vec![2, 8, 14, 20, 26]);
    for id in ids {
        let parts = layout.decode(id as i64, 6).unwrap();
        assert_eq!(parts.unix_ms, T0);
        assert_eq!(parts.offset, 2);
    }
}

#[test]
fn a_used_up_millisecond_borrows_the_next_one_at_once() {
    let mut seq = sequence(1, 0);
    let batch = seq
        .issue(
            T0,
            Request {
                count: 4096 * 3 + 1,
                shard: 0,
                above: None,
            },
        )
        .unwrap();
    let layout = seq.config().layout;
    let ids: Vec<u64> = batch.ids().collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(layout.decode(ids[4095] as i64, 1).unwrap().unix_ms, T0);
    assert_eq!(layout.decode(ids[4096] as i64, 1).unwrap().unix_ms, T0 + 1);
    assert_eq!(
        layout
            .decode(*ids.last().unwrap() as i64, 1)
            .unwrap()
            .unix_ms,
        T0 + 3
    );
    assert_eq!(batch.borrowed_ms, 3);
    assert_eq!(seq.ahead_of_wall_ms(T0), 3);
}

#[test]
fn clock_stepping_back_keeps_counting_from_the_last_millisecond() {
    let mut seq = sequence(1, 0);
    let before = next(&mut seq, T0 + 1000);
    let batch = seq.issue(T0 + 400, one(0, None)).unwrap();
    assert!(batch.clock_stepped_back);
    assert!(batch.first_id() > before);
    let layout = seq.config().layout;
    assert_eq!(
        layout.decode(batch.first_id() as i64, 1).unwrap().unix_ms,
        T0 + 1000
    );
    // Only the first call after the step notices it.
    assert!(
        !seq.issue(T0 + 401, one(0, None))
            .unwrap()
            .clock_stepped_back
    );
}

#[test]
fn clock_jumping_forward_moves_ids_forward() {
    let mut seq = sequence(1, 0);
    let before = next(&mut seq, T0);
    let after = next(&mut seq, T0 + 3_600_000);
    let layout = seq.config().layout;
    assert!(after > before);
    assert_eq!(
        layout.decode(after as i64, 1).unwrap().unix_ms,
        T0 + 3_600_000
    );
}

#[test]
fn a_wall_clock_step_back_never_stops_issuing_only_bursts_beyond_real_time_pace() {
    let config = Config {
        max_drift_ms: 3,
        restart_fence: false,
        ..Config::default()
    };
    let mut seq = SnowflakeSequence::new(config);
    let at = |wall_unix_ms, monotonic_ms| Now {
        wall_unix_ms,
        monotonic_ms,
    };
    let (t, m) = (T0, 1_000);
    seq.issue(at(t, m), one(0, None)).unwrap(); // ms t, index 0; may reach t + 3
                                                // The wall clock steps back an hour; no real time passes.
    let back = t - 3_600_000;
    let many = |count| Request {
        count,
        shard: 0,
        above: None,
    };
    // What the drift bound allowed before the step is still there: up to ms t + 3.
    let batch = seq.issue(at(back, m), many(4096 * 3)).unwrap();
    assert_eq!(batch.last.time, t - config.layout.epoch_unix_ms + 3);
    assert!(seq.is_pacing(back));
    // A burst past it is refused, changes nothing, and says when it fits.
    let saved = seq.clone();
    let refused = seq.issue(at(back, m), many(4096));
    assert_eq!(
        refused,
        Err(IdError::Drift {
            ahead_ms: 3_600_004,
            limit_ms: 3,
            retry_in_ms: 1,
            restart_fence: false
        })
    );
    assert!(refused.unwrap_err().to_string().contains("fits in 1 ms"));
    assert_eq!(seq, saved);
    // Each millisecond of real time brings one millisecond's sequence, while the wall
    // clock is still an hour behind.
    assert!(seq.issue(at(back + 1, m + 1), many(4096)).is_ok());
    assert!(seq.issue(at(back + 1, m + 1), many(4096)).is_err());
    let later = seq.issue(at(back + 10, m + 10), many(4096 * 9)).unwrap();
    assert_eq!(later.last.time, t - config.layout.epoch_unix_ms + 13);
}

#[test]
fn a_floor_far_ahead_is_continued_from_at_real_time_pace() {
    // A restart while the clock ran an hour ahead: the persisted floor is an hour past the
    // wall clock. The node issues at once, from above the floor, one millisecond per
    // millisecond.
    let mut seq = sequence(1, 0);
    let floor_ms = T0 - seq.config().layout.epoch_unix_ms + 3_600_000;
    seq.raise_floor(floor_ms, 50);
    let at = |monotonic_ms| Now {
        wall_unix_ms: T0,
        monotonic_ms,
    };
    let full_ms = Request {
        count: 4096,
        shard: 0,
        above: None,
    };
    let batch = seq.issue(at(50), full_ms).unwrap();
    assert_eq!(batch.first.time, floor_ms + 1);
    assert!(seq.issue(at(50), one(0, None)).is_err());
    assert!(seq.issue(at(51), full_ms).is_ok());
}

#[test]
fn a_batch_that_would_pass_the_drift_bound_is_refused_whole() {
    let config = Config {
        max_drift_ms: 3,
        restart_fence: false,
        ..Config::default()
    };
    let mut seq = SnowflakeSequence::new(config);
    // Four full milliseconds plus one ID would end 4 ms ahead of the wall clock.
    let refused = seq.issue(
        T0,
        Request {
            count: 4096 * 4 + 1,
            shard: 0,
            above: None,
        },
    );
    assert_eq!(
        refused,
        Err(IdError::Drift {
            ahead_ms: 4,
            limit_ms: 3,
            retry_in_ms: 1,
            restart_fence: false
        })
    );
    assert_eq!(seq.last_position(), None);
    // One ID fewer ends exactly at the bound and is issued.
    let batch = seq.issue(
        T0,
        Request {
            count: 4096 * 4,
            shard: 0,
            above: None,
        },
    );
    assert_eq!(batch.unwrap().borrowed_ms, 3);
}

#[test]
fn low_traffic_ids_do_not_share_their_low_bits() {
    let mut seq = sequence(1, 0);
    let ids: Vec<u64> = (0..256).map(|ms| next(&mut seq, T0 + ms * 7)).collect();
    let mut residues = [0u32; 16];
    for id in &ids {
        residues[(id % 16) as usize] += 1;
    }
    assert!(
        residues.iter().all(|&n| n == 16),
        "id % 16 should be spread evenly, got {residues:?}"
    );
}

#[test]
fn a_key_whose_last_id_is_ahead_gets_ids_above_it() {
    let mut seq = sequence(3, 1);
    let layout = seq.config().layout;
    // Another instance issued this for the key 50 ms ahead of our clock.
    let theirs = layout.compose(T0 - layout.epoch_unix_ms + 50, 0, 2);
    let ours = seq.issue(T0, one(0, Some(theirs))).unwrap().first_id();
    assert!(ours > theirs);
    assert_eq!(layout.decode(ours as i64, 3).unwrap().offset, 1);
}

#[test]
fn changing_shard_within_a_millisecond_keeps_per_key_order() {
    let mut seq = sequence(1, 0);
    let high = seq.issue(T0, one(1000, None)).unwrap().first_id();
    let low = seq.issue(T0, one(3, Some(high))).unwrap().first_id();
    assert!(low > high);
}

#[test]
fn raised_floor_is_never_issued_again() {
    let mut seq = sequence(1, 0);
    let layout = seq.config().layout;
    seq.raise_floor(T0 - layout.epoch_unix_ms + 500, 0);
    let id = next(&mut seq, T0);
    assert_eq!(layout.decode(id as i64, 1).unwrap().unix_ms, T0 + 501);
    // A lower floor changes nothing.
    let saved = seq.clone();
    seq.raise_floor(1, 0);
    assert_eq!(seq, saved);
}

#[test]
fn the_end_of_the_time_field_is_an_error_not_a_wrap() {
    let config = Config {
        layout: Layout {
            time_bits: 36,
            shard_bits: 15,
            sequence_bits: 12,
            epoch_unix_ms: T0 - (1 << 36) + 10,
            time_unit_ms: 1,
        },
        ..Config::default()
    };
    let mut seq = SnowflakeSequence::new(config);
    let ok = seq.issue(T0 + 5, one(0, None));
    assert!(ok.is_ok());
    let saved = seq.clone();
    let err = seq.issue(T0 + 10, one(0, None)).unwrap_err();
    assert!(matches!(err, IdError::TimeExhausted { .. }));
    assert_eq!(err.code(), "EXHAUSTED");
    assert_eq!(seq, saved);
}

#[test]
fn bad_count_and_shard_are_refused() {
    let mut seq = sequence(1, 0);
    assert!(matches!(
        seq.issue(
            T0,
            Request {
                count: 0,
                shard: 0,
                above: None
            }
        ),
        Err(IdError::CountOutOfRange { .. })
    ));
    assert!(matches!(
        seq.issue(
            T0,
            Request {
                count: 100_001,
                shard: 0,
                above: None
            }
        ),
        Err(IdError::CountOutOfRange { .. })
    ));
    assert!(matches!(
        seq.issue(T0, one(1024, None)),
        Err(IdError::ShardOutOfRange { .. })
    ));
    assert_eq!(seq.last_position(), None);
}

#[test]
fn the_restart_fence_starts_above_anything_a_crash_could_have_lost() {
    let mut seq = sequence(1, 0);
    seq.apply_restart_fence(T0);
    let layout = seq.config().layout;
    // One millisecond's sequence per millisecond still flows...
    let first = seq
        .issue(
            T0,
            Request {
                count: 4096,
                shard: 0,
                above: None,
            },
        )
        .unwrap();
    assert_eq!(
        layout.decode(first.first_id() as i64, 1).unwrap().unix_ms,
        T0 + 2000
    );
    // ...but borrowing beyond the fence is refused, and says why.
    let refused = seq.issue(T0, one(0, None)).unwrap_err();
    assert_eq!(
        refused,
        IdError::Drift {
            ahead_ms: 2001,
            limit_ms: 2000,
            retry_in_ms: 1,
            restart_fence: true
        }
    );
    assert!(refused.to_string().contains("restart fence"));
    // Once the wall clock has caught up with the fence, bursts borrow again.
    let later = seq.issue(
        T0 + 2000,
        Request {
            count: 100_000,
            shard: 0,
            above: None,
        },
    );
    assert!(later.is_ok());
}

/// Clocks that count how often the monotonic clock is asked.
struct CountingClocks {
    wall_unix_ms: u64,
    monotonic_ms: u64,
    monotonic_reads: Cell<u32>,
}

impl Clocks for CountingClocks {
    fn wall_unix_ms(&self) -> u64 {
        self.wall_unix_ms
    }

    fn monotonic_ms(&self) -> u64 {
        self.monotonic_reads.set(self.monotonic_reads.get() + 1);
        self.monotonic_ms
    }
}

#[test]
fn the_monotonic_clock_is_read_once_per_wall_millisecond_and_past_the_drift_bound() {
    let mut seq = sequence(1, 0);
    let at = |wall_unix_ms: u64, monotonic_ms: u64| CountingClocks {
        wall_unix_ms,
        monotonic_ms,
        monotonic_reads: Cell::new(0),
    };
    let clocks = at(T0, 5_000);
    for _ in 0..1_000 {
        seq.issue(&clocks, one(0, None)).unwrap();
    }
    assert_eq!(
        clocks.monotonic_reads.get(),
        1,
        "one read in the millisecond"
    );
    let clocks = at(T0 + 1, 5_001);
    seq.issue(&clocks, one(0, None)).unwrap();
    seq.issue(&clocks, one(0, None)).unwrap();
    assert_eq!(
        clocks.monotonic_reads.get(),
        1,
        "one read in the next millisecond"
    );

    // The wall clock steps back 10 s: past the drift bound every call needs real time, and
    // issuing goes on from the allowance recorded before the step, up to it and no further
    // while no real time passes.
    let drift = seq.config().max_drift_ms;
    let layout = seq.config().layout;
    let clocks = at(T0 + 1 - 10_000, 5_002);
    let batch = Request {
        count: 100_000,
        ..one(0, None)
    };
    let mut last_id = 0;
    let refusal = loop {
        match seq.issue(&clocks, batch) {
            Ok(issued) => last_id = issued.last_id(),
            Err(refusal) => break refusal,
        }
    };
    assert!(matches!(refusal, IdError::Drift { .. }), "{refusal:?}");
    let reached = layout.decode(last_id as i64, 1).unwrap().unix_ms;
    // The allowance recorded at T0 + 1 (monotonic 5,001), 1 ms of real time later.
    assert!(
        reached <= T0 + 1 + drift + 1,
        "{reached} past the allowance"
    );
    assert!(
        reached >= T0 + drift - 25,
        "{reached}: stopped well before the allowance"
    );
    assert!(
        clocks.monotonic_reads.get() >= 2,
        "read past the drift bound"
    );
}
