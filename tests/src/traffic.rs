//! What a command costs the AOF and the replication stream: bytes written for a number of
//! single calls, on a fresh master (AOF on) with a replica attached.

use crate::server::{Server, ServerOptions};

/// Bytes one run of calls added.
pub struct WriteTraffic {
    /// Growth of the AOF directory (base and incremental files).
    pub aof_bytes: u64,
    /// Growth of the master's replication offset: bytes sent to each replica.
    pub replication_bytes: u64,
    /// The master, still running (for its INFO).
    pub master: Server,
}

/// Sends `calls` single calls of `command key` (pipelined 1,000 at a time) to a fresh
/// master with `appendonly yes`, `appendfsync no` and one replica, and measures what they
/// added to the AOF and the replication stream.
pub fn write_traffic(command: &str, calls: usize) -> WriteTraffic {
    let master = Server::start_with(
        ServerOptions::module(&["step", "2", "offset", "0"]).server_args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "no",
        ]),
    )
    .unwrap_or_else(|failure| panic!("{}", failure.log));
    let replica = Server::start_replica(&master, &["step", "2", "offset", "1"]);
    let mut conn = master.conn();
    let (aof_before, repl_before) = (aof_bytes(&master), repl_offset(&master));
    for sent in (0..calls).step_by(1000) {
        let mut pipe = redis::pipe();
        for _ in sent..calls.min(sent + 1000) {
            pipe.cmd(command).arg("k").ignore();
        }
        let _: () = pipe.query(&mut conn).expect("the calls");
    }
    master.wait_replicated(1);
    let traffic = WriteTraffic {
        aof_bytes: aof_bytes(&master) - aof_before,
        replication_bytes: repl_offset(&master) - repl_before,
        master,
    };
    drop(replica);
    traffic
}

fn aof_bytes(server: &Server) -> u64 {
    std::fs::read_dir(server.dir().join("appendonlydir"))
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.metadata().ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0)
}

fn repl_offset(server: &Server) -> u64 {
    server
        .info_value("replication", "master_repl_offset")
        .and_then(|offset| offset.parse().ok())
        .expect("master_repl_offset")
}
