//! What the cluster identity guard costs one node at 10, 100 and 1,000 nodes: the bytes of
//! one announcement (the payload; Redis adds its cluster message header of about 2.3 KB),
//! the messages a node sends and receives per second with the heartbeat, and the main-thread
//! time of reading one announcement and of drawing all verdicts again.
//!
//!     cargo run --release -p idgen-core --example identity_cost
//!
//! Simulated peers: the same work the module does per message (decode, compare) and per
//! change (`decide` over every member), without a server. docs/identity.md quotes the output.

use std::time::Instant;

use idgen_core::{decide, Announcement, Config, Identity, KnownNode, Member, Role};

/// Redis's cluster message header on the wire, whatever the payload (cluster_legacy.h).
const HEADER_BYTES: usize = 2_256;
/// Heartbeat: every node repeats its announcement this often (seconds).
const HEARTBEAT_S: usize = 5;

fn members(count: usize, conflicts: usize) -> Vec<Member> {
    let step = (count as u64 + 1).next_power_of_two();
    (0..count)
        .map(|i| {
            // The last `conflicts` nodes take node 0's offset.
            let offset = if i + conflicts >= count { 0 } else { i as u64 };
            let config = Config {
                identity: Identity { step, offset },
                ..Config::default()
            };
            Member {
                node: KnownNode {
                    id: format!("{i:040x}"),
                    address: format!("10.0.{}.{}:6379", i / 250, i % 250),
                    announcement: Announcement::of(&config, 1_700_000_000_000 + i as u64)
                        .with_version("0.3.0"),
                },
                role: if i % 2 == 0 {
                    Role::Master
                } else {
                    Role::Replica
                },
                failed: false,
            }
        })
        .collect()
}

fn time_per_run(runs: u32, mut work: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..runs {
        work();
    }
    start.elapsed().as_secs_f64() / f64::from(runs)
}

fn main() {
    println!("nodes | payload B | on the wire B/s per node (in = out) | decode one µs | decide all µs | main thread per s µs");
    for count in [10, 100, 1_000] {
        let members = members(count, 3);
        let mut announcement = members[0].node.announcement.clone();
        announcement.refused = decide(&members).refused();
        let payload = announcement.encode();
        let per_second = (count - 1) / HEARTBEAT_S;
        let wire = per_second * (payload.len() + HEADER_BYTES);
        let decode = time_per_run(20_000, || {
            std::hint::black_box(Announcement::decode(std::hint::black_box(&payload)));
        });
        let runs = if count >= 1_000 { 50 } else { 500 };
        let decide_all = time_per_run(runs, || {
            std::hint::black_box(decide(std::hint::black_box(&members)));
        });
        // Steady state: heartbeats only (each decoded and compared); no verdict changes.
        let main_thread = per_second as f64 * decode;
        println!(
            "{count} | {} | {wire} | {:.2} | {:.0} | {:.0}",
            payload.len(),
            decode * 1e6,
            decide_all * 1e6,
            main_thread * 1e6
        );
    }
}
