//! The lock-free half of a leased generator: the installed lease and the last ID, read and
//! advanced with atomics on every ID.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use idgen_core::Layout;

/// A granted window, as the server replied it (`LEASE.ACQUIRE`, `LEASE.RENEW`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The worker id (the ID's shard field).
    pub worker: u64,
    /// First time unit of the window (since the layout's epoch).
    pub start_unit: u64,
    /// Last time unit of the window.
    pub end_unit: u64,
    /// The window's last unix millisecond.
    pub end_unix_ms: u64,
    /// The server's clock when it granted.
    pub server_now_ms: u64,
}

/// Why [`LeaseCursor::next`] gave no ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// No lease installed.
    NoLease,
    /// Past the deadline, or the window's IDs are used up.
    Ended,
    /// Too far ahead of the clock: retry in this many ms.
    Ahead(u64),
}

const VALID: u64 = 1 << 63;

/// The lock-free state of a generator: the current lease (worker id and window end), when to
/// stop by the monotonic clock, the offset from it to the server's clock, and the last ID.
#[derive(Debug)]
pub(crate) struct LeaseCursor {
    layout: Layout,
    /// `VALID | worker << time_bits | end_unit`, or 0: no lease.
    bounds: AtomicU64,
    /// Monotonic ms from which nothing is issued under the current lease.
    deadline: AtomicU64,
    /// Server unix ms minus monotonic ms, as measured at the last grant (the server's clock
    /// read after the request was sent, so the estimate runs ahead, never behind).
    delta: AtomicI64,
    /// The last ID issued.
    cursor: AtomicU64,
    /// How many time units IDs may run ahead of the clock (borrowing, like the module).
    max_borrow_units: u64,
    /// Subtracted from each window's end (ms).
    margin_ms: u64,
}

impl LeaseCursor {
    pub(crate) fn new(layout: Layout, max_borrow_ms: u64, margin_ms: u64) -> Self {
        LeaseCursor {
            layout,
            bounds: AtomicU64::new(0),
            deadline: AtomicU64::new(0),
            delta: AtomicI64::new(0),
            cursor: AtomicU64::new(0),
            max_borrow_units: layout.units_of_ms(max_borrow_ms),
            margin_ms,
        }
    }

    /// Installs a grant, or with `renewal` a renewal of the installed lease, whose request was
    /// sent at monotonic `sent_ms`.
    pub(crate) fn install(&self, grant: Grant, sent_ms: u64, renewal: bool) {
        let layout = self.layout;
        // Every later ID is above the first of the window, so its time lies at or after the
        // window's start, whatever lease an issuer read.
        let first = layout.compose(grant.start_unit, 0, 0);
        self.cursor
            .fetch_max(first.saturating_sub(1), Ordering::AcqRel);
        // The server's clock at the send, as this reply tells it. A renewal never moves the
        // generator's time back: after a step back of the server's clock the window's end
        // stays where it was, and adopting the earlier time would leave the generator
        // waiting out the whole step with a lease in hand (seen in the fault soak: 123 s).
        let reported = grant.server_now_ms as i64 - sent_ms as i64;
        let delta = if renewal {
            reported.max(self.delta.load(Ordering::Relaxed))
        } else {
            reported
        };
        let server_at_send = (sent_ms as i64 + delta).max(0) as u64;
        let remaining = grant.end_unix_ms.saturating_sub(server_at_send);
        let deadline = (sent_ms + remaining).saturating_sub(self.margin_ms);
        self.delta.store(delta, Ordering::Relaxed);
        self.deadline.store(deadline, Ordering::Release);
        let bounds = VALID | grant.worker << layout.time_bits | grant.end_unit;
        self.bounds.store(bounds, Ordering::Release);
    }

    /// Removes the lease (nothing is issued until the next install).
    pub(crate) fn clear(&self) {
        self.bounds.store(0, Ordering::Release);
    }

