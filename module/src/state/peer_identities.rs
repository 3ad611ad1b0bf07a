//! What this node heard from the other nodes of its cluster about their identities, the
//! conflicts among them all (`idgen_core::find_conflicts`), and whether this node must
//! refuse to issue because of one.
//!
//! The issuing commands read one flag ([`issuing_refused`]): a relaxed load of an
//! `AtomicBool`, no lookup and no allocation; everything else here runs when a message
//! arrives or the exchange's timer fires, on Redis's main thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use idgen_core::{find_conflicts, Announcement, Conflict, KnownNode};

use crate::ffi::main_thread::MainThreadCell;

/// Whether this node refuses to issue: it is the later node of a conflict and the policy is
/// `refuse`.
static REFUSING: AtomicBool = AtomicBool::new(false);

/// When the module loaded, in unix ms (which node of a conflicting pair joined later).
static STARTED_UNIX_MS: AtomicU64 = AtomicU64::new(0);

/// One other node as last heard.
struct Peer {
    node: KnownNode,
    heard_ms: u64,
}

/// Everything known, and the conclusions drawn from it.
struct Table {
    me: Option<KnownNode>,
    peers: Vec<Peer>,
    conflicts: Vec<Conflict>,
    detail: String,
    refusal: String,
}

static TABLE: MainThreadCell<Table> = MainThreadCell::new(Table {
    me: None,
    peers: Vec::new(),
    conflicts: Vec::new(),
    detail: String::new(),
    refusal: String::new(),
});

/// Whether SNOWFLAKE.NEXT and SEGMENT.NEXT must refuse because of a conflict: one relaxed
/// load, on every call.
#[inline(always)]
pub fn issuing_refused() -> bool {
    REFUSING.load(Ordering::Relaxed)
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
    /// A node not known before (or forgotten since).
    New,
    /// A known node whose identity or address changed (it restarted).
    Changed,
    /// Nothing new.
    Same,
}

/// Records this node as it now announces itself.
pub fn set_me(node: KnownNode) -> Heard {
    TABLE.with(|table| {
        let heard = match &table.me {
            None => Heard::New,
            Some(known) if *known == node => Heard::Same,
            Some(_) => Heard::Changed,
        };
        table.me = Some(node);
        heard
    })
}

/// Records what node `node.id` announced, heard at `now_ms` (a monotonic clock).
pub fn heard(node: KnownNode, now_ms: u64) -> Heard {
    TABLE.with(|table| {
        if let Some(peer) = table.peers.iter_mut().find(|peer| peer.node.id == node.id) {
            peer.heard_ms = now_ms;
            if peer.node == node {
                return Heard::Same;
            }
            peer.node = node;
            return Heard::Changed;
        }
        table.peers.push(Peer {
            node,
            heard_ms: now_ms,
        });
        Heard::New
    })
}

/// Forgets nodes not heard from since `now_ms - after_ms` (gone, or removed from the
/// cluster); returns whether any was forgotten.
pub fn expire(now_ms: u64, after_ms: u64) -> bool {
    TABLE.with(|table| {
        let before = table.peers.len();
        table
            .peers
            .retain(|peer| now_ms.saturating_sub(peer.heard_ms) <= after_ms);
        table.peers.len() != before
    })
}

/// What changed when the conflicts were computed again.
pub struct Outcome {
    /// The new description, when it differs from the last (to log once).
    pub detail_changed: Option<String>,
    /// Whether this node now refuses (when that changed).
    pub refusing_changed: Option<bool>,
}

/// Computes the conflicts among this node and its peers again; this node refuses if it is
/// the later node of one and `refuse` is the policy.
pub fn recompute(refuse: bool) -> Outcome {
    TABLE.with(|table| {
        let Some(me) = table.me.clone() else {
            return Outcome {
                detail_changed: None,
                refusing_changed: None,
            };
        };
        let mut nodes = vec![me.clone()];
        nodes.extend(table.peers.iter().map(|peer| peer.node.clone()));
        table.conflicts = find_conflicts(&nodes);
        let mine = table
            .conflicts
            .iter()
            .find(|conflict| conflict.later.id == me.id);
        table.refusal = mine.map(Conflict::refusal).unwrap_or_default();
        let detail = table
            .conflicts
            .iter()
            .map(Conflict::describe)
            .collect::<Vec<_>>()
            .join(" | ");
        let detail_changed = (detail != table.detail).then(|| detail.clone());
        table.detail = detail;
        let refusing = refuse && mine.is_some();
        let was = REFUSING.swap(refusing, Ordering::Relaxed);
        Outcome {
            detail_changed,
            refusing_changed: (was != refusing).then_some(refusing),
        }
    })
}

/// Nodes heard from (`idgen_peers`).
pub fn peers() -> usize {
    TABLE.with(|table| table.peers.len())
}

/// Conflicting pairs known now (`idgen_conflicts`).
pub fn conflicts() -> usize {
    TABLE.with(|table| table.conflicts.len())
}

/// The conflicts in one line, empty when none (`idgen_conflict_detail`).
pub fn detail() -> String {
    TABLE.with(|table| table.detail.clone())
}

/// Why this node refuses to issue (the error's text after its code word).
pub fn refusal() -> String {
    TABLE.with(|table| table.refusal.clone())
}

/// This node's own announcement as last built, to send.
pub fn my_announcement() -> Option<Announcement> {
    TABLE.with(|table| table.me.as_ref().map(|me| me.announcement.clone()))
}
