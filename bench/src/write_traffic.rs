//! What each server-side command costs the AOF and the replication stream: bytes added by
//! 100,000 single calls on a fresh master with AOF on and one replica.

use idgen_tests::write_traffic;

/// Single calls per command.
pub const CALLS: usize = 100_000;

/// The commands measured, `INCR` first (the baseline).
pub const COMMANDS: [&str; 3] = ["INCR", "SNOWFLAKE.NEXT", "SEGMENT.NEXT"];

/// One command's figures.
#[derive(Debug, Clone)]
pub struct Traffic {
    pub command: &'static str,
    pub aof_bytes: u64,
    pub replication_bytes: u64,
}

/// Measures every command (a few seconds in all; the byte counts do not depend on load).
pub fn run() -> Vec<Traffic> {
    COMMANDS
        .iter()
        .map(|&command| {
            let traffic = write_traffic(command, CALLS);
            Traffic {
                command,
                aof_bytes: traffic.aof_bytes,
                replication_bytes: traffic.replication_bytes,
            }
        })
        .collect()
}
