//! Which cluster nodes must refuse to issue, from what every node announced
//! ([`Announcement`]) and what the cluster's node table says of it (master or replica,
//! failed or not). Every node runs the same [`decide`] over the same inputs, so all reach
//! the same verdicts without another round of messages.
//!
//! The rules (docs/identity.md):
//! 1. **Settings by majority.** The step and layout held by most live nodes are the
//!    deployment's (a tie goes to the earliest node's). A node with another step or layout
//!    refuses, however early it started: one wrong node never makes healthy nodes refuse,
//!    even when it comes up first after a full restart.
//! 2. **Offsets in start order, over the nodes that issue.** Nodes are taken in rank order
//!    (since when each issues; refusing nodes last, see [`Announcement::rank`]). A master
//!    refuses when an earlier master that itself issues holds its offset. A node that
//!    already refuses blocks nobody, so restarting a healthy node never hands its offset to
//!    a node that refuses.
//! 3. **Replicas never block.** A replica issues nothing; one that shares an offset is
//!    reported (it would refuse if promoted) and never takes its master's slots dark.
//! 4. **Failed nodes** (FAIL in the cluster's table) block nobody; one that conflicts with
//!    an issuing node is named refused, so that it learns it must not issue when it returns.
//!
//! Silence is not absence: a node that stopped talking keeps its last announcement here
//! until the cluster's table drops it or marks it failed. The caller decides that.

use std::collections::HashMap;

use crate::{Announcement, Layout, Refused};

/// A node's role as the cluster's node table shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves slots (or may): issues IDs.
    Master,
    /// Follows a master: issues nothing until promoted.
    Replica,
}

/// One node as the comparison sees it: its id, its address (for people), what it announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownNode {
    /// The node's cluster id.
    pub id: String,
    /// Its address, `ip:port` (empty when unknown).
    pub address: String,
    /// Its last announcement.
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

    /// The rank that orders nodes: since when it issues, refusing nodes last, ties by id.
    fn order(&self) -> (u64, &str) {
        (self.announcement.rank(), &self.id)
    }
}

/// A member of the cluster with its last announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The node and what it announced.
    pub node: KnownNode,
    /// Its role in the cluster's table.
    pub role: Role,
    /// Whether the cluster marked it failed (FAIL, agreed by a majority; not PFAIL).
    pub failed: bool,
}

/// What two nodes disagree on, the first that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disagreement {
    /// Different steps: their residue classes overlap whatever the offsets.
    Step,
    /// Different snowflake layouts (widths, epoch or time unit): IDs of one can equal IDs of
    /// the other.
    Layout,
    /// Different `lease-workers`: one node's `SNOWFLAKE.NEXT` shards are another's leased
    /// worker ids.
    LeaseWorkers,
    /// One step, one layout and one offset: both hand out the same values.
    SharedOffset,
}

/// What `a` and `b` disagree on, if anything.
pub fn disagreement(a: &Announcement, b: &Announcement) -> Option<Disagreement> {
    if a.identity.step != b.identity.step {
        Some(Disagreement::Step)
    } else if a.layout != b.layout {
        Some(Disagreement::Layout)
    } else if a.lease_workers != b.lease_workers {
        Some(Disagreement::LeaseWorkers)
    } else if a.identity.offset == b.identity.offset {
        Some(Disagreement::SharedOffset)
    } else {
        None
    }
}

/// Why the node named in a [`Conflict`] is the one that gives way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The other node issued first (rule 2).
    Later,
    /// Its step or layout differs from most nodes' (rule 1).
    Minority,
    /// It is failed by the cluster while another node issues from its offset (rule 4).
    Failed,
}

/// One node in conflict: `node` gives way to `kept`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// What they disagree on.
    pub kind: Disagreement,
    /// Why `node` gives way.
    pub why: Why,
    /// The node that gives way: refuses if it is a master, would refuse if promoted.
    pub node: KnownNode,
    /// Its role.
    pub role: Role,
    /// The node it gives way to (for a minority, the earliest node with the majority's
    /// settings).
    pub kept: KnownNode,
}

