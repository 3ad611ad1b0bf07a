//! The per-instance snowflake sequence: a logical millisecond clock plus the step-offset
//! sequence within each millisecond.
//!
//! Within one millisecond the sequence field runs `offset, offset + step, offset + 2·step, …`
//! (the *index* `k` counts these). Rules, each chosen so that nothing ever blocks:
//! - a new millisecond continues the index where the last one stopped (wrapping to 0 at the
//!   top), so that under low traffic consecutive IDs do not all share their low bits;
//! - within a millisecond the index only grows; when it would pass the top, the sequence
//!   moves to the next millisecond at once ("borrows" it) instead of waiting;
//! - when the wall clock is behind the last issued millisecond (it stepped back, or earlier
//!   calls borrowed), counting goes on from the last issued millisecond;
//! - the logical clock may always reach `max_drift_ms` past the wall clock; beyond that it
//!   advances at real-time pace: its *allowance* grows by one millisecond per millisecond of
//!   a monotonic clock, whatever the wall clock does. So a wall clock that jumped forward and
//!   back, or a restart while the clock ran ahead, never stops the node: it keeps issuing at
//!   least one millisecond's sequence per elapsed millisecond, and its IDs carry times ahead
//!   of the wall clock until the wall clock catches up;
//! - a request is refused, changing nothing, only if its last ID would pass the allowance
//!   (a burst), or the end of the layout's time field.

use crate::{Config, IdError};

/// The largest COUNT one snowflake call may ask for. A reply of this many integers is a
/// few megabytes and a few milliseconds of work: larger batches belong in several calls.
pub const MAX_SNOWFLAKE_COUNT: u64 = 100_000;

/// A point in the instance's sequence: a logical time unit (a millisecond by default) and
/// an index within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// The time field: time units since the layout's epoch.
    pub time: u64,
    /// Which of the unit's sequence values: the sequence field is `offset + index * step`.
    pub index: u64,
}

/// What the instance's clocks read at a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// The wall clock, unix ms: the time IDs carry.
    pub wall_unix_ms: u64,
    /// A monotonic clock in ms, from any origin: how much time really passed, whatever the
    /// wall clock did.
    pub monotonic_ms: u64,
}

impl From<u64> for Now {
    /// A reading where the monotonic clock is the wall clock (for tests and callers whose
    /// wall clock only moves forward).
    fn from(wall_unix_ms: u64) -> Now {
        Now {
            wall_unix_ms,
            monotonic_ms: wall_unix_ms,
        }
    }
}

/// The instance's clocks as one call sees them. The wall clock is read once per call; the
/// monotonic clock is asked only when the answer depends on it — past the drift bound, and
/// once per wall-clock millisecond to record the pace — because a clock read is a
/// noticeable share of a call (about 25–35 ns through the vDSO, against about 1 µs for a
/// whole pipelined request). [`Now`] is a pair of readings taken beforehand.
pub trait Clocks {
    /// The wall clock, unix ms, as read for this call (the same value every time).
    fn wall_unix_ms(&self) -> u64;
    /// A monotonic clock in ms, read now (see [`Now::monotonic_ms`]).
    fn monotonic_ms(&self) -> u64;
}

impl Clocks for Now {
    fn wall_unix_ms(&self) -> u64 {
        self.wall_unix_ms
    }

    fn monotonic_ms(&self) -> u64 {
        self.monotonic_ms
    }
}

/// A wall clock reading whose monotonic clock is the wall clock, as [`Now::from`] a `u64`
/// (for tests and callers whose wall clock only moves forward).
impl Clocks for u64 {
    fn wall_unix_ms(&self) -> u64 {
        *self
    }

    fn monotonic_ms(&self) -> u64 {
        *self
    }
}

impl<C: Clocks> Clocks for &C {
    fn wall_unix_ms(&self) -> u64 {
        (*self).wall_unix_ms()
    }

    fn monotonic_ms(&self) -> u64 {
        (*self).monotonic_ms()
    }
}

/// The allowance of the logical clock at some moment: up to which millisecond it could
/// issue then. It grows by one millisecond per monotonic millisecond from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pace {
    allowed_ms: u64,
    at_monotonic_ms: u64,
}

/// What one call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// How many IDs, from 1 to [`MAX_SNOWFLAKE_COUNT`].
    pub count: u64,
    /// The shard field of every ID in the batch.
    pub shard: u64,
    /// The last ID recorded for the key, if any: every new ID must be above it.
    pub above: Option<u64>,
}

