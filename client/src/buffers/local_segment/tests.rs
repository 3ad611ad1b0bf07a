//! A task's handle on a segment buffer, with the counting source of the buffer's own tests.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::buffers::options::SegmentOptions;
use crate::buffers::source::counting::CountingSource;

fn fixed(size: u64) -> SegmentOptions {
    SegmentOptions::default()
        .initial_size(size)
        .min_size(size)
        .max_size(size)
}

fn buffer_of(source: &Arc<CountingSource>, range_size: u64) -> SegmentBuffer {
    SegmentBuffer::new(source.clone(), "k", fixed(range_size))
}

fn ranges_fetched(source: &CountingSource) -> usize {
    source.range_sizes.lock().unwrap().len()
}

#[tokio::test]
async fn a_handle_takes_blocks_that_double_up_to_64_values() {
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_of(&source, 1_000);
    let mut local = buffer.local();
    let mut values = Vec::new();
    for _ in 0..200 {
        values.push(local.next().await.unwrap());
    }
    assert_eq!(
        values,
        (1..=200).collect::<Vec<i64>>(),
        "alone, it takes in order"
    );
    // Blocks of 1, 2, 4, 8, 16, 32, 64, 64, 64: 255 values taken from the range.
    assert_eq!(buffer.try_next(), Some(256));
    assert_eq!(local.try_next(), Some(201), "the rest of its block");
}

#[tokio::test]
async fn a_dropped_handle_skips_what_its_block_holds() {
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_of(&source, 1_000);
    let mut local = buffer.local();
    for expected in 1..=4 {
        assert_eq!(local.next().await.unwrap(), expected);
    }
    // Blocks of 1, 2 and 4: values 5, 6 and 7 are in hand.
    drop(local);
    assert_eq!(buffer.next().await.unwrap(), 8);
    assert_eq!(
        buffer.local().try_next(),
        Some(9),
        "a new handle starts a new block"
    );
}

#[tokio::test]
async fn a_handle_crosses_ranges_and_its_block_ends_with_the_range() {
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_of(&source, 100);
    let mut local = buffer.local();
    let mut values = Vec::new();
    for _ in 0..1_000 {
        values.push(local.next().await.unwrap());
    }
    // The source hands out consecutive ranges, so one caller alone sees 1, 2, 3, …: a
    // block is cut at the end of its range, and the next one comes from the next range.
    assert_eq!(values, (1..=1_000).collect::<Vec<i64>>());
    assert!(ranges_fetched(&source) >= 10);
}

#[tokio::test(start_paused = true)]
async fn a_handle_waiting_for_a_failed_fetch_gets_its_error_and_then_values_again() {
    let source = Arc::new(CountingSource::with_round_trip(Duration::from_millis(20)));
    let buffer = buffer_of(&source, 100);
    source.failures.store(1, Ordering::SeqCst);
    let mut local = buffer.local();
    let error = local.next().await.expect_err("the fetch failed");
    assert!(error.is_retryable(), "{error}");
    // The failed fetch's values (1 to 100) are skipped, never handed out.
    assert_eq!(local.next().await.unwrap(), 101);
}

#[tokio::test(flavor = "current_thread")]
async fn a_handle_that_never_yields_still_lets_the_prefetch_run_on_a_current_thread_runtime() {
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_of(&source, 100_000);
    let mut local = buffer.local();
    for _ in 0..100_000 {
        std::hint::black_box(local.next().await.unwrap());
    }
    assert_eq!(buffer.try_next(), None, "the first range is used up");
    assert_eq!(
        ranges_fetched(&source),
        2,
        "the second was fetched meanwhile"
    );
    assert_eq!(local.next().await.unwrap(), 100_001);
}

/// Two tasks with handles and two calling the buffer itself, on two workers, across many
/// range switches: every value once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_and_shared_callers_never_get_the_same_value() {
    const PER_TASK: usize = 50_000;
    let source = Arc::new(CountingSource::default());
    let buffer = buffer_of(&source, 1_000);
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let buffer = buffer.clone();
            tokio::spawn(async move {
                let mut values = Vec::with_capacity(PER_TASK);
                let mut local = buffer.local();
                for _ in 0..PER_TASK {
                    let value = if task % 2 == 0 {
                        local.next().await
                    } else {
                        buffer.next().await
                    };
                    values.push(value.unwrap());
                }
                values
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for task in tasks {
        let values = task.await.unwrap();
        assert!(
            values.iter().all(|value| seen.insert(*value)),
            "a value twice"
        );
    }
    assert_eq!(seen.len(), 4 * PER_TASK);
    assert!(ranges_fetched(&source) >= 200);
}

/// Four tasks that never yield on their own, each with its own handle on one buffer, on
/// two workers: each keeps getting values throughout, across range switches (see the
/// buffer's test of the same name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_busy_handles_on_two_workers_all_get_values_throughout() {
    use crate::buffers::segment::tests::{assert_all_served, busy_callers};
    assert_all_served(busy_callers(true).await);
}
