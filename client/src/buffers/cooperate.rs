//! Taking part in tokio's cooperative budget, so that a caller looping on a buffer that is
//! always ready still gives the runtime back its thread now and then.
//!
//! Why it matters: a tokio worker runs one task at a time, and takes the next only when the
//! task's poll returns. A task looping on a future that is always ready never returns, so
//! every task queued on its worker waits: other callers of the same buffer woken after a
//! range switch, and the buffer's background fetch (a task spawned or woken from a running
//! task goes into that worker's LIFO slot, which other workers do not steal from: tokio
//! issue 4941). Other workers do not help while they are busy too: four tasks looping on
//! one buffer on two workers left two of them unserved for the rest of each range, seconds.
//! With the budget, the buffer's future returns `Pending` once the task has used it up
//! (128 units per scheduling turn), the worker runs what is queued and polls its I/O
//! driver, and the caller continues on its next turn; on a current-thread runtime this is
//! the only way a busy caller lets the fetch run.
//!
//! Always, as tokio's channels do when a message is ready, but not on every value: a unit of
//! budget is a thread-local access and a yield a reschedule (with one task, a poll of the
//! I/O driver), which cost a caller that takes values back to back a quarter of its rate at
//! one unit in 16 values (`buffers --local-only`: 0.41 of a `fetch_add` loop, against 0.75
//! with the budget taken only during fetches). At one unit in [`VALUES_PER_UNIT`], a busy
//! task yields every 128 · 256 = 32,768 values — about 0.1 ms alone, a few milliseconds
//! while tasks on two workers contend for one buffer — and the loop keeps 0.72 (a handle's
//! 0.91, against 0.96): medians of six runs each, BENCHMARKS.md's buffers section.

use std::task::{Context, Poll};

/// Values a segment buffer hands out per unit of budget: the budget is taken on one value
/// in this many (a checkpoint), so that the fast path stays one atomic add and a test.
pub(crate) const VALUES_PER_UNIT: u64 = 256; // a power of two: checked with a mask

/// Consumes one unit of the task's budget: `Pending` (with the task woken to run again on
/// its next turn) when the budget is used up, `Ready` otherwise and outside a runtime.
#[inline(always)]
pub(crate) fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    tokio::task::coop::poll_proceed(cx).map(|progress| progress.made_progress())
}