impl Conflict {
    /// Whether the node must refuse to issue (it is a master, or a failed node).
    pub fn refuses(&self) -> bool {
        self.role == Role::Master || self.why == Why::Failed
    }

    /// One readable line: what conflicts, and which node must change.
    pub fn describe(&self) -> String {
        let (node, kept) = (&self.node, &self.kept);
        let what = match self.kind {
            Disagreement::SharedOffset => format!(
                "offset {} is used by both {} and {}",
                node.announcement.identity.offset,
                kept.name(),
                node.name()
            ),
            Disagreement::Step => format!(
                "step {} on {} but step {} on {} and most nodes",
                node.announcement.identity.step,
                node.name(),
                kept.announcement.identity.step,
                kept.name()
            ),
            Disagreement::Layout => format!(
                "layout {} on {} but {} on {} and most nodes",
                node.announcement.layout_text(),
                node.name(),
                kept.announcement.layout_text(),
                kept.name()
            ),
            Disagreement::LeaseWorkers => format!(
                "lease-workers {} on {} but {} on {} and most nodes",
                node.announcement.lease_workers,
                node.name(),
                kept.announcement.lease_workers,
                kept.name()
            ),
        };
        let verdict = match (self.why, self.role) {
            (Why::Failed, _) => "is failed by the cluster and must not issue when it returns",
            (_, Role::Replica) => "is a replica: it issues nothing, but would refuse if promoted",
            (Why::Later, Role::Master) => "refuses (the other issued first)",
            (Why::Minority, Role::Master) => "refuses (its settings differ from most nodes')",
        };
        format!("{what}; node {} {verdict}", node.id)
    }

    /// The error a refusing node answers: the other node, and the setting to change.
    pub fn refusal(&self) -> String {
        let (node, kept) = (&self.node, &self.kept);
        let fix = "and restart it (or, to issue anyway, load the module with \
                   identity-conflicts warn)";
        match self.kind {
            Disagreement::SharedOffset => format!(
                "this node shares offset {} with {}, which issued first; give this node an \
                 offset no other node uses (idgen.offset) {fix}",
                node.announcement.identity.offset,
                kept.name()
            ),
            Disagreement::Step => format!(
                "this node has step {} but {} and most nodes have step {}; every node needs \
                 the same idgen.step: change it on this node {fix}",
                node.announcement.identity.step,
                kept.name(),
                kept.announcement.identity.step
            ),
            Disagreement::Layout => format!(
                "this node's snowflake layout is {} but {} and most nodes have {}; every node \
                 needs the same idgen.time-bits, shard-bits, sequence-bits, epoch and \
                 time-unit-ms: change them on this node {fix}",
                node.announcement.layout_text(),
                kept.name(),
                kept.announcement.layout_text()
            ),
            Disagreement::LeaseWorkers => format!(
                "this node reserves {} shard values for leased worker ids but {} and most \
                 nodes reserve {}; every node needs the same idgen.lease-workers: change it on \
                 this node {fix}",
                node.announcement.lease_workers,
                kept.name(),
                kept.announcement.lease_workers
            ),
        }
    }
}

/// The verdicts on a set of members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// One entry per node in conflict, ordered by node id.
    pub conflicts: Vec<Conflict>,
}

impl Decision {
    /// The conflict of node `id`, if it has one.
    pub fn of(&self, id: &str) -> Option<&Conflict> {
        self.conflicts
            .iter()
            .find(|conflict| conflict.node.id == id)
    }

    /// Whether node `id` must refuse to issue.
    pub fn refuses(&self, id: &str) -> bool {
        self.of(id).is_some_and(Conflict::refuses)
    }

    /// The nodes that must refuse, as an announcement names them.
    pub fn refused(&self) -> Vec<Refused> {
        self.conflicts
            .iter()
            .filter(|conflict| conflict.refuses())
            .map(|conflict| Refused {
                id: conflict.node.id.clone(),
                since_unix_ms: conflict.node.announcement.since_unix_ms,
            })
            .collect()
    }

