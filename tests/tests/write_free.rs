//! Write-free snowflakes, measured: the AOF and the replication stream grow by a bound
//! record per key per lease, not by a record per call. Run with `--nocapture` to see the
//! figures.

use idgen_tests::{info_field, write_traffic};

const CALLS: usize = 100_000;

#[test]
fn snowflakes_write_a_bound_per_lease_not_a_record_per_call() {
    let incr = write_traffic("INCR", CALLS);
    let snowflake = write_traffic("SNOWFLAKE.NEXT", CALLS);
    let bound_writes = info_field(&mut snowflake.master.conn(), "snowflake_bound_writes");
    println!(
        "{CALLS} single calls: AOF INCR {} B, SNOWFLAKE.NEXT {} B; replication stream INCR {} B, \
         SNOWFLAKE.NEXT {} B; {bound_writes} bound writes",
        incr.aof_bytes, snowflake.aof_bytes, incr.replication_bytes, snowflake.replication_bytes
    );
    assert!(
        incr.aof_bytes > 1_000_000,
        "INCR wrote {} bytes: is the AOF on?",
        incr.aof_bytes
    );
    assert!(snowflake.aof_bytes * 100 <= incr.aof_bytes);
    assert!(snowflake.replication_bytes * 100 <= incr.replication_bytes);
}
