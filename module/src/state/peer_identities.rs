//! What this node knows of the identities of its cluster's nodes, the verdicts drawn from it
//! (`idgen_core::decide`), and whether this node must refuse to issue.
//!
//! A peer is kept for as long as the cluster's node table lists it, whatever it last said
//! and however long ago: silence is not absence. Its role and whether it is failed come from
//! the table; its identity and its verdicts on others from its last announcement.
//!
//! The issuing commands read one flag ([`issuing_refused`]): a relaxed load of an
//! `AtomicBool`, no lookup and no allocation; everything else here runs when a message
//! arrives or the exchange's timer fires, on Redis's main thread.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use idgen_core::{decide, disagreement, Announcement, Decision, KnownNode, Member, Role};

use crate::ffi::main_thread::MainThreadCell;

/// This node's standing, one of the `STANDING_*` values; anything but `ISSUING` refuses.
static STANDING: AtomicU8 = AtomicU8::new(ISSUING);

/// Issues.
const ISSUING: u8 = 0;
/// Refuses: a conflict names it, and the policy is `refuse`.
const REFUSING: u8 = 1;
/// Refuses for now: just started in a cluster, it has not yet heard every node of the
/// cluster's table (at most `exchange`'s startup wait).
const COMPARING: u8 = 2;

/// When the module loaded, in unix ms: the rank this node starts with.
static STARTED_UNIX_MS: AtomicU64 = AtomicU64::new(0);

/// The most conflicts `idgen_conflict_detail` spells out (then: "and N more").
const DETAIL_LIMIT: usize = 5;

/// Everything known, and the conclusions drawn from it.
struct Table {
    /// This node (never failed in its own eyes).
    me: Option<Member>,
    /// The other nodes, by id: one lookup per message, whatever the cluster's size. Each
    /// holds the node's last announcement, and its role and failed flag as the cluster's
    /// table says them.
    peers: BTreeMap<String, Member>,
    decision: Decision,
    /// Nodes this node conflicted with when it was promoted: it refuses while any of them is
    /// still a live member it conflicts with (docs/identity.md, "A replica promoted").
    promoted_against: Vec<String>,
    /// Whether this node must refuse (by the verdicts, whatever the policy).
    must_refuse: bool,
    refusal: String,
    detail: String,
    /// The live nodes (not failed, not this one) of the last read of the cluster's table,
    /// `None` before the first: a message heard while comparing is checked against this
    /// instead of reading the table again (a read per message is quadratic at a start).
    live_listed: Option<Vec<String>>,
}

static TABLE: MainThreadCell<Table> = MainThreadCell::new(Table {
    me: None,
    peers: BTreeMap::new(),
    decision: Decision {
        conflicts: Vec::new(),
    },
    promoted_against: Vec::new(),
    must_refuse: false,
    refusal: String::new(),
    detail: String::new(),
    live_listed: None,
});

/// Whether SNOWFLAKE.NEXT and SEGMENT.NEXT must refuse (a conflict names this node, or it
/// is still comparing identities after a start): one relaxed load, on every call.
#[inline(always)]
pub fn issuing_refused() -> bool {
    STANDING.load(Ordering::Relaxed) != ISSUING
}

/// Whether this node refuses only because it is still comparing identities after a start.
pub fn comparing() -> bool {
    STANDING.load(Ordering::Relaxed) == COMPARING
}

/// This node just started in a cluster: it refuses until [`compared`] (its first verdicts
/// are drawn over every node of the table, or the startup wait ran out).
pub fn start_comparing() {
    STANDING.store(COMPARING, Ordering::Relaxed);
}

/// Whether this node holds an announcement from every live node of the last table read
/// ([`follow_table`]); false before the first read.
pub fn heard_all_listed() -> bool {
    TABLE.with(|table| {
        table
            .live_listed
            .as_ref()
            .is_some_and(|listed| listed.iter().all(|id| table.peers.contains_key(id)))
    })
}