/// A batch of IDs handed out by one call: `count` consecutive positions from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Position of the first ID.
    pub first: Position,
    /// Position of the last ID.
    pub last: Position,
    /// Number of IDs.
    pub count: u64,
    /// Shard field of every ID.
    pub shard: u64,
    /// Milliseconds the logical clock entered ahead of the wall clock for this batch.
    pub borrowed_ms: u64,
    /// Whether this call saw the wall clock lower than the previous call did.
    pub clock_stepped_back: bool,
    composer: Composer,
    ids_per_ms: u64,
}

impl Batch {
    /// The IDs, strictly increasing.
    pub fn ids(&self) -> BatchIds {
        BatchIds {
            position: self.first,
            remaining: self.count,
            shard: self.shard,
            ids_per_ms: self.ids_per_ms,
            composer: self.composer,
        }
    }

    /// The first (smallest) ID of the batch.
    pub fn first_id(&self) -> u64 {
        self.composer.id(self.first, self.shard)
    }

    /// The last (largest) ID of the batch: what the key records.
    pub fn last_id(&self) -> u64 {
        self.composer.id(self.last, self.shard)
    }
}

/// Iterator over the IDs of a [`Batch`].
#[derive(Debug, Clone)]
pub struct BatchIds {
    position: Position,
    remaining: u64,
    shard: u64,
    ids_per_ms: u64,
    composer: Composer,
}

impl Iterator for BatchIds {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.remaining == 0 {
            return None;
        }
        let id = self.composer.id(self.position, self.shard);
        self.remaining -= 1;
        self.position.index += 1;
        if self.position.index == self.ids_per_ms {
            self.position = Position {
                time: self.position.time + 1,
                index: 0,
            };
        }
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for BatchIds {}

/// What composing an ID from a position needs, copied into each batch instead of the whole
/// configuration (a batch is returned by value on every call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Composer {
    offset: u64,
    step: u64,
    time_shift: u32,
    shard_shift: u32,
}

impl Composer {
    fn new(config: &Config) -> Self {
        Composer {
            offset: config.identity.offset,
            step: config.identity.step,
            time_shift: config.layout.shard_bits + config.layout.sequence_bits,
            shard_shift: config.layout.sequence_bits,
        }
    }

    /// The ID at `position` with `shard`: what `Layout::compose` makes of the position's
    /// sequence value, `offset + index * step`.
    fn id(&self, position: Position, shard: u64) -> u64 {
        (position.time << self.time_shift)
            | (shard << self.shard_shift)
            | (self.offset + position.index * self.step)
    }
}

/// The snowflake state of one instance, shared by all keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnowflakeSequence {
    config: Config,
    composer: Composer,
    ids_per_ms: u64,
    /// Position of the last ID issued (or the floor restored from persisted data).
    last: Option<Position>,
    /// Wall clock (ms since epoch) seen by the last successful call, to notice step-backs.
    last_seen_wall_ms: Option<u64>,
    /// The wall millisecond (since epoch) in which [`SnowflakeSequence::issue_one_within`]
    /// may continue `last`'s time unit: the one the last call of the general rule saw, if
    /// that call left `last` in a unit the wall clock had not passed, inside the drift bound
    /// and the time field. Worked out once per call of the general rule rather than on
    /// every call of the fast path; cleared when `last` moves otherwise.
    quick_wall_ms: Option<u64>,
    /// Until when (wall ms since epoch) the restart fence keeps the clock ahead.
    restart_fence_until_ms: Option<u64>,
    /// The real-time pace at which the logical clock may run past `max_drift_ms`.
    pace: Option<Pace>,
}

impl SnowflakeSequence {
    /// A sequence that has issued nothing yet. The config must have passed
    /// [`Config::validate`].
    pub fn new(config: Config) -> Self {
        SnowflakeSequence {
            config,
            composer: Composer::new(&config),
            ids_per_ms: config.ids_per_unit(),
            last: None,
            last_seen_wall_ms: None,
            quick_wall_ms: None,
            restart_fence_until_ms: None,
            pace: None,
        }
    }

    /// Applies the restart fence at start, if configured: nothing up to `max_drift_ms - 1`
    /// ms past `wall_unix_ms` is issued. An ID issued before a crash was at most `max_drift_ms`
    /// (≤ the fence) ahead of the wall clock then, and a restart takes at least a
    /// millisecond, so IDs lost with an unflushed tail of writes are never issued again —
    /// provided the wall clock did not move back across the restart (persisted floors cover
    /// that case for what reached disk).
    pub fn apply_restart_fence(&mut self, now: impl Into<Now>) {
        if !self.config.restart_fence {
            return;
        }
        let now = now.into();
        let fence = self.config.max_drift_ms;
        let wall = self.wall_ms(now.wall_unix_ms);
        self.raise_floor(self.units(wall + fence - 1), now.monotonic_ms);
        self.restart_fence_until_ms = Some(wall + fence);
    }

