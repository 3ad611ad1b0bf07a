//! Nodes compare identities themselves: in Redis Cluster every node announces its identity
//! (step, offset, layout, when it started, its module version) to all others over the
//! cluster bus — right after load, every second, and at once to a node it hears from for the
//! first time — and keeps what it hears (`state::peer_identities`). Every change of what is
//! known computes the conflicts again; a new or cleared conflict is logged once, and the
//! later node of a conflict refuses to issue under the `refuse` policy (docs/identity.md).
//!
//! Outside cluster mode nothing is sent or kept.

use std::time::Duration;

use idgen_core::{Announcement, KnownNode};
use redis_module::{Context, ContextFlags};

use crate::ffi::cluster_bus::{self, ClusterMessageHandler};
use crate::ffi::guard;
use crate::state::clock;
use crate::state::instance;
use crate::state::peer_identities::{self, Heard};
use crate::state::settings;
use crate::state::version;

/// How often a node announces itself to every other node.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);

/// A node not heard from for this long is forgotten (it is gone, or removed from the
/// cluster), and the conflicts it was part of clear.
pub const FORGET_AFTER_MS: u64 = 10_000;

/// Reads other nodes' announcements.
struct Exchange;

impl ClusterMessageHandler for Exchange {
    fn received(ctx: &Context, sender: &str, payload: &[u8]) {
        let Some(announcement) = Announcement::decode(payload) else {
            return;
        };
        let address = cluster_bus::node_address(ctx, sender).unwrap_or_default();
        let node = KnownNode {
            id: sender.to_string(),
            address,
            announcement,
        };
        let heard = peer_identities::heard(node, clock::monotonic_ms());
        if heard == Heard::New {
            // A node just started or joined: tell it who is here without waiting a second.
            if let Some(mine) = peer_identities::my_announcement() {
                cluster_bus::send(ctx, Some(sender), &mine.encode());
            }
        }
        if heard != Heard::Same {
            conclude(ctx);
        }
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
    ctx.create_timer(Duration::from_millis(10), tick, ());
}

/// The timer's callback, under the panic guard; the next announcement is armed whatever
/// happened.
fn tick(ctx: &Context, (): ()) {
    guard::or_log("announcing this node's identity", (), || announce(ctx));
    ctx.create_timer(ANNOUNCE_EVERY, tick, ());
}

/// Sends this node's announcement to every node, and forgets nodes gone silent.
fn announce(ctx: &Context) {
    let Some(my_id) = cluster_bus::my_id() else {
        return;
    };
    let address = cluster_bus::node_address(ctx, &my_id).unwrap_or_default();
    let announcement = Announcement::of(instance::config(), peer_identities::started())
        .with_version(version::TEXT);
    let payload = announcement.encode();
    let me = KnownNode {
        id: my_id,
        address,
        announcement,
    };
    let changed = peer_identities::set_me(me) != Heard::Same;
    let forgotten = peer_identities::expire(clock::monotonic_ms(), FORGET_AFTER_MS);
    // Refused before the node has joined a cluster (no other node to send to): the next
    // tick tries again.
    cluster_bus::send(ctx, None, &payload);
    if changed || forgotten {
        conclude(ctx);
    }
}

/// Computes the conflicts again and logs what changed, once.
fn conclude(ctx: &Context) {
    let refuse = settings::refuses_on_conflict();
    let outcome = peer_identities::recompute(refuse);
    if let Some(detail) = outcome.detail_changed {
        if detail.is_empty() {
            ctx.log_notice("idgen identity conflicts cleared: no two known nodes conflict");
        } else {
            let policy = if refuse {
                "the later node of each conflict refuses to issue"
            } else {
                "identity-conflicts is warn here: this node keeps issuing even where it is the \
                 later node"
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
}
