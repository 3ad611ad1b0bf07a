//! What nodes tell each other about their identity, and the comparison that finds a
//! deployment's conflicts: two nodes on one offset, or nodes that disagree on step or layout.
//!
//! The module sends an [`Announcement`] over the cluster bus; every node compares every pair
//! of nodes it knows ([`find_conflicts`]), so all nodes report the same conflicts, and each
//! decides by the same rule which node of a pair must stop issuing ([`Announcement::is_later`]):
//! the one that started later, so a misconfigured node joining a running deployment cannot
//! stop the nodes already serving.

use crate::{Config, Identity, Layout};

/// The first bytes of every announcement, with the format's version: a message of another
/// format (a later release's) is ignored rather than misread.
const MAGIC: &[u8; 4] = b"IDG1";

/// The longest module version text an announcement carries.
const MAX_VERSION_LEN: usize = 32;

/// One node's identity as it announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// When the node's module was loaded, in unix ms: which node of a conflicting pair
    /// joined later.
    pub started_unix_ms: u64,
    /// Its step and offset.
    pub identity: Identity,
    /// Its snowflake layout.
    pub layout: Layout,
    /// Its module version (shown, never compared: mixed versions are a rolling upgrade).
    pub version: String,
}

/// What two nodes disagree on, the first that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disagreement {
    /// Different steps: their residue classes overlap whatever the offsets.
    Step,
    /// Different snowflake layouts (widths, epoch or time unit): IDs of one can equal IDs of
    /// the other.
    Layout,
    /// One step, one layout and one offset: both hand out the same values.
    SharedOffset,
}

impl Announcement {
    /// This node's announcement: its configuration and when it started.
    pub fn of(config: &Config, started_unix_ms: u64) -> Self {
        Announcement {
            started_unix_ms,
            identity: config.identity,
            layout: config.layout,
            version: String::new(),
        }
    }

    /// The announcement with its module version.
    pub fn with_version(mut self, version: &str) -> Self {
        self.version = version.chars().take(MAX_VERSION_LEN).collect();
        self
    }

    /// The bytes sent over the bus.
    pub fn encode(&self) -> Vec<u8> {
        let layout = &self.layout;
        let numbers = [
            self.started_unix_ms,
            self.identity.step,
            self.identity.offset,
            layout.epoch_unix_ms,
            layout.time_unit_ms,
            u64::from(layout.time_bits),
            u64::from(layout.shard_bits),
            u64::from(layout.sequence_bits),
        ];
        let version = &self.version.as_bytes()[..self.version.len().min(MAX_VERSION_LEN)];
        let mut bytes = Vec::with_capacity(MAGIC.len() + numbers.len() * 8 + 1 + version.len());
        bytes.extend_from_slice(MAGIC);
        for number in numbers {
            bytes.extend_from_slice(&number.to_le_bytes());
        }
        bytes.push(version.len() as u8);
        bytes.extend_from_slice(version);
        bytes
    }

    /// Reads an announcement; `None` for anything that is not one (another format, cut short,
    /// a width that cannot be a layout's).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let mut numbers = [0u64; 8];
        for (index, number) in numbers.iter_mut().enumerate() {
            let chunk = rest.get(index * 8..index * 8 + 8)?;
            *number = u64::from_le_bytes(chunk.try_into().ok()?);
        }
        let rest = &rest[numbers.len() * 8..];
        let (&len, version) = rest.split_first()?;
        if version.len() != usize::from(len) || version.len() > MAX_VERSION_LEN {
            return None;
        }
        let width = |value: u64| u32::try_from(value).ok().filter(|&bits| bits <= 63);
        Some(Announcement {
            started_unix_ms: numbers[0],
            identity: Identity {
                step: numbers[1],
                offset: numbers[2],
            },
            layout: Layout {
                epoch_unix_ms: numbers[3],
                time_unit_ms: numbers[4],
                time_bits: width(numbers[5])?,
                shard_bits: width(numbers[6])?,
                sequence_bits: width(numbers[7])?,
            },
            version: String::from_utf8_lossy(version).into_owned(),
        })
    }

    /// What this node and `other` disagree on, if anything.
    pub fn disagreement(&self, other: &Announcement) -> Option<Disagreement> {
        if self.identity.step != other.identity.step {
            Some(Disagreement::Step)
        } else if self.layout != other.layout {
            Some(Disagreement::Layout)
        } else if self.identity.offset == other.identity.offset {
            Some(Disagreement::SharedOffset)
        } else {
            None
        }
    }

    /// Whether this node (named `id`) joined after `other` (named `other_id`): it started
    /// later, or at the same millisecond with the greater node id. Both nodes of a pair
    /// compute the same answer from the same two announcements, so exactly one of them is
    /// the later one.
    pub fn is_later(&self, id: &str, other: &Announcement, other_id: &str) -> bool {
        (self.started_unix_ms, id) > (other.started_unix_ms, other_id)
    }

    /// The layout in words, for a conflict's description.
    fn layout_text(&self) -> String {
        let layout = &self.layout;
        format!(
            "{}|{}|{} bits from epoch {} ms in units of {} ms",
            layout.time_bits,
            layout.shard_bits,
            layout.sequence_bits,
            layout.epoch_unix_ms,
            layout.time_unit_ms
        )
    }
}