    /// The installed lease's deadline (monotonic ms), if any.
    pub(crate) fn deadline(&self) -> Option<u64> {
        (self.bounds.load(Ordering::Acquire) & VALID != 0)
            .then(|| self.deadline.load(Ordering::Acquire))
    }

    /// The time unit the server's clock is at, estimated from monotonic `now_ms`.
    pub(crate) fn server_unit(&self, now_ms: u64) -> u64 {
        let server_ms = (now_ms as i64 + self.delta.load(Ordering::Relaxed)).max(0) as u64;
        self.layout
            .units_of_ms(server_ms.saturating_sub(self.layout.epoch_unix_ms))
    }

    /// The next ID at monotonic `now_ms`: above every ID issued before, with the lease's
    /// worker id and a time inside its window.
    #[inline]
    pub(crate) fn next(&self, now_ms: u64) -> Result<u64, Stop> {
        let layout = self.layout;
        let bounds = self.bounds.load(Ordering::Acquire);
        if bounds & VALID == 0 {
            return Err(Stop::NoLease);
        }
        let time_mask = (1u64 << layout.time_bits) - 1;
        let worker = (bounds & !VALID) >> layout.time_bits;
        let end = bounds & time_mask;
        if now_ms >= self.deadline.load(Ordering::Acquire) {
            return Err(Stop::Ended);
        }
        let now_unit = self.server_unit(now_ms);
        let sequences = layout.sequence_values();
        let seq_mask = sequences - 1;
        let shard_mask = layout.shard_values() - 1;
        let time_shift = layout.shard_bits + layout.sequence_bits;
        let mut last = self.cursor.load(Ordering::Relaxed);
        loop {
            let (last_time, last_worker, last_seq) = (
                last >> time_shift,
                (last >> layout.sequence_bits) & shard_mask,
                last & seq_mask,
            );
            let (time, seq) = if last_time < now_unit {
                (now_unit, 0)
            } else if last_worker == worker && last_seq + 1 < sequences {
                (last_time, last_seq + 1)
            } else if last_worker < worker {
                (last_time, 0)
            } else {
                (last_time + 1, 0)
            };
            if time > end {
                return Err(Stop::Ended);
            }
            let limit = now_unit + self.max_borrow_units;
            if time > limit {
                return Err(Stop::Ahead(layout.ms_of_units(time - limit).max(1)));
            }
            let id = layout.compose(time, worker, seq);
            match self
                .cursor
                .compare_exchange_weak(last, id, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(id),
                Err(actual) => last = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const EPOCH: u64 = idgen_core::DEFAULT_EPOCH_UNIX_MS;

    fn grant(worker: u64, start_ms: u64, end_ms: u64, server_now_ms: u64) -> Grant {
        Grant {
            worker,
            start_unit: start_ms - EPOCH,
            end_unit: end_ms - EPOCH,
            end_unix_ms: end_ms,
            server_now_ms,
        }
    }

    fn parts(id: u64) -> (u64, u64, u64) {
        (id >> 22, (id >> 12) & 1023, id & 4095)
    }

    const T: u64 = EPOCH + 1_000_000;

    #[test]
    fn ids_carry_the_worker_and_a_time_inside_the_window() {
        let cursor = LeaseCursor::new(Layout::default(), 0, 100);
        assert_eq!(cursor.next(5), Err(Stop::NoLease));
        // Sent at monotonic 1000; the server's clock read T then.
        cursor.install(grant(1021, T, T + 9_999, T), 1000, false);
        let id = cursor.next(1000).unwrap();
        assert_eq!(parts(id), (T - EPOCH, 1021, 0));
        let later = cursor.next(1500).unwrap();
        assert_eq!(parts(later), (T - EPOCH + 500, 1021, 0));
        // The deadline: sent + (end - server now) - margin = 1000 + 9999 - 100.
        assert_eq!(cursor.deadline(), Some(10_899));
        assert!(cursor.next(10_898).is_ok());
        assert_eq!(cursor.next(10_899), Err(Stop::Ended));
    }

    #[test]
    fn a_unit_gives_the_whole_sequence_then_borrows_within_the_window() {
        let cursor = LeaseCursor::new(Layout::default(), 2, 0);
        cursor.install(grant(1023, T, T + 2, T), 1, false);
        let mut last = 0;
        for i in 0..4096 {
            let id = cursor.next(1).unwrap();
            assert!(id > last);
            assert_eq!(parts(id), (T - EPOCH, 1023, i));
            last = id;
        }
        // Borrowed: the next two units, then the window's end.
        assert_eq!(parts(cursor.next(1).unwrap()), (T - EPOCH + 1, 1023, 0));
        for _ in 0..4095 {
            cursor.next(1).unwrap();
        }
        assert_eq!(parts(cursor.next(1).unwrap()), (T - EPOCH + 2, 1023, 0));
        for _ in 0..4095 {
            cursor.next(1).unwrap();
        }
        assert_eq!(cursor.next(1), Err(Stop::Ended));
        // Without borrowing, the same unit's sequence is all there is until the clock moves.
        let strict = LeaseCursor::new(Layout::default(), 0, 0);
        strict.install(grant(1023, T, T + 9, T), 1, false);
        for _ in 0..4096 {
            strict.next(1).unwrap();
        }
        assert_eq!(strict.next(1), Err(Stop::Ahead(1)));
        assert_eq!(parts(strict.next(2).unwrap()), (T - EPOCH + 1, 1023, 0));
    }

    #[test]
    fn a_new_lease_keeps_ids_increasing_and_inside_its_window() {
        let cursor = LeaseCursor::new(Layout::default(), 1000, 0);
        cursor.install(grant(1023, T, T + 999, T), 1, false);
        let first = cursor.next(1).unwrap();
        // A new lease with a lower worker id whose window starts later (after a fence).
        cursor.install(grant(1020, T + 500, T + 1499, T + 2), 3, false);
        let id = cursor.next(3).unwrap();
        assert!(id > first);
        assert_eq!(parts(id), (T - EPOCH + 500, 1020, 0));
        // A renewal that finds the server's clock stepped back 5 s: the generator's time does
        // not go back with it, so it goes on issuing, above the last ID, and its window ends
        // where it ended (not 5 s later by the server's earlier time).
        let deadline = cursor.deadline();
        cursor.install(grant(1020, T + 500, T + 1499, T - 5000), 4, true);
        assert_eq!(cursor.deadline(), deadline);
        let after = cursor.next(4).unwrap();
        assert!(after > id);
        assert_eq!(parts(after).1, 1020);
        // A new lease from that server adopts its time: nothing below the last ID, so the
        // generator waits (too far ahead of this clock to borrow) rather than issue out of
        // order.
        cursor.install(grant(1020, T + 500, T + 1499, T - 5000), 5, false);
        assert!(matches!(cursor.next(5), Err(Stop::Ahead(_))));
        assert!(cursor.next(5 + 4500).unwrap() > after);
        cursor.clear();
        assert_eq!(cursor.next(5), Err(Stop::NoLease));
    }

    #[test]
    fn threads_share_one_increasing_unique_sequence() {
        let cursor = Arc::new(LeaseCursor::new(Layout::default(), 1_000_000, 0));
        cursor.install(grant(1000, T, T + 1_000_000, T), 1, false);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let cursor = Arc::clone(&cursor);
                std::thread::spawn(move || {
                    let mut ids = Vec::with_capacity(50_000);
                    for _ in 0..50_000 {
                        ids.push(cursor.next(1).unwrap());
                    }
                    ids
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            let ids = handle.join().unwrap();
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
            all.extend(ids);
        }
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
        assert!(all.iter().all(|&id| parts(id).1 == 1000));
    }
}
