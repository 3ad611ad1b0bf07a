//! The module's settings (`idgen.*`), each declared once: its name, type, default, range,
//! whether it may change at runtime and whether it is listed. The module registers them
//! with Redis (`CONFIG`), reads its load arguments against them and shows them in
//! `INFO idgen` from this table; [`Config::from_settings`] builds the configuration from it.
//!
//! Adding a setting is one entry in [`settings!`]'s list below plus its use.

use crate::config::{Config, Identity};
use crate::layout::{Layout, DEFAULT_EPOCH_UNIX_MS};
use crate::DEFAULT_SEGMENT_FENCE;

/// The values a setting takes. Every value is held as an `i64`: a yes/no setting as 0 or 1,
/// a choice as the index of its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// An integer in `[min, max]` (Redis refuses others in `CONFIG SET` and config files).
    Integer {
        /// The smallest value accepted.
        min: i64,
        /// The largest value accepted.
        max: i64,
    },
    /// `yes` or `no`.
    YesNo,
    /// One of these words.
    Choice(&'static [&'static str]),
}

/// One setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The name after `idgen.`.
    pub name: &'static str,
    /// Its type and range.
    pub kind: SettingKind,
    /// The value when none is given (yes/no: 1 or 0; choice: the word's index).
    pub default: i64,
    /// Whether `CONFIG SET` may change it on a running server (then only with
    /// `enable-protected-configs`); identity and layout never change after load.
    pub runtime: bool,
    /// Whether `CONFIG GET idgen.*` and the module's error messages list it (debug settings
    /// are not).
    pub listed: bool,
    /// The field of `INFO idgen` that shows it, if any.
    pub info: Option<&'static str>,
}

impl Setting {
    const fn integer(name: &'static str, default: i64, info: Option<&'static str>) -> Self {
        Setting {
            name,
            kind: SettingKind::Integer {
                min: i64::MIN,
                max: i64::MAX,
            },
            default,
            runtime: false,
            listed: true,
            info,
        }
    }

    /// Reads a value given as text (a module argument), or says why it cannot be one.
    pub fn parse(&self, given: &[u8]) -> Result<i64, String> {
        let text = String::from_utf8_lossy(given);
        match self.kind {
            SettingKind::Integer { min, max } => match crate::parse_redis_integer(given) {
                Some(value) if (min..=max).contains(&value) => Ok(value),
                Some(_) => Err(format!(
                    "{} must be from {min} to {max}, got `{text}`",
                    self.name
                )),
                None => Err(format!("{} must be an integer, got `{text}`", self.name)),
            },
            SettingKind::YesNo => match given {
                b"yes" => Ok(1),
                b"no" => Ok(0),
                _ => Err(format!("{} must be yes or no, got `{text}`", self.name)),
            },
            SettingKind::Choice(words) => words
                .iter()
                .position(|word| word.as_bytes() == given)
                .map(|index| index as i64)
                .ok_or_else(|| {
                    format!("{} must be {}, got `{text}`", self.name, words.join(" or "))
                }),
        }
    }
}