/// One node as the comparison sees it: its id, its address (for people), and what it announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownNode {
    /// The node's cluster id.
    pub id: String,
    /// Its address, `ip:port` (empty when unknown).
    pub address: String,
    /// Its announcement.
    pub announcement: Announcement,
}

impl KnownNode {
    /// `node <id> at <address>`, as the log, INFO and errors name a node.
    pub fn name(&self) -> String {
        if self.address.is_empty() {
            format!("node {}", self.id)
        } else {
            format!("node {} at {}", self.id, self.address)
        }
    }
}

/// A pair of nodes in conflict: `later` joined after `earlier`, and is the one that must stop
/// issuing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// What they disagree on.
    pub kind: Disagreement,
    /// The node that joined later.
    pub later: KnownNode,
    /// The node that was there first.
    pub earlier: KnownNode,
}

impl Conflict {
    /// One readable line: what conflicts, and which node must change.
    pub fn describe(&self) -> String {
        let (later, earlier) = (&self.later, &self.earlier);
        let what = match self.kind {
            Disagreement::SharedOffset => format!(
                "offset {} is used by both {} and {}",
                later.announcement.identity.offset,
                earlier.name(),
                later.name()
            ),
            Disagreement::Step => format!(
                "step {} on {} but step {} on {}",
                earlier.announcement.identity.step,
                earlier.name(),
                later.announcement.identity.step,
                later.name()
            ),
            Disagreement::Layout => format!(
                "layout {} on {} but {} on {}",
                earlier.announcement.layout_text(),
                earlier.name(),
                later.announcement.layout_text(),
                later.name()
            ),
        };
        format!("{what}; node {} joined later", later.id)
    }

    /// The error a refusing node answers: the other node, and the setting to change.
    pub fn refusal(&self) -> String {
        let (later, earlier) = (&self.later, &self.earlier);
        let fix = "and restart it (or, to issue anyway, load the module with \
                   identity-conflicts warn)";
        match self.kind {
            Disagreement::SharedOffset => format!(
                "this node shares offset {} with {}, which was running first; give this node \
                 an offset no other node uses (idgen.offset) {fix}",
                later.announcement.identity.offset,
                earlier.name()
            ),
            Disagreement::Step => format!(
                "this node has step {} but {}, which was running first, has step {}; every \
                 node needs the same idgen.step: change it on this node {fix}",
                later.announcement.identity.step,
                earlier.name(),
                earlier.announcement.identity.step
            ),
            Disagreement::Layout => format!(
                "this node's snowflake layout is {} but {}, which was running first, has {}; \
                 every node needs the same idgen.time-bits, shard-bits, sequence-bits, epoch \
                 and time-unit-ms: change them on this node {fix}",
                later.announcement.layout_text(),
                earlier.name(),
                earlier.announcement.layout_text()
            ),
        }
    }
}