/// Ends the startup comparison: from now on the verdicts alone decide.
pub fn compared(refuse: bool) {
    let must = TABLE.with(|table| table.must_refuse);
    STANDING.store(
        if refuse && must { REFUSING } else { ISSUING },
        Ordering::Relaxed,
    );
}

/// This node's standing in words (`idgen_identity_standing`).
pub fn standing() -> &'static str {
    match STANDING.load(Ordering::Relaxed) {
        ISSUING if TABLE.with(|table| table.must_refuse) => "warned",
        ISSUING => "issuing",
        REFUSING => "refusing",
        _ => "comparing",
    }
}

/// Records when the module loaded.
pub fn set_started(unix_ms: u64) {
    STARTED_UNIX_MS.store(unix_ms, Ordering::Relaxed);
}

/// When the module loaded, in unix ms.
pub fn started() -> u64 {
    STARTED_UNIX_MS.load(Ordering::Relaxed)
}

/// What happened to the table when a node was heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A node not known before.
    New,
    /// A known node whose announcement changed.
    Changed,
    /// Nothing new.
    Same,
}

/// A node of the cluster's table: id, address, master or not, failed or not.
pub struct TableEntry {
    /// Its id.
    pub id: String,
    /// `ip:port`.
    pub address: String,
    /// Master or replica.
    pub role: Role,
    /// FAIL in the table.
    pub failed: bool,
}

/// Records this node: its id, address and role, and (on the first call) its announcement.
/// Returns whether anything changed.
pub fn set_me(entry: TableEntry, first: impl FnOnce() -> Announcement) -> bool {
    TABLE.with(|table| match &mut table.me {
        Some(me) => {
            let changed = me.node.id != entry.id;
            me.node.id.clone_from(&entry.id);
            take_table(me, &entry) || changed
        }
        None => {
            table.me = Some(member(entry, first()));
            true
        }
    })
}

/// Records what node `entry.id` announced.
pub fn heard(entry: TableEntry, announcement: Announcement) -> Heard {
    TABLE.with(|table| {
        if let Some(peer) = table.peers.get_mut(&entry.id) {
            let new_word = peer.node.announcement != announcement;
            peer.node.announcement = announcement;
            let moved = take_table(peer, &entry);
            return if new_word || moved {
                Heard::Changed
            } else {
                Heard::Same
            };
        }
        table
            .peers
            .insert(entry.id.clone(), member(entry, announcement));
        Heard::New
    })
}

/// A member from its table entry and announcement.
fn member(entry: TableEntry, announcement: Announcement) -> Member {
    Member {
        node: KnownNode {
            id: entry.id,
            address: entry.address,
            announcement,
        },
        role: entry.role,
        failed: entry.failed,
    }
}

/// Takes address, role and failed flag from the cluster's table; returns whether any changed.
fn take_table(member: &mut Member, entry: &TableEntry) -> bool {
    let changed = member.node.address != entry.address
        || member.role != entry.role
        || member.failed != entry.failed;
    member.node.address.clone_from(&entry.address);
    member.role = entry.role;
    member.failed = entry.failed;
    changed
}

/// Brings peers in line with the cluster's table: forgets nodes it no longer lists, takes
/// each node's role and failed flag from it. Returns whether anything changed.
pub fn follow_table(entries: &[TableEntry]) -> bool {
    let listed: HashMap<&str, &TableEntry> = entries
        .iter()
        .map(|entry| (entry.id.as_str(), entry))
        .collect();
    TABLE.with(|table| {
        table.live_listed = Some(
            entries
                .iter()
                .filter(|entry| !entry.failed)
                .map(|entry| entry.id.clone())
                .collect(),
        );
        let before = table.peers.len();
        table.peers.retain(|id, _| listed.contains_key(id.as_str()));
        let mut changed = table.peers.len() != before;
        for peer in table.peers.values_mut() {
            if let Some(entry) = listed.get(peer.node.id.as_str()) {
                changed |= take_table(peer, entry);
            }
        }
        changed
    })
}

