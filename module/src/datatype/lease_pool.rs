//! The `leasepool` key type: a pool of leased worker ids (`idgen_core::LeasePool`): per
//! worker id ever granted in it, the holder, its window, the highest end ever granted and
//! the last renewal.
//!
//! A module type rather than a hash: a client's `HSET` cannot move a window or a fence
//! back, `TYPE` says what the key is, and loading a pool (an RDB file, a full sync,
//! `RESTORE`/`MIGRATE`, a slot migration) raises this instance's fences under its windows
//! as it arrives. Replicas and the AOF receive absolute effects: one `LEASE.SETWORKER` per
//! changed worker id (and per worker id in an AOF rewrite), never the command.

use idgen_core::{LeasePool, Window, WorkerLease};

use crate::ffi::data_type::{AofArgs, AofCommand, DataType, Digest, ModuleDataType, Rdb};
use crate::state::leases;

/// What a pool key holds.
#[derive(Debug, Clone, Default)]
pub struct LeasePoolKey {
    /// The pool's worker ids.
    pub pool: LeasePool,
}

/// The registered type; `TYPE key` answers `leasepool`.
pub static LEASE_POOL_TYPE: DataType<LeasePoolKey> = DataType::new();

/// The only encoding so far: a count, then per worker id its fields and holder.
const ENCODING: i32 = 0;

/// The replicated and AOF form of one worker id:
/// `LEASE.SETWORKER pool worker start end fence renewed holder` (an empty holder: released).
pub fn set_worker_args(lease: &WorkerLease) -> ([i64; 5], Vec<u8>) {
    (
        [
            lease.worker as i64,
            lease.window.start as i64,
            lease.window.end as i64,
            lease.fence as i64,
            lease.renewed_at as i64,
        ],
        lease.holder.clone().unwrap_or_default(),
    )
}

/// A worker id from its replicated fields (see [`set_worker_args`]).
pub fn worker_from_fields(fields: [u64; 5], holder: &[u8]) -> WorkerLease {
    let [worker, start, end, fence, renewed_at] = fields;
    WorkerLease {
        worker,
        holder: (!holder.is_empty()).then(|| holder.to_vec()),
        window: Window { start, end },
        fence,
        renewed_at,
    }
}

impl ModuleDataType for LeasePoolKey {
    const NAME: &'static str = "leasepool";
    const ENCODING_VERSION: i32 = ENCODING;
    const HAS_AUX: bool = false;

    fn data_type() -> &'static DataType<Self> {
        &LEASE_POOL_TYPE
    }

    fn rdb_load(rdb: &mut Rdb<'_>, encver: i32) -> Option<Self> {
        if encver != ENCODING {
            rdb.log_warning(&format!(
                "this lease pool was written by a newer idgen release (leasepool encoding \
                 {encver}); this release reads encoding {ENCODING}"
            ));
            return None;
        }
        let count = rdb.load_unsigned().ok()?;
        let mut pool = LeasePool::new();
        leases::with_fences(|fences| -> Option<()> {
            for _ in 0..count {
                let mut fields = [0u64; 5];
                for field in &mut fields {
                    *field = rdb.load_unsigned().ok()?;
                }
                let holder = rdb.load_bytes().ok()?;
                pool.put(worker_from_fields(fields, &holder), fences);
            }
            Some(())
        })?;
        Some(LeasePoolKey { pool })
    }

    fn rdb_save(&self, rdb: &mut Rdb<'_>) {
        rdb.save_unsigned(self.pool.leases().count() as u64);
        for lease in self.pool.leases() {
            let (fields, holder) = set_worker_args(lease);
            for field in fields {
                rdb.save_unsigned(field as u64);
            }
            rdb.save_bytes(&holder);
        }
    }

    fn aof_commands(&self) -> Vec<AofCommand> {
        self.pool
            .leases()
            .map(|lease| {
                let (fields, holder) = set_worker_args(lease);
                AofCommand {
                    name: idgen_core::commands::LEASE_SETWORKER.name,
                    args: AofArgs::FiveAndBytes(fields, holder),
                }
            })
            .collect()
    }

    fn digest(&self, digest: &mut Digest<'_>) {
        for lease in self.pool.leases() {
            let (fields, holder) = set_worker_args(lease);
            for field in fields {
                digest.add(field);
            }
            digest.add(holder.len() as i64);
            for byte in holder {
                digest.add(i64::from(byte));
            }
        }
        digest.end_sequence();
    }

    fn memory_usage(&self) -> usize {
        std::mem::size_of::<LeasePoolKey>()
            + self
                .pool
                .leases()
                .map(|lease| {
                    std::mem::size_of::<WorkerLease>()
                        + 32
                        + lease.holder.as_ref().map_or(0, Vec::len)
                })
                .sum::<usize>()
    }

    fn aux_save(_rdb: &mut Rdb<'_>) {}

    fn aux_load(_rdb: &mut Rdb<'_>, _encver: i32) -> bool {
        true
    }
}
