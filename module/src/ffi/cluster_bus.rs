//! The raw side of the cluster bus: module messages between the nodes of a Redis Cluster
//! (`RedisModule_SendClusterMessage`, `RedisModule_RegisterClusterMessageReceiver`), this
//! node's id and other nodes' addresses. The receiver decodes the sender and payload and
//! hands them, under the panic guard, to a safe handler (`events::identity_exchange`).
//!
//! Every server the project supports (Redis 7.0–8.x, Valkey 8–9) offers these functions;
//! they are looked up as pointers all the same, and a server without them leaves the
//! exchange off instead of failing to load.

use std::ffi::{c_char, c_int, c_uchar, CString};

use redis_module::{raw, Context};

use crate::ffi::guard;

/// Bytes in a cluster node id.
pub const NODE_ID_LEN: usize = raw::REDISMODULE_NODE_ID_LEN as usize;

/// The module's message type for identity announcements (a module has 256 of its own).
const ANNOUNCEMENT: u8 = 1;

/// What the module does with a message from another node.
pub trait ClusterMessageHandler {
    /// `sender` (a node id) sent `payload`.
    fn received(ctx: &Context, sender: &str, payload: &[u8]);
}

/// # Safety
/// Called by Redis only, for a message of a type this module registered, with the sender's
/// id (`NODE_ID_LEN` bytes) and the payload (`len` bytes), alive for the call.
unsafe extern "C" fn on_message<H: ClusterMessageHandler>(
    ctx: *mut raw::RedisModuleCtx,
    sender_id: *const c_char,
    _message_type: u8,
    payload: *const c_uchar,
    len: u32,
) {
    guard::or_log("reading a cluster message", (), || {
        if sender_id.is_null() {
            return;
        }
        // SAFETY: Redis passes the sender's id as NODE_ID_LEN bytes (not NUL-terminated).
        let sender = unsafe { std::slice::from_raw_parts(sender_id.cast::<u8>(), NODE_ID_LEN) };
        let payload = if payload.is_null() || len == 0 {
            &[][..]
        } else {
            // SAFETY: Redis passes `len` bytes of payload, alive for the call.
            unsafe { std::slice::from_raw_parts(payload, len as usize) }
        };
        let sender = String::from_utf8_lossy(sender);
        H::received(&Context::new(ctx), &sender, payload);
    });
}

/// Registers `H` for identity announcements. Returns false, changing nothing, on a server
/// without module cluster messages.
pub fn register<H: ClusterMessageHandler>(ctx: &Context) -> bool {
    let (Some(register), Some(_), Some(_)) = (
        // SAFETY: reading function pointers the server filled in at load.
        unsafe { raw::RedisModule_RegisterClusterMessageReceiver },
        unsafe { raw::RedisModule_SendClusterMessage },
        unsafe { raw::RedisModule_GetMyClusterID },
    ) else {
        return false;
    };
    // SAFETY: ctx is the loading context; the callback has the signature Redis expects.
    unsafe { register(ctx.ctx, ANNOUNCEMENT, Some(on_message::<H>)) };
    true
}

/// Sends `payload` as an announcement to node `target`, or to every node when `None`.
/// Returns whether the server accepted it (not outside cluster mode, nor for a node it does
/// not know).
pub fn send(ctx: &Context, target: Option<&str>, payload: &[u8]) -> bool {
    // SAFETY: reading a function pointer the server filled in at load.
    let Some(send) = (unsafe { raw::RedisModule_SendClusterMessage }) else {
        return false;
    };
    let Ok(len) = u32::try_from(payload.len()) else {
        return false;
    };
    let target = match target.map(CString::new) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => return false,
    };
    let target_ptr = target.as_ref().map_or(std::ptr::null(), |id| id.as_ptr());
    // SAFETY: ctx is a live context of this call or timer; the target is NULL (every node)
    // or a NUL-terminated id; the payload is `len` bytes the server copies before returning.
    let status = unsafe {
        send(
            ctx.ctx,
            target_ptr,
            ANNOUNCEMENT,
            payload.as_ptr().cast::<c_char>(),
            len,
        )
    };
    status == raw::REDISMODULE_OK as c_int
}

/// A node as this node's cluster table shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    /// Its cluster id.
    pub id: String,
    /// `ip:port`.
    pub address: String,
    /// Whether it is a master (else a replica).
    pub master: bool,
    /// Whether the cluster marked it failed (FAIL, not a mere PFAIL).
    pub failed: bool,
    /// Whether it is this node.
    pub myself: bool,
}

/// Node `id` as this node's cluster table shows it, or `None` if it knows no such node.
pub fn node_info(ctx: &Context, id: &str) -> Option<NodeEntry> {
    // SAFETY: reading a function pointer the server filled in at load.
    let info = unsafe { raw::RedisModule_GetClusterNodeInfo }?;
    let c_id = CString::new(id).ok()?;
    // The server copies at most 46 bytes (an IPv6 text) into `ip`.
    let mut ip = [0u8; 64];
    let mut port: c_int = 0;
    let mut flags: c_int = 0;
    // SAFETY: ctx is a live context; id is NUL-terminated; ip has room for the longest
    // address text and stays NUL-terminated; master_id is not asked for (NULL); port and
    // flags are plain ints.
    let status = unsafe {
        info(
            ctx.ctx,
            c_id.as_ptr(),
            ip.as_mut_ptr().cast::<c_char>(),
            std::ptr::null_mut(),
            &mut port,
            &mut flags,
        )
    };
    if status != raw::REDISMODULE_OK as c_int {
        return None;
    }
    let end = ip
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(ip.len() - 1);
    let flags = flags as u32;
    Some(NodeEntry {
        id: id.to_string(),
        address: format!("{}:{port}", String::from_utf8_lossy(&ip[..end])),
        master: flags & raw::REDISMODULE_NODE_MASTER != 0,
        failed: flags & raw::REDISMODULE_NODE_FAIL != 0,
        myself: flags & raw::REDISMODULE_NODE_MYSELF != 0,
    })
}

/// Every node in this node's cluster table (itself included; nodes still in handshake are
/// left out by the server), or `None` outside cluster mode or on a server without the call.
pub fn members(ctx: &Context) -> Option<Vec<NodeEntry>> {
    // SAFETY: reading function pointers the server filled in at load.
    let (list, free) = unsafe {
        (
            raw::RedisModule_GetClusterNodesList?,
            raw::RedisModule_FreeClusterNodesList?,
        )
    };
    let mut count: usize = 0;
    // SAFETY: ctx is a live context; the server writes the count and returns an array of
    // `count` ids (NODE_ID_LEN bytes each, not NUL-terminated), or NULL outside cluster mode.
    let ids = unsafe { list(ctx.ctx, &mut count) };
    if ids.is_null() {
        return None;
    }
    let mut names = Vec::with_capacity(count);
    for index in 0..count {
        // SAFETY: the array holds `count` pointers, each to NODE_ID_LEN readable bytes,
        // alive until the free below.
        let id = unsafe { *ids.add(index) };
        if id.is_null() {
            continue;
        }
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(id.cast::<u8>(), NODE_ID_LEN) };
        names.push(String::from_utf8_lossy(bytes).into_owned());
    }
    // SAFETY: the array came from GetClusterNodesList and is freed once.
    unsafe { free(ids) };
    Some(names.iter().filter_map(|id| node_info(ctx, id)).collect())
}
