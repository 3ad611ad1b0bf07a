//! Write-free snowflakes: what a snowflake key records, and when it must be written.
//!
//! A key records a *bound* — every ID issued for the key so far is at most `bound` — and
//! the *owner*: the incarnation of the instance that issued under that bound (a token new
//! at each start and each promotion). The owner also keeps the key's last ID, in memory
//! only. Then:
//! - the owner, knowing the key's last ID, issues above it; while its IDs stay within the
//!   bound it writes and replicates nothing;
//! - the owner that lost the key's last ID (a `DEBUG RELOAD`: the data was reloaded, the
//!   instance's sequence was not) issues above its own last millisecond, which is above
//!   everything it issued;
//! - anyone else (a restarted or promoted instance, a failed-back master, the target of a
//!   `RESTORE`/`MIGRATE`, after an operator's `SNOWFLAKE.SETBOUND`) issues above the bound,
//!   which is above every ID issued for the key, continuing from there at real-time pace
//!   like from any raised floor;
//! - whenever an ID would pass the bound, or the issuer is not the owner, the call extends
//!   the bound to the end of the millisecond `lease_ms` after its last ID and records itself
//!   as owner: that record is the one write (and replicated effect) per lease.
//!
//! The bound is written before the IDs under it are answered, so replicas and the AOF hold
//! a bound on everything handed out, at the cost of one small write per key per lease.

use crate::{Batch, Clocks, IdError, Now, Request, SnowflakeSequence};

/// What a snowflake key holds in the dataset (RDB, replicas, AOF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRecord {
    /// Every ID issued for the key is at most this.
    pub bound: u64,
    /// The incarnation that issued under the bound; 0 for nobody (a bound set by an operator
    /// or loaded from an older format).
    pub owner: u64,
}

/// A key as the issuing instance sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyState {
    /// The key's record, if the key exists.
    pub record: Option<KeyRecord>,
    /// The key's last ID, kept in memory by its owner only (lost on reload).
    pub last_issued: Option<u64>,
}

/// The result of issuing for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyIssue {
    /// The IDs.
    pub batch: Batch,
    /// The new record to write and replicate, or `None`: nothing to write.
    pub extend: Option<KeyRecord>,
}

impl SnowflakeSequence {
    /// Takes in a key's bound recorded elsewhere, so that nothing at or before its
    /// millisecond is issued again by this instance.
    ///
    /// A bound that arrives by replication or from a file (`from_operator` false) is accepted
    /// whatever the clock says: IDs up to it may exist. An operator's bound is refused,
    /// changing nothing, when its millisecond is more than `max_drift_ms` ahead of the wall
    /// clock — it would move this instance's clock that far ahead.
    pub fn accept_bound(
        &mut self,
        bound: u64,
        now: impl Into<Now>,
        from_operator: bool,
    ) -> Result<(), IdError> {
        let now = now.into();
        let layout = self.config().layout;
        let time = layout.time_of(bound);
        let time_ms = layout.ms_of_units(time);
        let wall_ms = now.wall_unix_ms.saturating_sub(layout.epoch_unix_ms);
        let limit_ms = self.config().max_drift_ms;
        if from_operator && time_ms > wall_ms.saturating_add(limit_ms) {
            return Err(IdError::BoundAhead {
                bound,
                ahead_ms: time_ms - wall_ms,
                limit_ms,
            });
        }
        self.raise_floor(time, now.monotonic_ms);
        Ok(())
    }

    /// One ID with `shard` for a key in `state`, as incarnation `me`, at `wall_unix_ms`, on
    /// the path almost every call takes: the key is `me`'s, its last ID is known, and the
    /// new ID stays under its bound in the same wall millisecond as the previous call, so
    /// nothing is written. `None` when that does not hold, with nothing changed: then
    /// [`SnowflakeSequence::issue_for_key`] decides, and for the calls this answers it
    /// gives the same ID and the same state (property-tested).
    #[inline]
    pub fn issue_one_owned(
        &mut self,
        wall_unix_ms: u64,
        shard: u64,
        state: KeyState,
        me: u64,
    ) -> Option<u64> {
        let record = state
            .record
            .filter(|record| record.owner == me && me != 0)?;
        let above = state.last_issued?;
        self.issue_one_within(wall_unix_ms, shard, above, record.bound)
    }

    /// Issues `count` IDs with `shard` for a key in `state`, as incarnation `me`, extending
    /// the key's bound by `lease_ms` when it must be extended. Refuses, changing nothing, as
    /// [`SnowflakeSequence::issue`] does.
    pub fn issue_for_key(
        &mut self,
        clocks: impl Clocks,
        count: u64,
        shard: u64,
        state: KeyState,
        me: u64,
        lease_ms: u64,
    ) -> Result<KeyIssue, IdError> {
        let layout = self.config().layout;
        let last_of_unit = |time: u64| {
            layout.compose(
                time,
                layout.shard_values() - 1,
                layout.sequence_values() - 1,
            )
        };
        let mine = state
            .record
            .is_some_and(|record| record.owner == me && me != 0);
        // Above what: the key's last ID if we know it; if we issued under the bound but lost
        // the last ID (a reload), everything this incarnation issued is at or before its
        // own last millisecond; anyone else continues above the bound.
        let above = match (mine, state.last_issued, self.last_position()) {
            (true, Some(last), _) => Some(last),
            (true, None, Some(position)) => Some(last_of_unit(position.time)),
            _ => state.record.map(|record| record.bound),
        };
        let request = Request {
            count,
            shard,
            above,
        };
        let batch = match state.record.filter(|_| !mine) {
            Some(record) => {
                // Taking the key over: its bound may be up to a lease past the drift bound
                // of the instance that wrote it. Continue from above it at real-time pace
                // (as from any raised floor) instead of refusing until the clock gets there.
                // On a copy, so that a refused call changes nothing.
                let mut taken_over = self.clone();
                taken_over.raise_floor(layout.time_of(record.bound), clocks.monotonic_ms());
                let batch = taken_over.issue(&clocks, request)?;
                *self = taken_over;
                batch
            }
            None => self.issue(&clocks, request)?,
        };
        let owned = state.last_issued.filter(|_| mine);
        let within = |record: KeyRecord| batch.last_id() <= record.bound;
        if owned.is_some() && state.record.is_some_and(within) {
            return Ok(KeyIssue {
                batch,
                extend: None,
            });
        }
        let lease = layout.units_of_ms(lease_ms).max(1);
        let bound = last_of_unit((batch.last.time + lease).min(layout.time_values() - 1));
        Ok(KeyIssue {
            batch,
            extend: Some(KeyRecord { bound, owner: me }),
        })
    }
}
