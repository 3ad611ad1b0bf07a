//! Watches the server's configuration for settings that void a guarantee, and says so in
//! the log (once, when it appears) and in `INFO idgen` (`idgen_warnings`).

use std::time::Duration;

use redis_module::{Context, RedisValue};

use crate::ffi::guard;
use crate::state::instance;
use crate::state::stats;
use crate::state::warnings;

/// How often the configuration is checked.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Starts the periodic check; the first runs right after load.
pub fn start(ctx: &Context) {
    ctx.create_timer(Duration::from_millis(10), check, ());
}

/// The timer's callback. redis-module's timer trampoline calls it with no panic guard of
/// its own, so the check runs under ours; the next check is armed whatever happened.
fn check(ctx: &Context, (): ()) {
    guard::or_log(
        "checking the configuration for guarantees at risk",
        (),
        || {
            for warning in warnings::replace(find(ctx)) {
                ctx.log_warning(&format!("guarantee at risk: {warning}"));
            }
        },
    );
    ctx.create_timer(CHECK_EVERY, check, ());
}

fn config_get(ctx: &Context, name: &str) -> String {
    match ctx.call("CONFIG", &["GET", name]) {
        Ok(RedisValue::Array(items)) if items.len() == 2 => match &items[1] {
            RedisValue::SimpleString(s) => s.clone(),
            RedisValue::BulkString(s) => s.clone(),
            RedisValue::BulkRedisString(s) => s.to_string_lossy(),
            other => format!("{other:?}"),
        },
        _ => String::new(),
    }
}

fn connected_replicas(ctx: &Context) -> u64 {
    let info = ctx.server_info("replication");
    info.field("connected_slaves")
        .and_then(|value| value.to_string_lossy().parse().ok())
        .unwrap_or(0)
}

/// Every setting of the running server that voids a guarantee, said for an operator.
fn find(ctx: &Context) -> Vec<String> {
    let config = instance::config();
    let mut warnings = Vec::new();
    let policy = config_get(ctx, "maxmemory-policy");
    if policy.starts_with("allkeys-") {
        warnings.push(format!(
            "maxmemory-policy is {policy}: counter keys can be evicted and would then start \
             again from 0; use noeviction (or a volatile-* policy and no TTLs on counter keys)"
        ));
    }
    let aof = config_get(ctx, "appendonly") == "yes";
    let rdb = !config_get(ctx, "save").trim().is_empty();
    let fsync = config_get(ctx, "appendfsync");
    if !aof && !rdb {
        warnings.push(
            "no persistence (appendonly no, save \"\"): after a restart, segment counters start \
             again from 0 and hand out values already issued; enable appendonly"
                .to_string(),
        );
    } else if config.segment_fence == 0 && (!aof || fsync != "always") {
        let window = if aof {
            format!("appendfsync {fsync} can lose the last writes in a crash")
        } else {
            "RDB-only persistence loses the writes since the last snapshot in a crash".to_string()
        };
        warnings.push(format!(
            "{window}, and segment-fence is 0, so those segment values would be handed out again \
             after the restart; set idgen.segment-fence above the values issued per key in that window"
        ));
    }
    let every_write_on_disk = aof && fsync == "always";
    if !(config.restart_fence || every_write_on_disk) {
        warnings.push(
            "snowflake-restart-fence is no without appendfsync always: snowflake IDs issued \
             just before a crash and lost from disk can be issued again after a quick restart"
                .to_string(),
        );
    }
    if config.identity.step == 1 && connected_replicas(ctx) > 0 {
        warnings.push(
            "replicas are attached but step is 1: a promoted replica would share offset 0 with \
             its old master; give every instance, replicas included, its own offset"
                .to_string(),
        );
    }
    warnings.extend(counter_misuse());
    warnings
}

/// What clients did to segment counters that the module can see and an operator must not
/// do (docs/guarantees.md). These stay until the server restarts: the counts in INFO say
/// whether it still happens.
fn counter_misuse() -> Vec<String> {
    let mut warnings = Vec::new();
    if stats::SEGMENT_TTLS_SEEN.get() > 0 || stats::SEGMENT_COUNTERS_EXPIRED.get() > 0 {
        warnings.push(
            "segment counter keys were given a TTL (idgen_segment_ttls_seen) or expired \
             (idgen_segment_counters_expired): a counter that expires starts again from 0 plus \
             the segment fence and can hand out values again; never put a TTL on a counter \
             key, DEL a counter you no longer need"
                .to_string(),
        );
    }
    if stats::SEGMENT_COUNTERS_LOWERED.get() > 0 {
        warnings.push(
            "a SET lowered segment counters below values this instance handed out \
             (idgen_segment_counters_lowered); idgen continued above those values, but a \
             restart before the key's next SEGMENT.NEXT continues from the lowered value plus \
             the segment fence; to restart a counter lower on purpose, DEL it first"
                .to_string(),
        );
    }
    warnings
}
