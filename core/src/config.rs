//! The deployment settings every instance is started with, and the rules that make a
//! combination of them safe.

use std::fmt;

use crate::Layout;

/// One year in milliseconds: a layout must be good for at least this long after load.
pub const MIN_LAYOUT_LIFETIME_MS: u64 = 365 * 86_400_000;

/// Where an instance sits in the deployment: all instances share `step`, each has its own
/// `offset` in `[0, step)`. Values an instance issues are all `≡ offset (mod step)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The number of residue classes; at least the number of instances that may ever issue
    /// IDs (masters and replicas). Defaults to 1.
    pub step: u64,
    /// This instance's residue class. Defaults to 0.
    pub offset: u64,
}

impl Default for Identity {
    fn default() -> Self {
        Identity { step: 1, offset: 0 }
    }
}

impl Identity {
    /// Whether `value` is in this instance's residue class (`≡ offset (mod step)`): one this
    /// instance may have handed out, and no other instance can have.
    pub fn owns(&self, value: i64) -> bool {
        self.step > 0
            && i128::from(value).rem_euclid(i128::from(self.step)) == i128::from(self.offset)
    }
}

/// The default `segment_fence`: values (in the counter's units, so `fence / step` of this
/// instance's own) a segment key skips on its first use after a start. It must exceed what
/// one key can hand out in the window a crash can lose: about 16 million per second over
/// one minute (RDB snapshots under load), or 270 thousand per second over an hour. At a
/// billion per restart a counter still has over nine billion restarts before `i64` ends.
pub const DEFAULT_SEGMENT_FENCE: u64 = 1_000_000_000;

/// Everything an instance needs to issue IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Step and offset.
    pub identity: Identity,
    /// Snowflake field widths and epoch.
    pub layout: Layout,
    /// The width IDs must have; the layout's widths must add up to it. Defaults to 63
    /// (positive signed 64-bit integers); 53 keeps IDs exact in JavaScript numbers.
    pub id_bits: u32,
    /// The shard used when a call gives no SHARD. Defaults to 0.
    pub default_shard: u64,
    /// How far, in ms, the snowflake clock may run ahead of the wall clock (by borrowing
    /// milliseconds, or because the wall clock stepped back) before calls are refused.
    /// Defaults to 2000.
    pub max_drift_ms: u64,
    /// Whether, after a start, the snowflake clock begins `max_drift_ms - 1` ahead of the
    /// wall clock, so that IDs issued before a crash but never written to disk — at most
    /// `max_drift_ms` ahead when issued — are not issued again. Turning it off is safe only
    /// when every write is on disk before it is answered (`appendfsync always`). Defaults
    /// to true.
    pub restart_fence: bool,
    /// How many values a segment counter skips on its first use after this instance
    /// started, so a tail of values handed out but lost by the persistence in a crash is
    /// never issued twice. Defaults to [`DEFAULT_SEGMENT_FENCE`]; 0 is the *dense* mode, safe
    /// only when every write reaches disk before it is answered (`appendfsync always`).
    pub segment_fence: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            identity: Identity::default(),
            layout: Layout::default(),
            id_bits: 63,
            default_shard: 0,
            max_drift_ms: 2000,
            restart_fence: true,
            segment_fence: DEFAULT_SEGMENT_FENCE,
        }
    }
}