    /// At most `limit` descriptions joined by ` | `, then how many more there are.
    pub fn detail(&self, limit: usize) -> String {
        let mut lines: Vec<String> = self
            .conflicts
            .iter()
            .take(limit)
            .map(Conflict::describe)
            .collect();
        if self.conflicts.len() > limit {
            lines.push(format!("and {} more", self.conflicts.len() - limit));
        }
        lines.join(" | ")
    }
}

/// The settings that must agree across a deployment.
type Settings = (u64, Layout, u64);

fn settings(node: &KnownNode) -> Settings {
    let announcement = &node.announcement;
    (
        announcement.identity.step,
        announcement.layout,
        announcement.lease_workers,
    )
}

/// The verdicts on `members` (the node itself among them). O(n log n): one sort, one pass.
pub fn decide(members: &[Member]) -> Decision {
    let mut live: Vec<&Member> = members.iter().filter(|member| !member.failed).collect();
    live.sort_by(|a, b| a.node.order().cmp(&b.node.order()));

    // Rule 1: the settings most live nodes hold; the earliest node breaks a tie (the sort
    // puts it first, and only a strictly larger count replaces the leader).
    let mut counts: HashMap<Settings, usize> = HashMap::new();
    for member in &live {
        *counts.entry(settings(&member.node)).or_default() += 1;
    }
    let mut agreed: Option<(Settings, usize, &KnownNode)> = None;
    for member in &live {
        let own = settings(&member.node);
        let count = counts[&own];
        if agreed.is_none_or(|(_, best, _)| count > best) {
            agreed = Some((own, count, &member.node));
        }
    }
    let Some((agreed, _, first_agreeing)) = agreed else {
        return Decision::default();
    };

    let mut conflicts = Vec::new();
    let mut issuers: HashMap<u64, &KnownNode> = HashMap::new();
    let mut waiting_replicas = Vec::new();
    for member in &live {
        let node = &member.node;
        let offset = node.announcement.identity.offset;
        if settings(node) != agreed {
            let kind = disagreement(&node.announcement, &first_agreeing.announcement)
                .unwrap_or(Disagreement::Layout);
            conflicts.push(conflict(kind, Why::Minority, member, first_agreeing));
        } else if let Some(issuer) = issuers.get(&offset) {
            conflicts.push(conflict(
                Disagreement::SharedOffset,
                Why::Later,
                member,
                issuer,
            ));
        } else if member.role == Role::Master {
            issuers.insert(offset, node);
        } else {
            waiting_replicas.push(*member);
        }
    }
    // Rule 3: a replica that shares an offset with a master that issues (earlier or later),
    // or with an earlier replica, is reported.
    let mut replicas: HashMap<u64, &KnownNode> = HashMap::new();
    for member in waiting_replicas {
        let offset = member.node.announcement.identity.offset;
        if let Some(issuer) = issuers.get(&offset).or(replicas.get(&offset)) {
            conflicts.push(conflict(
                Disagreement::SharedOffset,
                Why::Later,
                member,
                issuer,
            ));
        } else {
            replicas.insert(offset, &member.node);
        }
    }
    // Rule 4: failed nodes that would take what an issuing node holds.
    for member in members.iter().filter(|member| member.failed) {
        let node = &member.node;
        let kept = if settings(node) != agreed {
            Some(first_agreeing)
        } else {
            issuers
                .get(&node.announcement.identity.offset)
                .copied()
                .filter(|issuer| issuer.id != node.id)
        };
        if let Some(kept) = kept {
            let kind =
                disagreement(&node.announcement, &kept.announcement).unwrap_or(Disagreement::Step);
            conflicts.push(conflict(kind, Why::Failed, member, kept));
        }
    }
    conflicts.sort_by(|a, b| a.node.id.cmp(&b.node.id));
    Decision { conflicts }
}

