//! A segment buffer's values for one task at a time: blocks taken from the shared range
//! with one atomic add each, handed out with no shared memory at all.
//!
//! Why: [`SegmentBuffer::next`] costs one atomic add a value, shared by every caller. A
//! bulk job that takes millions of values in one task pays that add (and the future's
//! stores around it) on every value: 0.77 of a bare `fetch_add` loop. A block is taken with
//! one add per up to [`MOST_PER_BLOCK`] values; between blocks a value is an increment in
//! the task's own memory.
//!
//! - Blocks start at one value and double at each refill up to [`MOST_PER_BLOCK`]: a handle
//!   that takes a few values holds back few (values still in a block when the handle is
//!   dropped are skipped, never handed out to anyone).
//! - Everything else is the shared buffer's: prefetch, range switches, waits, errors, and
//!   the cooperative budget: a refill whose block holds one of the range's checkpoints (one
//!   index in `VALUES_PER_UNIT`) takes a unit, so a handle takes as many units per value as
//!   `SegmentBuffer::next` does, and a task looping on it lets its siblings run as often.

use crate::buffers::range_slots::{Block, Epoch};
use crate::buffers::segment::{NextValue, SegmentBuffer};
use crate::error::Result;

/// The most values a handle takes from the shared range at once.
pub(crate) const MOST_PER_BLOCK: u64 = 64;

/// One task's handle on a [`SegmentBuffer`], for taking many values fast (a bulk import, a
/// batch job): made by [`SegmentBuffer::local`].
///
/// Values are unique across all handles, buffers and clients, as the buffer's are. Each
/// handle takes consecutive blocks of the current range; its own values increase within a
/// range, but they interleave with other callers' (a handle may hand out a value lower than
/// one another caller already got). Values left in a handle's block when it is dropped are
/// skipped: at most 63, so make one handle per task that takes many values, not one per
/// value.
#[derive(Debug)]
pub struct LocalSegmentBuffer {
    buffer: SegmentBuffer,
    /// The next value of the block in hand.
    next: i64,
    step: i64,
    /// Values left in the block in hand.
    left: u64,
    /// The size of the next block to take.
    next_block: u64,
}

impl SegmentBuffer {
    /// A handle for one task that takes values from this buffer in blocks: one atomic add
    /// per block of up to 64 values instead of one per value. See [`LocalSegmentBuffer`].
    pub fn local(&self) -> LocalSegmentBuffer {
        LocalSegmentBuffer {
            buffer: self.clone(),
            next: 0,
            step: 1,
            left: 0,
            next_block: 1,
        }
    }
}

impl LocalSegmentBuffer {
    /// The next value. Waits for the server only when the shared buffer has no range at
    /// hand; otherwise ready at once, except at a refill once the task has used up its
    /// cooperative budget (then it yields once, keeping its value, so that the runtime runs
    /// the other tasks queued on its worker), at the same rate per value as
    /// [`SegmentBuffer::next`]. A future dropped without being awaited skips its value.
    #[inline(always)]
    #[allow(clippy::should_implement_trait)] // a future, as `SegmentBuffer::next`, not an item
    pub fn next(&mut self) -> NextValue<'_> {
        // Both branches give the same small result, built into the future in one place:
        // returning a whole future from the cold branch made the compiler copy every
        // future through a temporary, a stall on each value.
        let taken = if self.left != 0 {
            Ok((self.pop(), false))
        } else {
            self.pop_from_a_new_block()
        };
        match taken {
            Ok((value, cooperate)) => NextValue::taken(value, cooperate),
            Err(epoch) => NextValue::waiting(self.next_after(epoch)),
        }
    }

    /// The next value if this handle or the shared buffer has one, without waiting.
    #[inline]
    pub fn try_next(&mut self) -> Option<i64> {
        if self.left == 0 {
            self.refill().ok()?;
        }
        Some(self.pop())
    }

    /// The buffer this handle takes from.
    pub fn buffer(&self) -> &SegmentBuffer {
        &self.buffer
    }

    /// Hands out the next value of the block in hand; `left` is not 0.
    #[inline(always)]
    fn pop(&mut self) -> i64 {
        let value = self.next;
        self.next = value.wrapping_add(self.step);
        self.left -= 1;
        value
    }

    /// The first value of a new block and whether to take a unit of the budget before
    /// handing it out, or the epoch of the used-up range.
    #[cold]
    #[inline(never)]
    fn pop_from_a_new_block(&mut self) -> std::result::Result<(i64, bool), Epoch> {
        let cooperate = self.refill()?;
        Ok((self.pop(), cooperate))
    }

    /// Takes the next block from the shared range: whether to take a unit of the budget
    /// before handing out its first value, or the epoch of the used-up range.
    fn refill(&mut self) -> std::result::Result<bool, Epoch> {
        let (block, cooperate) = self.buffer.take_block(self.next_block)?;
        let Block { first, step, count } = block;
        (self.next, self.step, self.left) = (first, step, count);
        self.next_block = (self.next_block * 2).min(MOST_PER_BLOCK);
        Ok(cooperate)
    }

    /// The slow path of [`next`](Self::next): switches ranges until one has a value.
    async fn next_after(&mut self, mut exhausted: Epoch) -> Result<i64> {
        loop {
            self.buffer.switch_from(exhausted).await?;
            match self.refill() {
                Ok(_) => return Ok(self.pop()),
                Err(epoch) => exhausted = epoch,
            }
        }
    }
}

#[cfg(test)]
mod tests;
