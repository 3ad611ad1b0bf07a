//! Property tests of time windows and composed IDs: an ID composed at any time, shard and
//! sequence lies between a window's bounds exactly when its time unit is in the window's
//! units — at the window's edges too — and decoding a composed ID gives back its fields
//! (its time as the start of its unit). Layouts in milliseconds, 10 ms and seconds.

use idgen_core::{Layout, DEFAULT_EPOCH_UNIX_MS};
use proptest::prelude::*;

fn layouts() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::default()),
        Just(Layout {
            time_bits: 41,
            shard_bits: 2,
            sequence_bits: 10,
            epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
            time_unit_ms: 1,
        }),
        Just(Layout {
            time_bits: 37,
            shard_bits: 20,
            sequence_bits: 6,
            epoch_unix_ms: 1_600_000_000_000,
            time_unit_ms: 1,
        }),
        Just(Layout {
            time_bits: 39,
            shard_bits: 8,
            sequence_bits: 16,
            epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
            time_unit_ms: 10,
        }),
        Just(Layout {
            time_bits: 31,
            shard_bits: 16,
            sequence_bits: 16,
            epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
            time_unit_ms: 1000,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn an_id_is_in_a_window_exactly_when_its_time_is(
        layout in layouts(),
        from in 2_000u64..1_000_000,
        length in 0u64..5000,
        near in -2000i64..7003,
        shard in any::<u64>(),
        sequence in any::<u64>(),
    ) {
        let from = layout.epoch_unix_ms + from;
        let to = from + length;
        let (low, high) = layout.window(from, to).unwrap();
        // Times at, just inside and just outside both edges, and anywhere between.
        let at = (from as i64 + near.min(length as i64 + 2)) as u64;
        let shard = shard % layout.shard_values();
        let sequence = sequence % layout.sequence_values();
        let id = layout.compose_fields(at, shard, sequence).unwrap();
        let unit = |unix_ms: u64| (unix_ms - layout.epoch_unix_ms) / layout.time_unit_ms;
        prop_assert_eq!((low..=high).contains(&id), (unit(from)..=unit(to)).contains(&unit(at)));
        if id > 0 {
            let parts = layout.decode(id as i64, 1).unwrap();
            let unit_start = layout.epoch_unix_ms + unit(at) * layout.time_unit_ms;
            prop_assert_eq!(
                (parts.unix_ms, parts.shard, parts.sequence),
                (unit_start, shard, sequence)
            );
        }
    }
}