fn conflict(kind: Disagreement, why: Why, member: &Member, kept: &KnownNode) -> Conflict {
    Conflict {
        kind,
        why,
        node: member.node.clone(),
        role: member.role,
        kept: kept.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Identity};

    fn member(id: &str, since: u64, step: u64, offset: u64) -> Member {
        let config = Config {
            identity: Identity { step, offset },
            ..Config::default()
        };
        Member {
            node: KnownNode {
                id: id.into(),
                address: format!("10.0.0.1:{}", 7000 + offset),
                announcement: Announcement::of(&config, since),
            },
            role: Role::Master,
            failed: false,
        }
    }

    fn replica(mut member: Member) -> Member {
        member.role = Role::Replica;
        member
    }

    fn refused(decision: &Decision) -> Vec<&str> {
        decision
            .conflicts
            .iter()
            .filter(|c| c.refuses())
            .map(|c| c.node.id.as_str())
            .collect()
    }

    #[test]
    fn distinct_offsets_in_one_step_and_layout_do_not_conflict() {
        let members: Vec<_> = (0..6).map(|i| member(&format!("n{i}"), i, 8, i)).collect();
        assert!(decide(&members).conflicts.is_empty());
    }

    #[test]
    fn of_two_masters_on_one_offset_the_later_refuses() {
        let members = [
            member("a", 100, 8, 0),
            member("b", 50, 8, 1),
            member("c", 200, 8, 0),
        ];
        let decision = decide(&members);
        assert_eq!(refused(&decision), ["c"]);
        let conflict = decision.of("c").unwrap();
        assert_eq!(conflict.kind, Disagreement::SharedOffset);
        assert_eq!(conflict.kept.id, "a");
        assert!(conflict.refusal().contains("node a at 10.0.0.1:7000"));
        assert!(conflict.refusal().contains("idgen.offset"));
        assert!(conflict.describe().contains("offset 0 is used by both"));
    }

    #[test]
    fn a_node_with_another_step_refuses_even_when_it_started_first() {
        // A full restart in which the wrong node came up first.
        let members = [
            member("b", 1, 6, 1),
            member("a", 2, 8, 0),
            member("c", 3, 8, 2),
            member("d", 4, 8, 3),
        ];
        let decision = decide(&members);
        assert_eq!(refused(&decision), ["b"]);
        assert_eq!(decision.of("b").unwrap().why, Why::Minority);
        assert!(decision.of("b").unwrap().refusal().contains("idgen.step"));
    }

    #[test]
    fn another_lease_band_is_a_minority_setting() {
        let mut odd = member("c", 3, 8, 2);
        odd.node.announcement.lease_workers = 16;
        let decision = decide(&[member("a", 1, 8, 0), member("b", 2, 8, 1), odd]);
        assert_eq!(refused(&decision), ["c"]);
        let conflict = decision.of("c").unwrap();
        assert_eq!(conflict.kind, Disagreement::LeaseWorkers);
        assert!(conflict.refusal().contains("idgen.lease-workers"));
    }

    #[test]
    fn a_tie_in_settings_goes_to_the_earliest_node() {
        let mut other = member("b", 2, 8, 1);
        other.node.announcement.layout.time_unit_ms = 10;
        let decision = decide(&[member("a", 1, 8, 0), other]);
        assert_eq!(refused(&decision), ["b"]);
        assert_eq!(decision.of("b").unwrap().kind, Disagreement::Layout);
    }

    #[test]
    fn restarting_a_healthy_node_never_hands_its_offset_to_a_refusing_node() {
        // b took a's offset and refuses; a restarts (a later `since`) while b still refuses.
        let mut b = member("b", 100, 8, 0);
        b.node.announcement.refusing = true;
        let a = member("a", 500, 8, 0);
        let decision = decide(&[a, b, member("c", 10, 8, 2)]);
        assert_eq!(refused(&decision), ["b"]);
    }

    #[test]
    fn a_node_that_refuses_blocks_nobody_no_cascade() {
        // b (wrong step) refuses; c, restarted after it, issues.
        let members = [
            member("a", 1, 8, 0),
            member("d", 2, 8, 3),
            member("e", 3, 8, 4),
            member("b", 10, 6, 1),
            member("c", 20, 8, 2),
        ];
        assert_eq!(refused(&decide(&members)), ["b"]);
        // Three holders of one offset: the first issues, both others refuse because of it.
        let members = [
            member("a", 1, 8, 0),
            member("b", 2, 8, 0),
            member("c", 3, 8, 0),
        ];
        assert_eq!(refused(&decide(&members)), ["b", "c"]);
    }

    #[test]
    fn a_replica_never_takes_its_masters_slots_dark() {
        // Master m restarted onto its replica r's offset: m issues, r is reported.
        let members = [replica(member("r", 1, 8, 3)), member("m", 9, 8, 3)];
        let decision = decide(&members);
        assert!(refused(&decision).is_empty());
        let conflict = decision.of("r").unwrap();
        assert_eq!(conflict.role, Role::Replica);
        assert!(!conflict.refuses());
        assert!(conflict.describe().contains("would refuse if promoted"));
        // Two replicas on one offset: reported, nobody refuses.
        let members = [
            member("m", 1, 8, 0),
            replica(member("r1", 2, 8, 4)),
            replica(member("r2", 3, 8, 4)),
        ];
        let decision = decide(&members);
        assert!(refused(&decision).is_empty());
        assert_eq!(decision.conflicts.len(), 1);
    }

    #[test]
    fn a_failed_node_blocks_nobody_and_is_named_so_it_yields_when_back() {
        let mut a = member("a", 1, 8, 0);
        a.failed = true;
        let b = member("b", 50, 8, 0);
        let decision = decide(&[a, b]);
        assert_eq!(refused(&decision), ["a"]);
        assert_eq!(decision.of("a").unwrap().why, Why::Failed);
        assert!(!decision.refuses("b"));
    }

    #[test]
    fn the_detail_is_capped() {
        let members: Vec<_> = (0..20)
            .map(|i| member(&format!("n{i:02}"), i, 8, 0))
            .collect();
        let decision = decide(&members);
        assert_eq!(decision.conflicts.len(), 19);
        let detail = decision.detail(3);
        assert_eq!(detail.matches(" | ").count(), 3);
        assert!(detail.ends_with("and 16 more"), "{detail}");
    }

    proptest::proptest! {
        /// Every node reaches the same verdicts whatever order it lists the members in, and
        /// no two issuing masters ever share a residue class or disagree on settings.
        #[test]
        fn verdicts_are_order_free_and_leave_no_two_issuers_in_conflict(
            nodes in proptest::collection::vec(
                (0u64..20, 0u64..4, proptest::prelude::any::<bool>(),
                 proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>(),
                 proptest::prelude::any::<bool>()),
                1..12,
            ),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let members: Vec<Member> = nodes
                .iter()
                .enumerate()
                .map(|(i, &(since, offset, other_step, is_replica, refusing, failed))| {
                    let mut m = member(&format!("n{i:02}"), since, if other_step { 6 } else { 8 }, offset);
                    m.node.announcement.refusing = refusing;
                    m.failed = failed;
                    if is_replica { m.role = Role::Replica; }
                    m
                })
                .collect();
            let decision = decide(&members);
            let mut shuffled = members.clone();
            let len = shuffled.len();
            shuffled.rotate_left((seed as usize) % len);
            if seed % 2 == 0 { shuffled.reverse(); }
            proptest::prop_assert_eq!(&decide(&shuffled), &decision);
            let issuing: Vec<&Member> = members
                .iter()
                .filter(|m| !m.failed && m.role == Role::Master && !decision.refuses(&m.node.id))
                .collect();
            for (i, a) in issuing.iter().enumerate() {
                for b in &issuing[i + 1..] {
                    proptest::prop_assert_eq!(
                        disagreement(&a.node.announcement, &b.node.announcement),
                        None
                    );
                }
            }
        }
    }
}
