//! What a segment key costs in memory beside an `INCR` key, and what 10^6 of them leave
//! behind once deleted: `used_memory` (which counts the module's allocations, made through
//! Redis's allocator) before and after, on one server with the module loaded.

use idgen_tests::{info_line, Server};
use redis::{cmd, Connection};

/// Keys per measurement.
pub const KEYS: u32 = 1_000_000;

/// The figures, in bytes per key.
#[derive(Debug, Clone)]
pub struct KeyMemory {
    pub keys: u32,
    pub incr_key: f64,
    /// An `INCRBY` key holding a ten-digit number, as a segment key does after its fence.
    pub incr_key_ten_digits: f64,
    pub segment_key: f64,
    pub segment_left_behind: f64,
}

fn used_memory(conn: &mut Connection) -> i64 {
    let info: String = cmd("INFO").arg("memory").query(conn).unwrap();
    info_line(&info, "used_memory").unwrap().parse().unwrap()
}

/// One call of `command` (its words after the key: `extra`) on each of `keys` keys named
/// `prefix:i`, pipelined.
fn call_each(conn: &mut Connection, command: &str, extra: &[&str], prefix: &str, keys: u32) {
    for start in (0..keys).step_by(10_000) {
        let mut pipe = redis::pipe();
        for i in start..keys.min(start + 10_000) {
            pipe.cmd(command)
                .arg(format!("{prefix}:{i:07}"))
                .arg(extra)
                .ignore();
        }
        let () = pipe.query(conn).unwrap();
    }
}

/// Bytes per key of `keys` keys made by one `command` each, and left once they are gone.
fn per_key(
    conn: &mut Connection,
    command: &str,
    extra: &[&str],
    prefix: &str,
    keys: u32,
) -> (f64, f64) {
    let before = used_memory(conn);
    call_each(conn, command, extra, prefix, keys);
    let full = used_memory(conn);
    call_each(conn, "UNLINK", &[], prefix, keys);
    // The server shrinks its key table in its cron after mass deletions: give it 10 s.
    let mut after = used_memory(conn);
    for _ in 0..100 {
        if after - before <= i64::from(keys) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        after = used_memory(conn);
    }
    let keys = f64::from(keys);
    (
        (full - before) as f64 / keys,
        (after - before) as f64 / keys,
    )
}

/// Measures `keys` `INCR` keys, then as many segment keys, on one server.
pub fn run(keys: u32) -> KeyMemory {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    // Warm the allocator and the server's own tables up first.
    per_key(&mut conn, "SEGMENT.NEXT", &[], "warm", 10_000);
    let (incr_key, _) = per_key(&mut conn, "INCR", &[], "incr", keys);
    let (incr_key_ten_digits, _) = per_key(&mut conn, "INCRBY", &["1000000001"], "big", keys);
    let (segment_key, segment_left_behind) = per_key(&mut conn, "SEGMENT.NEXT", &[], "seg", keys);
    KeyMemory {
        keys,
        incr_key,
        incr_key_ten_digits,
        segment_key,
        segment_left_behind,
    }
}