macro_rules! settings {
    ($($(#[$doc:meta])* $id:ident = $setting:expr;)+) => {
        /// Names a setting: `SETTINGS[SettingId::Step as usize]`, or [`SettingId::setting`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum SettingId {
            $($(#[$doc])* $id,)+
        }

        /// Every setting, in [`SettingId`]'s order.
        pub const SETTINGS: &[Setting] = &[$($setting),+];
    };
}

settings! {
    /// `idgen.step`: the number of residue classes shared by the whole deployment.
    Step = Setting::integer("step", 1, Some("step"));
    /// `idgen.offset`: this instance's residue class, in `[0, step)`.
    Offset = Setting::integer("offset", 0, Some("offset"));
    /// `idgen.epoch`: unix ms at which snowflake time is zero.
    Epoch = Setting::integer("epoch", DEFAULT_EPOCH_UNIX_MS as i64, Some("epoch_ms"));
    /// `idgen.time-unit-ms`: milliseconds in one unit of the snowflake time field (1, or
    /// 10, 1000, any divisor of a second).
    TimeUnitMs = Setting::integer("time-unit-ms", 1, Some("time_unit_ms"));
    /// `idgen.time-bits`.
    TimeBits = Setting::integer("time-bits", 41, Some("time_bits"));
    /// `idgen.shard-bits`.
    ShardBits = Setting::integer("shard-bits", 10, Some("shard_bits"));
    /// `idgen.sequence-bits`.
    SequenceBits = Setting::integer("sequence-bits", 12, Some("sequence_bits"));
    /// `idgen.id-bits`: the width the three fields must add up to (63, or 53 for
    /// JavaScript).
    IdBits = Setting::integer("id-bits", 63, Some("id_bits"));
    /// `idgen.default-shard`: the shard used when a call gives no SHARD.
    DefaultShard = Setting::integer("default-shard", 0, Some("default_shard"));
    /// `idgen.max-drift-ms`: how far the snowflake clock may run ahead of the wall clock.
    MaxDriftMs = Setting::integer("max-drift-ms", 2000, Some("max_drift_ms"));
    /// `idgen.snowflake-restart-fence` (yes/no): whether snowflakes start `max-drift-ms`
    /// ahead after a start, so IDs lost in a crash are not issued again.
    RestartFence = Setting {
        kind: SettingKind::YesNo,
        ..Setting::integer("snowflake-restart-fence", 1, Some("snowflake_restart_fence"))
    };
    /// `idgen.segment-fence`: values a segment counter skips once after a start; 0 is the
    /// dense mode (safe only with `appendfsync always`).
    SegmentFence = Setting::integer("segment-fence", DEFAULT_SEGMENT_FENCE as i64, Some("segment_fence"));
    /// `idgen.identity-conflicts`: what a node does when the cluster bus shows it is the
    /// later node of an identity conflict: `refuse` to issue (the default) or `warn` and
    /// issue anyway.
    IdentityConflicts = Setting {
        kind: SettingKind::Choice(&["refuse", "warn"]),
        ..Setting::integer("identity-conflicts", 0, Some("identity_policy"))
    };
    /// `idgen.lease-workers`: shard values reserved at the top of the shard field for
    /// leased worker ids (`LEASE.ACQUIRE`); 0, the default, turns leases off.
    LeaseWorkers = Setting::integer("lease-workers", 0, None);
    /// `idgen.lease-max-ms`: the longest lease window a grant or renewal may reach past now.
    LeaseMaxMs = Setting::integer("lease-max-ms", 10_000, None);
    /// `idgen.debug-clock-offset-ms`: added to the wall clock the module reads, for tests
    /// that need a server whose clock is behind or ahead (at most 1,000 days either way);
    /// not listed, and changeable at runtime only with `enable-protected-configs yes`.
    DebugClockOffsetMs = Setting {
        kind: SettingKind::Integer { min: -DEBUG_CLOCK_RANGE_MS, max: DEBUG_CLOCK_RANGE_MS },
        runtime: true,
        listed: false,
        ..Setting::integer("debug-clock-offset-ms", 0, None)
    };
    /// `idgen.debug-lease-fence-off yes`: no lease fence at a start or a promotion. Only for
    /// the fault soak's control run, which must then find duplicates; not listed, and
    /// changeable at runtime only with `enable-protected-configs yes`.
    DebugLeaseFenceOff = Setting {
        kind: SettingKind::YesNo,
        runtime: true,
        listed: false,
        ..Setting::integer("debug-lease-fence-off", 0, None)
    };
    /// `idgen.debug-announce-future-record yes`: this node's identity announcements carry a
    /// higher format version and a record of a tag this release does not know, as a later
    /// release's would. Only for the test of a rolling upgrade to the next release; not
    /// listed, and changeable at runtime only with `enable-protected-configs yes`.
    DebugAnnounceFutureRecord = Setting {
        kind: SettingKind::YesNo,
        runtime: true,
        listed: false,
        ..Setting::integer("debug-announce-future-record", 0, None)
    };
}

/// How far (1,000 days, in ms) the debug clock offset may move the module's clock.
const DEBUG_CLOCK_RANGE_MS: i64 = 86_400_000_000;

impl SettingId {
    /// The setting's declaration.
    pub fn setting(self) -> &'static Setting {
        &SETTINGS[self as usize]
    }
}

/// The names of the listed settings, for error messages.
pub fn listed_names() -> Vec<&'static str> {
    SETTINGS
        .iter()
        .filter(|setting| setting.listed)
        .map(|setting| setting.name)
        .collect()
}

impl Config {
    /// The configuration from the settings' values (`value` gives each one's), or why a
    /// value cannot be used at all. Negative values and widths above 63 are caught here;
    /// the rules between values are [`Config::validate`]'s.
    pub fn from_settings(value: impl Fn(SettingId) -> i64) -> Result<Config, String> {
        let non_negative = |id: SettingId| non_negative(id, value(id));
        let width = |id: SettingId| {
            let bits = non_negative(id)?;
            u32::try_from(bits)
                .ok()
                .filter(|&bits| bits <= 63)
                .ok_or_else(|| {
                    format!(
                        "idgen.{} is {bits}; a width is at most 63 bits",
                        id.setting().name
                    )
                })
        };
        Ok(Config {
            identity: Identity {
                step: non_negative(SettingId::Step)?,
                offset: non_negative(SettingId::Offset)?,
            },
            layout: Layout {
                time_bits: width(SettingId::TimeBits)?,
                shard_bits: width(SettingId::ShardBits)?,
                sequence_bits: width(SettingId::SequenceBits)?,
                epoch_unix_ms: non_negative(SettingId::Epoch)?,
                time_unit_ms: non_negative(SettingId::TimeUnitMs)?,
            },
            id_bits: width(SettingId::IdBits)?,
            default_shard: non_negative(SettingId::DefaultShard)?,
            max_drift_ms: non_negative(SettingId::MaxDriftMs)?,
            restart_fence: value(SettingId::RestartFence) != 0,
            segment_fence: non_negative(SettingId::SegmentFence)?,
        })
    }
}

/// A setting's value as a count, or the error naming it.
pub fn non_negative(id: SettingId, value: i64) -> Result<u64, String> {
    u64::try_from(value).map_err(|_| {
        format!(
            "idgen.{} is {value}; it cannot be negative",
            id.setting().name
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults(id: SettingId) -> i64 {
        id.setting().default
    }

    #[test]
    fn the_defaults_make_the_default_config() {
        assert_eq!(Config::from_settings(defaults), Ok(Config::default()));
    }

    #[test]
    fn the_ids_and_the_table_agree() {
        assert_eq!(
            SettingId::DebugAnnounceFutureRecord as usize,
            SETTINGS.len() - 1
        );
        assert_eq!(SettingId::Step.setting().name, "step");
        assert_eq!(SettingId::LeaseMaxMs.setting().name, "lease-max-ms");
        let mut names: Vec<_> = SETTINGS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SETTINGS.len());
    }

    #[test]
    fn values_are_read_by_kind() {
        let fence = SettingId::RestartFence.setting();
        assert_eq!(fence.parse(b"no"), Ok(0));
        assert!(fence.parse(b"1").unwrap_err().contains("yes or no"));
        let policy = SettingId::IdentityConflicts.setting();
        assert_eq!(policy.parse(b"warn"), Ok(1));
        assert!(policy
            .parse(b"ignore")
            .unwrap_err()
            .contains("refuse or warn"));
        let clock = SettingId::DebugClockOffsetMs.setting();
        assert_eq!(clock.parse(b"-5"), Ok(-5));
        assert!(clock.parse(b"86400000001").is_err());
        assert!(SettingId::Step.setting().parse(b"six").is_err());
    }

    #[test]
    fn bad_values_are_named() {
        let negative = |id| {
            if id == SettingId::Offset {
                -1
            } else {
                defaults(id)
            }
        };
        assert_eq!(
            Config::from_settings(negative).unwrap_err(),
            "idgen.offset is -1; it cannot be negative"
        );
        let wide = |id| {
            if id == SettingId::TimeBits {
                64
            } else {
                defaults(id)
            }
        };
        assert!(Config::from_settings(wide)
            .unwrap_err()
            .contains("a width is at most 63 bits"));
        assert!(!listed_names().contains(&"debug-clock-offset-ms"));
        assert!(listed_names().contains(&"identity-conflicts"));
    }
}
