//! Nodes compare identities themselves: in Redis Cluster every node announces its identity
//! (step, offset, layout, since when it issues, its module version) and its verdicts on
//! others to all nodes over the cluster bus — when its announcement changes, at once, and as
//! a heartbeat every few seconds — and keeps what it hears (`state::peer_identities`).
//! Every change of what is known draws the verdicts again; a new or cleared conflict is
//! logged once, and a node the verdicts name refuses to issue under the `refuse` policy
//! (docs/identity.md).
//!
//! Who is a member, master, replica or failed is read from the cluster's own table each
//! second: a node that goes quiet keeps its last word until the cluster drops or fails it.
//!
//! Outside cluster mode nothing is sent or kept.

use std::time::Duration;

use idgen_core::{Announcement, Role, SettingId};
use redis_module::{Context, ContextFlags};

use crate::ffi::cluster_bus::{self, ClusterMessageHandler, NodeEntry};
use crate::ffi::guard;
use crate::state::clock;
use crate::state::instance;
use crate::state::leases;
use crate::state::peer_identities::{self, Heard, TableEntry};
use crate::state::settings;
use crate::state::stats;
use crate::state::version;

/// How often a node reads the cluster's table (a local read, no traffic).
const FOLLOW_TABLE_EVERY: Duration = Duration::from_secs(1);

/// How often a node repeats an unchanged announcement to every node: a message lost, or a
/// node that missed the last change, is repaired within this.
pub const HEARTBEAT_EVERY_TICKS: u64 = 5;

/// After a start, how long a node waits to hear every node of the cluster's table before its
/// verdicts alone decide (a node of an older release, which announces nothing, is never
/// heard). Restarts normally hear every node within a round trip: each replies at once.
const STARTUP_WAIT_TICKS: u64 = 5;

/// Reads other nodes' announcements.
struct Exchange;

impl ClusterMessageHandler for Exchange {
    fn received(ctx: &Context, sender: &str, payload: &[u8]) {
        stats::ANNOUNCEMENTS_RECEIVED.add(1);
        let Some(announcement) = Announcement::decode(payload) else {
            stats::ANNOUNCEMENTS_UNREADABLE.add(1);
            return;
        };
        // The cluster's table is the authority on membership: a sender it does not know
        // (yet) is heard again with its next message.
        let Some(entry) = cluster_bus::node_info(ctx, sender) else {
            return;
        };
        let heard = peer_identities::heard(table_entry(entry), announcement);
        // Verdicts first, so that what a new node hears back already judges it.
        let sent_to_all = heard != Heard::Same && conclude(ctx);
        if heard == Heard::New && !sent_to_all {
            // A node just started or joined: tell it who is here without waiting.
            if let Some(mine) = peer_identities::my_announcement() {
                send(ctx, Some(sender), &mine);
            }
        }
        if heard == Heard::New && peer_identities::comparing() {
            finish_comparing(ctx, peer_identities::heard_all_listed(), false);
        }
    }
}

fn table_entry(entry: NodeEntry) -> TableEntry {
    TableEntry {
        id: entry.id,
        address: entry.address,
        role: if entry.master {
            Role::Master
        } else {
            Role::Replica
        },
        failed: entry.failed,
    }
}

/// Starts the exchange when the server runs in cluster mode.
pub fn start(ctx: &Context) {
    if !ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return;
    }
    if !cluster_bus::register::<Exchange>(ctx) {
        ctx.log_warning(
            "this server offers no module cluster messages: idgen nodes cannot compare their \
             identities; run `idgen check` against the deployment instead",
        );
        return;
    }
    // Until it has heard the others, a node does not know whether it conflicts with one.
    peer_identities::start_comparing();
    ctx.create_timer(Duration::from_millis(10), tick, 0u64);
}

/// The timer's callback, under the panic guard; the next one is armed whatever happened.
fn tick(ctx: &Context, count: u64) {
    guard::or_log("comparing identities with the cluster", (), || {
        follow(ctx, count)
    });
    ctx.create_timer(FOLLOW_TABLE_EVERY, tick, count.wrapping_add(1));
}

