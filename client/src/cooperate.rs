//! Taking part in tokio's cooperative budget, so that a caller looping on a buffer that is
//! always ready still gives the runtime back its thread now and then.
//!
//! Why it matters: a task spawned (or woken) from a running task goes into that worker's
//! LIFO slot, which other workers do not steal from (tokio issue 4941). A background fetch
//! started by a caller that never yields would run only when that caller finally waits — on
//! an empty buffer, a full round trip too late. With the budget, the caller's `next` returns
//! `Pending` once the task has used up its budget (128 units per scheduling turn), the
//! worker runs the fetch and polls its I/O driver, and the caller continues on its next
//! turn. On a current-thread runtime this is the only way a busy caller lets the fetch run.
//!
//! Only while a fetch is under way: a unit of budget is a thread-local access, and the yield
//! a reschedule, which together cost a caller that takes values back to back a quarter of
//! its rate (`buffers --local-only`: 0.56 of a `fetch_add` loop with the budget taken all
//! the time, 0.77 with it taken only during fetches). Between fetches there is nothing
//! for the caller to let run, as with any value already in memory.

use std::task::{Context, Poll};

/// Values a segment buffer hands out per unit of budget while a fetch is under way: the
/// budget is checked on one value in this many, so that the fast path stays one atomic add
/// (a busy task still yields every 128 · 16 = 2,048 values, a few microseconds).
pub(crate) const VALUES_PER_UNIT: u64 = 16; // a power of two: checked with a mask

/// Consumes one unit of the task's budget: `Pending` (with the task woken to run again on
/// its next turn) when the budget is used up, `Ready` otherwise and outside a runtime.
#[inline(always)]
pub(crate) fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    tokio::task::coop::poll_proceed(cx).map(|progress| progress.made_progress())
}