    /// The configuration this sequence issues under.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Position of the last ID issued, or of the restored floor.
    pub fn last_position(&self) -> Option<Position> {
        self.last
    }

    /// How far, in ms, the logical clock is ahead of `wall_unix_ms` (0 when behind).
    pub fn ahead_of_wall_ms(&self, wall_unix_ms: u64) -> u64 {
        let wall = self.wall_ms(wall_unix_ms);
        self.last
            .map_or(0, |p| self.ms(p.time).saturating_sub(wall))
    }

    /// Marks every position up to the end of time unit `time` (the time field) as used, so
    /// nothing at or before it is issued again. Used when restoring state (loaded keys,
    /// replicated writes, restart fences). Never moves the sequence backwards.
    ///
    /// The allowance is raised with it, to the unit after the floor as of `monotonic_ms`: a
    /// floor far ahead of the wall clock (a restart while the clock ran ahead) is then
    /// continued from at real-time pace, not waited out.
    pub fn raise_floor(&mut self, time: u64, monotonic_ms: u64) {
        let floor = Position {
            time,
            index: self.ids_per_ms - 1,
        };
        if self.last.is_none_or(|last| last < floor) {
            self.last = Some(floor);
            self.quick_wall_ms = None;
            let allowed_ms = self.ms(time + 1);
            if self.pace.is_none_or(|pace| {
                pace.allowed_ms + monotonic_ms.saturating_sub(pace.at_monotonic_ms) < allowed_ms
            }) {
                self.pace = Some(Pace {
                    allowed_ms,
                    at_monotonic_ms: monotonic_ms,
                });
            }
        }
    }

    /// Up to which millisecond (since the epoch) the logical clock may issue now: the drift
    /// bound past the wall clock, or the real-time pace from the last allowance, whichever
    /// is later. (It may issue in every time unit that starts at or before it.)
    fn allowance_ms(&self, wall: u64, monotonic_ms: u64) -> u64 {
        let bound = wall.saturating_add(self.config.max_drift_ms);
        self.pace.map_or(bound, |pace| {
            bound.max(pace.allowed_ms + monotonic_ms.saturating_sub(pace.at_monotonic_ms))
        })
    }

    /// Whether the logical clock runs past the drift bound at `now`, carried by real-time
    /// pace (the wall clock stepped back, or the instance restarted while ahead).
    pub fn is_pacing(&self, now: impl Into<Now>) -> bool {
        let wall = self.wall_ms(now.into().wall_unix_ms);
        let bound = self.units(wall.saturating_add(self.config.max_drift_ms));
        self.last.is_some_and(|last| last.time > bound)
    }

    /// Milliseconds since the layout's epoch.
    fn wall_ms(&self, wall_unix_ms: u64) -> u64 {
        wall_unix_ms.saturating_sub(self.config.layout.epoch_unix_ms)
    }

    /// The time unit `ms_since_epoch` falls in.
    fn units(&self, ms_since_epoch: u64) -> u64 {
        self.config.layout.units_of_ms(ms_since_epoch)
    }

    /// Milliseconds since the epoch at which time unit `units` starts.
    fn ms(&self, units: u64) -> u64 {
        self.config.layout.ms_of_units(units)
    }