/// Reads the cluster's table, draws the verdicts again if it changed, and sends the
/// heartbeat when due.
fn follow(ctx: &Context, count: u64) {
    let Some(members) = cluster_bus::members(ctx) else {
        return;
    };
    let (mine, others): (Vec<_>, Vec<_>) = members.into_iter().partition(|node| node.myself);
    let Some(me) = mine.into_iter().next() else {
        return;
    };
    let first = || {
        Announcement::of(instance::config(), peer_identities::started())
            .with_version(version::TEXT)
            .with_lease_workers(leases::setup().band.count)
    };
    let mut changed = peer_identities::set_me(table_entry(me), first);
    let entries: Vec<TableEntry> = others.into_iter().map(table_entry).collect();
    changed |= peer_identities::follow_table(&entries);
    let sent = changed && conclude(ctx);
    finish_comparing(
        ctx,
        peer_identities::heard_all_listed(),
        count >= STARTUP_WAIT_TICKS,
    );
    if !sent && count.is_multiple_of(HEARTBEAT_EVERY_TICKS) {
        if let Some(mine) = peer_identities::my_announcement() {
            // Refused before the node has joined a cluster (no other node to send to): the
            // next heartbeat tries again.
            send(ctx, None, &mine);
        }
    }
}

/// Ends the startup comparison once every live node of the table was heard (`heard_all`),
/// or when `waited_enough`; logs the outcome.
fn finish_comparing(ctx: &Context, heard_all: bool, waited_enough: bool) {
    if !peer_identities::comparing() {
        return;
    }
    if !heard_all && !waited_enough {
        return;
    }
    conclude(ctx);
    peer_identities::compared(settings::refuses_on_conflict());
    if peer_identities::standing() == "refusing" {
        ctx.log_warning(&format!(
            "idgen refuses SNOWFLAKE.NEXT and SEGMENT.NEXT on this node: {}",
            peer_identities::refusal()
        ));
    } else if !heard_all {
        ctx.log_warning(
            "idgen issues although some cluster nodes did not announce their identity within \
             5 s of this start (an older release, or unreachable): run `idgen check` against \
             the deployment",
        );
    }
}

/// This node was promoted: it ranks from now, and tells every node at once.
pub fn promoted(ctx: &Context) {
    if !ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return;
    }
    peer_identities::promoted(clock::wall_unix_ms());
    conclude(ctx);
}

fn send(ctx: &Context, target: Option<&str>, announcement: &Announcement) {
    // The hidden test setting: announce as a later release would (docs/identity.md).
    let bytes = if settings::get(SettingId::DebugAnnounceFutureRecord) != 0 {
        announcement.encode_as_later_release()
    } else {
        announcement.encode()
    };
    if cluster_bus::send(ctx, target, &bytes) {
        stats::ANNOUNCEMENTS_SENT.add(1);
    }
}

/// Draws the verdicts again, logs what changed once, and sends this node's announcement to
/// every node if it changed. Returns whether it was sent.
fn conclude(ctx: &Context) -> bool {
    let refuse = settings::refuses_on_conflict();
    let outcome = peer_identities::recompute(refuse, clock::wall_unix_ms());
    if let Some(detail) = outcome.detail_changed {
        if detail.is_empty() {
            ctx.log_notice("idgen identity conflicts cleared: no two known nodes conflict");
        } else {
            let policy = if refuse {
                "a master named by a conflict refuses to issue"
            } else {
                "identity-conflicts is warn here: this node keeps issuing even where a \
                 conflict names it"
            };
            ctx.log_warning(&format!("idgen identity conflict: {detail} ({policy})"));
        }
    }
    match outcome.refusing_changed {
        Some(true) => ctx.log_warning(&format!(
            "idgen refuses SNOWFLAKE.NEXT and SEGMENT.NEXT on this node: {}",
            peer_identities::refusal()
        )),
        Some(false) => ctx.log_notice("idgen issues again on this node: its conflict cleared"),
        None => {}
    }
    if !outcome.announcement_changed {
        return false;
    }
    if let Some(mine) = peer_identities::my_announcement() {
        send(ctx, None, &mine);
    }
    true
}
