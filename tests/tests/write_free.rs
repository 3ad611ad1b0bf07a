//! Write-free snowflakes, measured: the AOF and the replication stream grow by a bound
//! record per key per lease, not by a record per call. Run with `--nocapture` to see the
//! figures.

use idgen_tests::{info_field, Server, ServerOptions};
use redis::Connection;

const CALLS: usize = 100_000;

/// Sends `CALLS` single calls of `command key`, pipelined 1,000 at a time.
fn single_calls(conn: &mut Connection, command: &str, key: &str) {
    for _ in 0..CALLS / 1000 {
        let mut pipe = redis::pipe();
        for _ in 0..1000 {
            pipe.cmd(command).arg(key).ignore();
        }
        let _: () = pipe.query(conn).unwrap();
    }
}

/// Bytes in the AOF directory (base and incremental files).
fn aof_bytes(server: &Server) -> u64 {
    let dir = server.dir().join("appendonlydir");
    std::fs::read_dir(&dir)
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
        .unwrap()
        .parse()
        .unwrap()
}

/// AOF and replication-stream growth for `CALLS` single calls of `command` on a fresh
/// server with a replica attached.
fn growth(command: &str) -> (u64, u64, Server) {
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
    single_calls(&mut conn, command, "k");
    master.wait_replicated(1);
    let grown = (
        aof_bytes(&master) - aof_before,
        repl_offset(&master) - repl_before,
    );
    drop(replica);
    (grown.0, grown.1, master)
}

#[test]
fn snowflakes_write_a_bound_per_lease_not_a_record_per_call() {
    let (incr_aof, incr_repl, _) = growth("INCR");
    let (sf_aof, sf_repl, sf_server) = growth("SNOWFLAKE.NEXT");
    let bound_writes = info_field(&mut sf_server.conn(), "snowflake_bound_writes");
    println!(
        "{CALLS} single calls: AOF INCR {incr_aof} B, SNOWFLAKE.NEXT {sf_aof} B; replication \
         stream INCR {incr_repl} B, SNOWFLAKE.NEXT {sf_repl} B; {bound_writes} bound writes"
    );
    assert!(
        incr_aof > 1_000_000,
        "INCR wrote {incr_aof} bytes: is the AOF on?"
    );
    assert!(
        sf_aof * 100 <= incr_aof,
        "AOF: {sf_aof} B vs INCR's {incr_aof} B"
    );
    assert!(
        sf_repl * 100 <= incr_repl,
        "stream: {sf_repl} B vs INCR's {incr_repl} B"
    );
}