    /// Hands out `request.count` IDs at the time `clocks` tell (the monotonic clock is read
    /// only when needed), or refuses and changes nothing.
    pub fn issue(&mut self, clocks: impl Clocks, request: Request) -> Result<Batch, IdError> {
        let wall_unix_ms = clocks.wall_unix_ms();
        let layout = &self.config.layout;
        if request.count == 0 || request.count > MAX_SNOWFLAKE_COUNT {
            return Err(IdError::CountOutOfRange {
                count: request.count,
                max: MAX_SNOWFLAKE_COUNT,
            });
        }
        if request.shard >= layout.shard_values() {
            return Err(IdError::ShardOutOfRange {
                shard: request.shard,
                shard_values: layout.shard_values(),
            });
        }
        let wall = self.wall_ms(wall_unix_ms);
        let wall_units = self.units(wall);
        let mut first = self.next_position(wall_units);
        if let Some(above) = request.above {
            if first.time >= layout.time_values() || self.composer.id(first, request.shard) <= above
            {
                // Nothing at or before the key's last time unit can be above it for every
                // shard; the unit after it is unused by this instance (the candidate was not
                // above the key, so it was not later than that unit).
                first = first.max(Position {
                    time: layout.time_of(above) + 1,
                    index: 0,
                });
            }
        }
        let last_index = first.index + (request.count - 1);
        // Most calls stay in their millisecond: no 64-bit division (tens of cycles) then.
        let last = if last_index < self.ids_per_ms {
            Position {
                time: first.time,
                index: last_index,
            }
        } else {
            Position {
                time: first.time + last_index / self.ids_per_ms,
                index: last_index % self.ids_per_ms,
            }
        };
        if last.time >= layout.time_values() {
            return Err(IdError::TimeExhausted {
                expires_unix_ms: layout.expires_unix_ms(),
            });
        }
        // Within the drift bound the allowance (at least the bound) cannot refuse, so the
        // monotonic clock is read only past it, or to record the pace in a new millisecond.
        let bound = wall.saturating_add(self.config.max_drift_ms);
        let monotonic_ms = (last.time > self.units(bound) || self.last_seen_wall_ms != Some(wall))
            .then(|| clocks.monotonic_ms());
        let allowance =
            monotonic_ms.map_or(bound, |monotonic_ms| self.allowance_ms(wall, monotonic_ms));
        if last.time > self.units(allowance) {
            let last_ms = self.ms(last.time);
            return Err(IdError::Drift {
                ahead_ms: last_ms.saturating_sub(wall),
                limit_ms: self.config.max_drift_ms,
                // The unit starts after the allowance: it is reached that much later.
                retry_in_ms: last_ms - allowance,
                restart_fence: self
                    .restart_fence_until_ms
                    .is_some_and(|until| wall < until),
            });
        }
        let reached_before = self.last.map_or(wall_units, |p| p.time.max(wall_units));
        let batch = Batch {
            first,
            last,
            count: request.count,
            shard: request.shard,
            borrowed_ms: self.ms(last.time.saturating_sub(reached_before)),
            clock_stepped_back: self.last_seen_wall_ms.is_some_and(|seen| wall < seen),
            composer: self.composer,
            ids_per_ms: self.ids_per_ms,
        };
        self.last = Some(last);
        self.last_seen_wall_ms = Some(wall);
        self.quick_wall_ms = (self.units(wall) <= last.time
            && last.time <= self.units(wall.saturating_add(self.config.max_drift_ms))
            && last.time < self.config.layout.time_values())
        .then_some(wall);
        // The pace is recorded from fresh monotonic readings only: at least once per wall
        // millisecond while calls come, so it never lags real time by more than that.
        if let Some(at_monotonic_ms) = monotonic_ms {
            self.pace = Some(Pace {
                allowed_ms: allowance,
                at_monotonic_ms,
            });
        }
        Ok(batch)
    }

    /// One ID above `above` and at most `bound`, at `wall_unix_ms`, when the call is the
    /// common one: in the same wall millisecond as the previous call, not borrowing a
    /// millisecond ahead, inside the drift bound. `None` otherwise, with nothing changed:
    /// the caller then takes [`SnowflakeSequence::issue`], whose result for such a
    /// call this equals (property-tested), without its bookkeeping (no batch, no clock
    /// other than the wall, no pace to record).
    #[inline]
    pub(crate) fn issue_one_within(
        &mut self,
        wall_unix_ms: u64,
        shard: u64,
        above: u64,
        bound: u64,
    ) -> Option<u64> {
        let layout = &self.config.layout;
        let wall = self.wall_ms(wall_unix_ms);
        let last = self.last?;
        // The next index in the last ID's time unit, which the wall clock has not passed:
        // where `next_position` puts it, with nothing borrowed beyond what already was.
        // (In a new unit the previous call saw another wall millisecond, so the general
        // rule answers that call anyway.)
        if self.quick_wall_ms != Some(wall)
            || last.index + 1 >= self.ids_per_ms
            || shard >= layout.shard_values()
        {
            return None;
        }
        let next = Position {
            time: last.time,
            index: last.index + 1,
        };
        let id = self.composer.id(next, shard);
        if id <= above || id > bound {
            return None;
        }
        self.last = Some(next);
        Some(id)
    }

    /// Where the next ID goes at wall-clock unit `wall_units`, before any per-key adjustment.
    fn next_position(&self, wall_units: u64) -> Position {
        match self.last {
            None => Position {
                time: wall_units,
                index: 0,
            },
            // The same as `(last.index + 1) % ids_per_ms`, without a division per call.
            Some(last) if wall_units > last.time => Position {
                time: wall_units,
                index: if last.index + 1 < self.ids_per_ms {
                    last.index + 1
                } else {
                    0
                },
            },
            Some(last) if last.index + 1 < self.ids_per_ms => Position {
                time: last.time,
                index: last.index + 1,
            },
            Some(last) => Position {
                time: last.time + 1,
                index: 0,
            },
        }
    }
}