/// Every conflicting pair among `nodes`, in a stable order (by the later node's id, then the
/// earlier's), so that the same set of nodes always gives the same description.
pub fn find_conflicts(nodes: &[KnownNode]) -> Vec<Conflict> {
    let mut conflicts = Vec::new();
    for (index, first) in nodes.iter().enumerate() {
        for second in &nodes[index + 1..] {
            let Some(kind) = first.announcement.disagreement(&second.announcement) else {
                continue;
            };
            let first_is_later =
                first
                    .announcement
                    .is_later(&first.id, &second.announcement, &second.id);
            let (later, earlier) = if first_is_later {
                (first, second)
            } else {
                (second, first)
            };
            conflicts.push(Conflict {
                kind,
                later: later.clone(),
                earlier: earlier.clone(),
            });
        }
    }
    conflicts.sort_by(|a, b| (&a.later.id, &a.earlier.id).cmp(&(&b.later.id, &b.earlier.id)));
    conflicts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, started: u64, step: u64, offset: u64) -> KnownNode {
        let config = Config {
            identity: Identity { step, offset },
            ..Config::default()
        };
        KnownNode {
            id: id.into(),
            address: format!("10.0.0.1:{}", 7000 + offset),
            announcement: Announcement::of(&config, started).with_version("1.2.3"),
        }
    }

    #[test]
    fn an_announcement_reads_back_as_sent() {
        let sent = node("a", 17, 8, 3).announcement;
        assert_eq!(Announcement::decode(&sent.encode()), Some(sent));
    }

    #[test]
    fn anything_but_an_announcement_is_ignored() {
        let bytes = node("a", 1, 8, 3).announcement.encode();
        for cut in 0..bytes.len() {
            assert_eq!(Announcement::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut other_format = bytes.clone();
        other_format[3] = b'2';
        assert_eq!(Announcement::decode(&other_format), None);
        let mut longer = bytes;
        longer.push(0);
        assert_eq!(Announcement::decode(&longer), None);
    }

    #[test]
    fn distinct_offsets_in_one_step_and_layout_do_not_conflict() {
        let nodes: Vec<_> = (0..6).map(|i| node(&format!("n{i}"), i, 8, i)).collect();
        assert!(find_conflicts(&nodes).is_empty());
    }

    #[test]
    fn a_shared_offset_conflicts_and_the_later_node_refuses() {
        let nodes = [
            node("a", 100, 8, 0),
            node("b", 50, 8, 1),
            node("c", 200, 8, 0),
        ];
        let conflicts = find_conflicts(&nodes);
        assert_eq!(conflicts.len(), 1);
        let conflict = &conflicts[0];
        assert_eq!(conflict.kind, Disagreement::SharedOffset);
        assert_eq!(
            (conflict.later.id.as_str(), conflict.earlier.id.as_str()),
            ("c", "a")
        );
        assert!(conflict.refusal().contains("node a at 10.0.0.1:7000"));
        assert!(conflict.refusal().contains("idgen.offset"));
        assert!(conflict.describe().contains("offset 0 is used by both"));
    }

    #[test]
    fn a_step_or_layout_disagreement_conflicts_whatever_the_offsets() {
        let step = [node("a", 1, 8, 0), node("b", 2, 6, 1)];
        assert_eq!(find_conflicts(&step)[0].kind, Disagreement::Step);
        assert!(find_conflicts(&step)[0].refusal().contains("idgen.step"));
        let mut other_layout = node("b", 2, 8, 1);
        other_layout.announcement.layout.time_unit_ms = 10;
        let layout = [node("a", 1, 8, 0), other_layout];
        assert_eq!(find_conflicts(&layout)[0].kind, Disagreement::Layout);
        assert!(find_conflicts(&layout)[0]
            .refusal()
            .contains("time-unit-ms"));
    }

    #[test]
    fn a_tie_in_start_time_goes_to_the_greater_id() {
        let a = node("a", 5, 8, 0).announcement;
        let b = node("b", 5, 8, 0).announcement;
        assert!(b.is_later("b", &a, "a"));
        assert!(!a.is_later("a", &b, "b"));
    }

    #[test]
    fn every_node_finds_the_same_conflicts_in_any_order() {
        let nodes = vec![
            node("a", 3, 8, 0),
            node("b", 1, 8, 0),
            node("c", 2, 6, 2),
            node("d", 4, 8, 3),
        ];
        let expected = find_conflicts(&nodes);
        let mut reversed = nodes.clone();
        reversed.reverse();
        assert_eq!(find_conflicts(&reversed), expected);
        // a–b share offset 0; c's step differs from a, b and d.
        assert_eq!(expected.len(), 4);
    }

    proptest::proptest! {
        #[test]
        fn announcements_round_trip_and_exactly_one_of_a_pair_is_later(
            started in proptest::prelude::any::<u64>(),
            other_started in proptest::prelude::any::<u64>(),
            step in 1u64..1024,
            offset in 0u64..1024,
            same_id in proptest::prelude::any::<bool>(),
        ) {
            let mine = node("a", started, step, offset);
            let theirs = node(if same_id { "a" } else { "b" }, other_started, step, offset);
            proptest::prop_assert_eq!(
                Announcement::decode(&mine.announcement.encode()),
                Some(mine.announcement.clone())
            );
            let one = mine.announcement.is_later(&mine.id, &theirs.announcement, &theirs.id);
            let other = theirs.announcement.is_later(&theirs.id, &mine.announcement, &mine.id);
            let identical = (started, &mine.id) == (other_started, &theirs.id);
            proptest::prop_assert_eq!(one || other, !identical);
            proptest::prop_assert!(!(one && other));
        }
    }
}