/// A configuration that cannot be used, with the reason and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The widths an ID may have: 63 (positive signed 64-bit) down to 32.
    pub const ID_BITS_RANGE: std::ops::RangeInclusive<u32> = 32..=63;

    /// Checks every rule that keeps IDs unique and the layout usable, given the wall clock
    /// `now_unix_ms` at load time. Returns the first rule broken, saying how to fix it.
    pub fn validate(&self, now_unix_ms: u64) -> Result<(), ConfigError> {
        let Identity { step, offset } = self.identity;
        let id_bits = self.id_bits;
        let layout = &self.layout;
        let fail = |msg: String| Err(ConfigError(msg));
        if step == 0 {
            return fail("step is 0; it must be at least 1 (1 for a single instance)".into());
        }
        if offset >= step {
            return fail(format!(
                "offset {offset} is not below step {step}: each instance needs its own offset \
                 from 0 to {}; give this instance a free offset in that range, or raise step \
                 on every instance of the deployment",
                step - 1
            ));
        }
        if !Self::ID_BITS_RANGE.contains(&id_bits) {
            return fail(format!("id-bits {id_bits} is not between 32 and 63"));
        }
        let unit = layout.time_unit_ms;
        if unit == 0 || 1000 % unit != 0 {
            return fail(format!(
                "time-unit-ms {unit} does not divide a second; use 1 (milliseconds, the \
                 default), 10, 100, 1000 or another divisor of 1000"
            ));
        }
        if layout.time_bits == 0 || layout.sequence_bits == 0 {
            return fail(format!(
                "time-bits ({}) and sequence-bits ({}) must each be at least 1",
                layout.time_bits, layout.sequence_bits
            ));
        }
        if layout.id_bits() != id_bits {
            return fail(format!(
                "time-bits {} + shard-bits {} + sequence-bits {} = {}, but IDs have {id_bits} \
                 bits (id-bits); change the widths so they add up to {id_bits}",
                layout.time_bits,
                layout.shard_bits,
                layout.sequence_bits,
                layout.id_bits()
            ));
        }
        if step > layout.sequence_values() {
            return fail(format!(
                "step {step} is larger than the {} sequence values of a time unit \
                 (sequence-bits {}): instances with an offset of {} or more could never issue \
                 a snowflake ID; lower step or raise sequence-bits",
                layout.sequence_values(),
                layout.sequence_bits,
                layout.sequence_values()
            ));
        }
        if layout.epoch_unix_ms > now_unix_ms {
            return fail(format!(
                "epoch {} ({}) is in the future (now is {}); use a past epoch",
                layout.epoch_unix_ms,
                crate::utc::format_unix_ms(layout.epoch_unix_ms),
                crate::utc::format_unix_ms(now_unix_ms)
            ));
        }
        let expires = layout.expires_unix_ms();
        if expires < now_unix_ms.saturating_add(MIN_LAYOUT_LIFETIME_MS) {
            return fail(format!(
                "the {}-bit time field counted from epoch {} runs out on {}, less than a year \
                 from now; use a later epoch or more time-bits",
                layout.time_bits,
                crate::utc::format_date(layout.epoch_unix_ms),
                crate::utc::format_date(expires)
            ));
        }
        if self.default_shard >= layout.shard_values() {
            return fail(format!(
                "default-shard {} does not fit {} shard bits (0 to {})",
                self.default_shard,
                layout.shard_bits,
                layout.shard_values() - 1
            ));
        }
        if self.max_drift_ms < unit {
            return fail(format!(
                "max-drift-ms {} is less than one time unit ({unit} ms): the clock could \
                 never borrow a unit, so every burst above one unit's sequence would be \
                 refused; use at least {unit}",
                self.max_drift_ms
            ));
        }
        Ok(())
    }

    /// How far past its last ID a key's bound is extended: half of `max_drift_ms` (at least
    /// 1 ms; the sequence rounds it down to whole time units, at least one). A key is written at most about once per lease while in use; an instance that
    /// takes over a key (after a restart or failover) starts above the bound, so at most
    /// this far ahead of the key's last ID — inside the drift bound.
    pub fn snowflake_lease_ms(&self) -> u64 {
        (self.max_drift_ms / 2).max(1)
    }

    /// How many snowflake IDs this instance can issue in one time unit (one millisecond by
    /// default): the sequence values `offset, offset + step, …` below `2^sequence_bits`.
    pub fn ids_per_unit(&self) -> u64 {
        let Identity { step, offset } = self.identity;
        (self.layout.sequence_values() - 1 - offset) / step + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_790_000_000_000; // 2026-09-21

    fn check(config: Config) -> Result<(), ConfigError> {
        config.validate(NOW)
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(check(Config::default()), Ok(()));
        assert_eq!(Config::default().ids_per_unit(), 4096);
    }

    #[test]
    fn an_identity_owns_exactly_its_residue_class() {
        let identity = Identity { step: 4, offset: 1 };
        let owned: Vec<i64> = (-6..=9).filter(|&v| identity.owns(v)).collect();
        assert_eq!(owned, [-3, 1, 5, 9]);
        assert!(Identity { step: 4, offset: 3 }.owns(i64::MAX));
        assert!(!Identity { step: 4, offset: 2 }.owns(i64::MAX));
        assert!(Identity::default().owns(i64::MIN));
    }

    /// The reason `validate` gives for the default config changed by `edit`.
    fn refusal(edit: impl FnOnce(&mut Config)) -> String {
        let mut config = Config::default();
        edit(&mut config);
        check(config).unwrap_err().0
    }

    #[test]
    fn each_rule_is_enforced_with_its_reason() {
        let offset = refusal(|c| c.identity = Identity { step: 6, offset: 6 });
        assert!(offset.contains("offset 6 is not below step 6"), "{offset}");
        assert!(refusal(|c| c.identity.step = 0).contains("step is 0"));
        assert!(refusal(|c| c.layout.shard_bits = 11).contains("= 64, but IDs have 63"));
        let step = refusal(|c| {
            c.identity = Identity {
                step: 4097,
                offset: 0,
            }
        });
        assert!(step.contains("larger than the 4096"), "{step}");
        assert!(refusal(|c| c.layout.epoch_unix_ms = NOW + 1).contains("in the future"));
        // 35 bits of ms is about 397 days: from an epoch 60 days ago, it ends within a year.
        let short = refusal(|c| {
            c.layout = Layout {
                time_bits: 35,
                shard_bits: 16,
                sequence_bits: 12,
                epoch_unix_ms: NOW - 60 * 86_400_000,
                time_unit_ms: 1,
            }
        });
        assert!(short.contains("less than a year"), "{short}");
        assert!(refusal(|c| c.default_shard = 1024).contains("default-shard 1024"));
        let drift = refusal(|c| c.max_drift_ms = 0);
        assert!(
            drift.contains("max-drift-ms 0 is less than one time unit"),
            "{drift}"
        );
        for unit in [0, 3, 7, 1001, 2000] {
            let bad = refusal(|c| c.layout.time_unit_ms = unit);
            assert!(bad.contains("does not divide a second"), "{bad}");
        }
        let seconds_drift = refusal(|c| {
            c.layout.time_unit_ms = 1000;
            c.max_drift_ms = 500;
        });
        assert!(
            seconds_drift.contains("less than one time unit (1000 ms)"),
            "{seconds_drift}"
        );
        let zero_time = refusal(|c| {
            c.layout.time_bits = 0;
            c.layout.shard_bits = 51;
        });
        assert!(zero_time.contains("at least 1"), "{zero_time}");
    }

    #[test]
    fn a_seconds_layout_with_many_shards_is_valid_for_decades() {
        // UidGenerator's shape: 31 bits of seconds (68 years), 65,536 shards.
        let c = Config {
            layout: Layout {
                time_bits: 31,
                shard_bits: 16,
                sequence_bits: 16,
                time_unit_ms: 1000,
                ..Layout::default()
            },
            ..Config::default()
        };
        assert_eq!(c.validate(NOW), Ok(()));
        assert_eq!(c.layout.shard_values(), 65_536);
        let years = (c.layout.expires_unix_ms() - c.layout.epoch_unix_ms) / (365 * 86_400_000);
        assert_eq!(years, 68);
        for unit in [1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500] {
            let c = Config {
                layout: Layout {
                    time_unit_ms: unit,
                    ..Layout::default()
                },
                ..Config::default()
            };
            assert_eq!(c.validate(NOW), Ok(()), "unit {unit}");
        }
    }

    #[test]
    fn javascript_layout_is_valid_at_53_bits() {
        let mut c = Config {
            layout: Layout {
                shard_bits: 2,
                sequence_bits: 10,
                ..Layout::default()
            },
            ..Config::default()
        };
        assert!(c.validate(NOW).is_err());
        c.id_bits = 53;
        assert_eq!(c.validate(NOW), Ok(()));
    }

    #[test]
    fn ids_per_unit_counts_the_residue_class() {
        let mut c = Config {
            identity: Identity { step: 6, offset: 0 },
            ..Config::default()
        };
        assert_eq!(c.ids_per_unit(), 683); // 0, 6, …, 4092
        c.identity.offset = 5;
        assert_eq!(c.ids_per_unit(), 682); // 5, 11, …, 4091
        c.identity = Identity {
            step: 4096,
            offset: 4095,
        };
        assert_eq!(c.ids_per_unit(), 1);
    }
}