/// This node became a master at `now_unix_ms`: it ranks from now on, and keeps refusing
/// while a node it conflicted with as a replica is still a live member it conflicts with.
pub fn promoted(now_unix_ms: u64) {
    TABLE.with(|table| {
        let Some(me) = &mut table.me else { return };
        me.node.announcement.since_unix_ms = now_unix_ms;
        me.role = Role::Master;
        let mine = table.decision.of(&me.node.id);
        table.promoted_against = mine.map(|c| vec![c.kept.id.clone()]).unwrap_or_default();
    });
}

/// What changed when the verdicts were drawn again.
pub struct Outcome {
    /// The new description, when it differs from the last (to log once).
    pub detail_changed: Option<String>,
    /// Whether this node now refuses (when that changed).
    pub refusing_changed: Option<bool>,
    /// Whether this node's announcement changed (to send at once).
    pub announcement_changed: bool,
}

/// Draws the verdicts again at `now_unix_ms`; this node refuses when they name it — its
/// own comparison or any live peer's — and `refuse` is the policy.
pub fn recompute(refuse: bool, now_unix_ms: u64) -> Outcome {
    TABLE.with(|table| {
        let before = table.me.as_ref().map(|me| me.node.announcement.clone());
        // Twice at most: when this node's own standing changes, its rank changes with it.
        for _ in 0..2 {
            if !conclude(table, now_unix_ms) {
                break;
            }
        }
        let Some(me) = &table.me else {
            return Outcome {
                detail_changed: None,
                refusing_changed: None,
                announcement_changed: false,
            };
        };
        let detail = table.decision.detail(DETAIL_LIMIT);
        let detail_changed = (detail != table.detail).then(|| detail.clone());
        table.detail = detail;
        let refusing = refuse && table.must_refuse;
        // While comparing after a start, the standing waits for `compared`.
        let was = STANDING.load(Ordering::Relaxed);
        let refusing_changed = if was == COMPARING {
            None
        } else {
            let now = if refusing { REFUSING } else { ISSUING };
            STANDING.store(now, Ordering::Relaxed);
            (was != now).then_some(refusing)
        };
        Outcome {
            detail_changed,
            refusing_changed,
            announcement_changed: before.as_ref() != Some(&me.node.announcement),
        }
    })
}

/// One pass: the verdicts, this node's standing, its announcement. Returns whether this
/// node's standing changed (its rank moved, so the verdicts must be drawn again).
fn conclude(table: &mut Table, now_unix_ms: u64) -> bool {
    let Some(me) = &table.me else { return false };
    let mut members = Vec::with_capacity(table.peers.len() + 1);
    members.push(me.clone());
    members.extend(table.peers.values().cloned());
    table.decision = decide(&members);
    let my_id = me.node.id.clone();
    let mine = me.node.announcement.clone();
    let live = |peer: &&Member| !peer.failed;
    // Verdicts of live peers that name this node (what a one-way link keeps it from seeing).
    let named_by: Vec<&Member> =
        table
            .peers
            .values()
            .filter(live)
            .filter(|peer| {
                peer.node.announcement.refused.iter().any(|verdict| {
                    verdict.id == my_id && verdict.since_unix_ms == mine.since_unix_ms
                })
            })
            .collect();
    // A promotion's refusal lasts while the other node is a live member that conflicts.
    table.promoted_against.retain(|id| {
        table.peers.get(id).is_some_and(|peer| {
            !peer.failed && disagreement(&mine, &peer.node.announcement).is_some()
        })
    });
    let own = table.decision.of(&my_id).filter(|c| c.refuses());
    let must_refuse = own.is_some() || !named_by.is_empty() || !table.promoted_against.is_empty();
    table.refusal = if let Some(conflict) = own {
        conflict.refusal()
    } else if let Some(peer) = named_by.first() {
        format!(
            "{} holds that this node conflicts with another node (one this node may not \
             hear); see idgen_conflict_detail on that node, give this node an offset, step \
             and layout no other node conflicts with, and restart it",
            peer.node.name()
        )
    } else if let Some(id) = table.promoted_against.first() {
        format!(
            "this node was promoted while it shared its identity with node {id}, which is \
             still a member of the cluster; give one of them its own offset (idgen.offset) \
             and restart it"
        )
    } else {
        String::new()
    };
    table.must_refuse = must_refuse;
    let refused = table.decision.refused();
    let Some(me) = &mut table.me else {
        return false;
    };
    let announcement = &mut me.node.announcement;
    announcement.refused = refused;
    if announcement.refusing == must_refuse {
        return false;
    }
    announcement.refusing = must_refuse;
    if !must_refuse {
        // Issuing again: it ranks from now, after every node that issued meanwhile.
        announcement.since_unix_ms = now_unix_ms;
    }
    true
}

