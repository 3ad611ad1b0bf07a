//! Server events the module follows: promotion of this instance to master.

use std::ffi::{c_int, c_void};

use redis_module::{raw, Context};

use crate::{counters, fence, state};

/// The role-changed subevent meaning "this instance is now a master".
const NOW_MASTER: u64 = 0;

unsafe extern "C" fn on_role_changed(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent != NOW_MASTER {
        return;
    }
    counters::PROMOTIONS.add(1);
    fence::new_event();
    let fence = state::config().segment_fence;
    let message = format!(
        "promoted to master: each segment key skips {fence} values on its first use \
         (idgen.segment-fence); snowflake IDs continue from this instance's own offset"
    );
    Context::new(ctx).log_notice(&message);
}

/// Subscribes to role changes.
pub fn subscribe(ctx: &Context) -> Result<(), String> {
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        dataver: 1,
    };
    // SAFETY: ctx is the loading context; the callback has the signature Redis expects.
    let status = unsafe {
        raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, event, Some(on_role_changed))
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("could not subscribe to the role-changed server event".into());
    }
    Ok(())
}