/// Nodes of the cluster heard from (`idgen_peers`).
pub fn peers() -> usize {
    TABLE.with(|table| table.peers.len())
}

/// Nodes in conflict now (`idgen_conflicts`).
pub fn conflicts() -> usize {
    TABLE.with(|table| table.decision.conflicts.len())
}

/// The conflicts, the first few spelled out (`idgen_conflict_detail`).
pub fn detail() -> String {
    TABLE.with(|table| table.detail.clone())
}

/// Why this node refuses to issue (the error's text after its code word).
pub fn refusal() -> String {
    TABLE.with(|table| table.refusal.clone())
}

/// This node's own announcement as last drawn, to send.
pub fn my_announcement() -> Option<Announcement> {
    TABLE.with(|table| table.me.as_ref().map(|me| me.node.announcement.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::main_thread::test_main::{self, MainThread};
    use idgen_core::{Config, Identity, Refused};

    /// The tests' main thread with an empty table and an issuing standing, both put back
    /// when the test ends (pass or fail), so no other test sees what one left.
    struct Fresh {
        _main: MainThread,
    }

    fn fresh() -> Fresh {
        let main = test_main::become_main();
        reset();
        Fresh { _main: main }
    }

    fn reset() {
        STANDING.store(ISSUING, Ordering::Relaxed);
        TABLE.with(|table| {
            table.me = None;
            table.peers.clear();
            table.decision = Decision::default();
            table.promoted_against.clear();
            table.must_refuse = false;
            table.refusal.clear();
            table.detail.clear();
            table.live_listed = None;
        });
    }

    impl Drop for Fresh {
        fn drop(&mut self) {
            reset();
        }
    }

    fn id(name: char) -> String {
        name.to_string().repeat(idgen_core::NODE_ID_LEN)
    }

    fn entry(name: char, role: Role, failed: bool) -> TableEntry {
        TableEntry {
            id: id(name),
            address: format!("127.0.0.1:{}", 30_000 + u32::from(name)),
            role,
            failed,
        }
    }

    fn master(name: char) -> TableEntry {
        entry(name, Role::Master, false)
    }

    fn said(offset: u64, since: u64) -> Announcement {
        let config = Config {
            identity: Identity { step: 8, offset },
            ..Config::default()
        };
        Announcement::of(&config, since)
    }

    /// A peer's announcement that names node `name` refused, as judged on its `since`.
    fn naming(offset: u64, since: u64, name: char, named_since: u64) -> Announcement {
        let mut announcement = said(offset, since);
        announcement.refused = vec![Refused {
            id: id(name),
            since_unix_ms: named_since,
        }];
        announcement
    }

    /// This node `b`, offset 0, loaded at 200, already compared.
    fn me_b() {
        set_me(master('b'), || said(0, 200));
        compared(true);
    }

    #[test]
    fn a_verdict_relayed_by_a_peer_makes_this_node_refuse_only_on_what_it_announces_now() {
        let _fresh = fresh();
        me_b();
        // c (offset 1) hears an earlier node on offset 0 that this node never hears (a
        // one-way link) and names this node: it refuses.
        heard(master('c'), naming(1, 50, 'b', 200));
        follow_table(&[master('c')]);
        let outcome = recompute(true, 1_000);
        assert_eq!(outcome.refusing_changed, Some(true));
        assert!(issuing_refused());
        assert!(refusal().contains(&id('c')), "{}", refusal());
        // The verdict was on what this node announced before a restart (since 100): heeded
        // no longer. Its refusal ends, and it ranks from now.
        heard(master('c'), naming(1, 50, 'b', 100));
        let outcome = recompute(true, 2_000);
        assert_eq!(outcome.refusing_changed, Some(false));
        assert!(!issuing_refused());
        assert_eq!(my_announcement().unwrap().since_unix_ms, 2_000);
        // Under `warn` a verdict is reported, never refused.
        heard(master('c'), naming(1, 50, 'b', 2_000));
        recompute(false, 3_000);
        assert!(!issuing_refused());
        assert_eq!(standing(), "warned");
    }

    #[test]
    fn a_refusal_outlasts_the_earlier_nodes_silence_and_ends_when_the_table_fails_or_drops_it() {
        let _fresh = fresh();
        me_b();
        // a took offset 0 first (since 100): this node, later, refuses.
        heard(master('a'), said(0, 100));
        follow_table(&[master('a')]);
        recompute(true, 1_000);
        assert!(issuing_refused());
        assert_eq!(conflicts(), 1);
        // a says nothing more for any number of table reads while the table lists it.
        for second in 2..100 {
            follow_table(&[master('a')]);
            recompute(true, second * 1_000);
            assert!(issuing_refused(), "lifted at {second} s of silence");
        }
        assert_eq!(peers(), 1);
        // The cluster fails a (FAIL, not PFAIL): this node issues, and names a refused.
        assert!(follow_table(&[entry('a', Role::Master, true)]));
        recompute(true, 100_000);
        assert!(!issuing_refused());
        let mine = my_announcement().unwrap();
        assert!(mine.refused.iter().any(|refused| refused.id == id('a')));
        assert_eq!(
            mine.since_unix_ms, 100_000,
            "ranks from when it issues again"
        );
        // a comes back having heard the verdict on it: it refuses, so it ranks after this
        // node, which keeps issuing.
        let mut back = said(0, 100);
        back.refusing = true;
        heard(master('a'), back);
        follow_table(&[master('a')]);
        recompute(true, 101_000);
        assert!(!issuing_refused());
        assert!(
            detail().contains(&format!("node {} refuses", id('a'))),
            "{}",
            detail()
        );
        // A node the table no longer lists is forgotten with its verdicts.
        heard(master('a'), said(0, 100));
        assert!(follow_table(&[]));
        recompute(true, 102_000);
        assert_eq!((peers(), conflicts()), (0, 0));
        assert!(!issuing_refused());
    }

    #[test]
    fn a_replica_promoted_while_it_conflicts_refuses_until_the_other_node_is_failed() {
        let _fresh = fresh();
        // This node is a replica on offset 3; master m (its own) restarted onto offset 3.
        set_me(entry('r', Role::Replica, false), || said(3, 10));
        compared(true);
        heard(master('m'), said(3, 500));
        follow_table(&[master('m')]);
        recompute(true, 1_000);
        assert!(!issuing_refused(), "a replica never refuses");
        assert!(
            detail().contains("would refuse if promoted"),
            "{}",
            detail()
        );
        // A failover: this node is promoted, m is its replica now. m issues nothing, but
        // may have handed out values of offset 3 a moment ago: this node refuses while m
        // is a member that still holds offset 3.
        promoted(2_000);
        follow_table(&[entry('m', Role::Replica, false)]);
        recompute(true, 2_000);
        assert!(issuing_refused());
        assert!(refusal().contains("promoted"), "{}", refusal());
        for second in 3..10 {
            follow_table(&[entry('m', Role::Replica, false)]);
            recompute(true, second * 1_000);
            assert!(issuing_refused(), "the other node is still a member");
        }
        follow_table(&[entry('m', Role::Replica, true)]);
        recompute(true, 4_000);
        assert!(!issuing_refused());
    }
}
