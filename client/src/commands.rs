//! The module's commands on any redis-rs async connection an application already has — a
//! `MultiplexedConnection`, a `ConnectionManager`, a cluster connection, a connection from
//! a bb8 or deadpool pool — as [`IdgenAsyncCommands`] (in the style of redis-rs's own
//! `AsyncCommands` and RedisJSON's `JsonAsyncCommands`), and as [`Cmd`] builders for
//! pipelines.
//!
//! These are single round trips with no failover, identity check or local buffering: for
//! those, use [`crate::Client`].
//!
//! ```no_run
//! use idgen_client::IdgenAsyncCommands;
//!
//! # async fn example() -> redis::RedisResult<()> {
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let mut con = client.get_multiplexed_async_connection().await?;
//! let id: u64 = con.snowflake_next("orders").await?;
//! let text: String = con.snowflake_next_as("orders", idgen_client::IdFormat::Base62).await?;
//! let invoice: i64 = con.segment_next("invoice").await?;
//! let (first, last, step): (i64, i64, i64) = con.segment_next_count("invoice", 1000).await?;
//! # Ok(())
//! # }
//! ```

use idgen_core::IdFormat;
use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisFuture, ToRedisArgs};

/// The module's command names and argument words, from their declarations in
/// `idgen_core::commands` (shared with the module). Every command the client sends — from
/// [`crate::Client`], the local buffers, the identity check and [`IdgenAsyncCommands`] — is
/// built from these by [`build`].
pub(crate) mod names {
    use idgen_core::commands as declared;

    /// One snowflake ID, or a batch with `COUNT`.
    pub(crate) const SNOWFLAKE_NEXT: &str = declared::SNOWFLAKE_NEXT.name();
    /// One segment value, or a range with `COUNT`.
    pub(crate) const SEGMENT_NEXT: &str = declared::SEGMENT_NEXT.name();
    /// An ID's parts.
    pub(crate) const SNOWFLAKE_DECODE: &str = declared::SNOWFLAKE_DECODE.name();
    /// The lowest and highest ID of a time window.
    pub(crate) const SNOWFLAKE_RANGE: &str = declared::SNOWFLAKE_RANGE.name();
    /// The ID with given fields.
    pub(crate) const SNOWFLAKE_COMPOSE: &str = declared::SNOWFLAKE_COMPOSE.name();
    /// A node's step, offset, layout and module version.
    pub(crate) const IDGEN_IDENTITY: &str = declared::IDGEN_IDENTITY.name();
    /// How many IDs or values (`SNOWFLAKE.NEXT`, `SEGMENT.NEXT`).
    pub(crate) const COUNT: &str = declared::COUNT.word;
    /// A leased worker id for a holder (the leased generator).
    pub(crate) const LEASE_ACQUIRE: &str = declared::LEASE_ACQUIRE.name();
    /// A holder's window extended.
    pub(crate) const LEASE_RENEW: &str = declared::LEASE_RENEW.name();
    /// A holder's worker id given back.
    pub(crate) const LEASE_RELEASE: &str = declared::LEASE_RELEASE.name();
    /// How long a lease window should last (`LEASE.ACQUIRE`, `LEASE.RENEW`).
    pub(crate) const DURATION: &str = declared::DURATION.word;
    /// The shard field (`SNOWFLAKE.NEXT`).
    pub(crate) const SHARD: &str = declared::SHARD.word;
    /// The reply's text form (`SNOWFLAKE.NEXT`).
    pub(crate) const FORMAT: &str = declared::FORMAT.word;
}

/// `Cmd` builders for the module's commands, for pipelines and cluster pipelines:
/// `redis::pipe().add_command(idgen_client::commands::build::snowflake_next("orders"))`.
pub mod build {
    use super::names::*;
    use super::*;

    /// `name first`: a command and its first argument (a key, or an ID).
    fn command<A: ToRedisArgs>(name: &str, first: A) -> Cmd {
        let mut cmd = redis::cmd(name);
        cmd.arg(first);
        cmd
    }

    /// `cmd word value`: `cmd` with an option added.
    fn with<V: ToRedisArgs>(mut cmd: Cmd, word: &str, value: V) -> Cmd {
        cmd.arg(word).arg(value);
        cmd
    }

    /// `SNOWFLAKE.NEXT key`
    pub fn snowflake_next<K: ToRedisArgs>(key: K) -> Cmd {
        command(SNOWFLAKE_NEXT, key)
    }

    /// `SNOWFLAKE.NEXT key COUNT count`
    pub fn snowflake_next_count<K: ToRedisArgs>(key: K, count: u32) -> Cmd {
        with(snowflake_next(key), COUNT, count)
    }

    /// `SNOWFLAKE.NEXT key COUNT count SHARD shard`
    pub fn snowflake_next_in_shard<K: ToRedisArgs>(key: K, count: u32, shard: u64) -> Cmd {
        with(snowflake_next_count(key, count), SHARD, shard)
    }

    /// `SNOWFLAKE.NEXT key FORMAT format`: the ID as a string.
    pub fn snowflake_next_as<K: ToRedisArgs>(key: K, format: IdFormat) -> Cmd {
        with(snowflake_next(key), FORMAT, format.name())
    }

    /// `SEGMENT.NEXT key`
    pub fn segment_next<K: ToRedisArgs>(key: K) -> Cmd {
        command(SEGMENT_NEXT, key)
    }

    /// `SEGMENT.NEXT key COUNT count`: the range `[first, last, step]`.
    pub fn segment_next_count<K: ToRedisArgs>(key: K, count: u64) -> Cmd {
        with(segment_next(key), COUNT, count)
    }

    /// `SNOWFLAKE.DECODE id`
    pub fn snowflake_decode(id: i64) -> Cmd {
        command(SNOWFLAKE_DECODE, id)
    }

    /// `SNOWFLAKE.RANGE from-unix-ms to-unix-ms`
    pub fn snowflake_range(from_unix_ms: u64, to_unix_ms: u64) -> Cmd {
        let mut cmd = redis::cmd(SNOWFLAKE_RANGE);
        cmd.arg(from_unix_ms).arg(to_unix_ms);
        cmd
    }

    /// `SNOWFLAKE.COMPOSE unix-ms shard sequence`
    pub fn snowflake_compose(unix_ms: u64, shard: u64, sequence: u64) -> Cmd {
        let mut cmd = redis::cmd(SNOWFLAKE_COMPOSE);
        cmd.arg(unix_ms).arg(shard).arg(sequence);
        cmd
    }

    /// `IDGEN.IDENTITY`
    pub fn idgen_identity() -> Cmd {
        redis::cmd(IDGEN_IDENTITY)
    }

    /// `LEASE.ACQUIRE pool holder DURATION ms`: a free worker id of the pool and its window.
    pub fn lease_acquire(pool: &str, holder: &str, duration_ms: u64) -> Cmd {
        let mut cmd = command(LEASE_ACQUIRE, pool);
        cmd.arg(holder);
        with(cmd, DURATION, duration_ms)
    }

    /// `LEASE.RENEW pool worker-id holder DURATION ms`: the holder's window extended.
    pub fn lease_renew(pool: &str, worker: u64, holder: &str, duration_ms: u64) -> Cmd {
        let mut cmd = command(LEASE_RENEW, pool);
        cmd.arg(worker).arg(holder);
        with(cmd, DURATION, duration_ms)
    }

    /// `LEASE.RELEASE pool worker-id holder`: the holder's worker id given back.
    pub fn lease_release(pool: &str, worker: u64, holder: &str) -> Cmd {
        let mut cmd = command(LEASE_RELEASE, pool);
        cmd.arg(worker).arg(holder);
        cmd
    }
}

macro_rules! command_method {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) $(<$key:ident>)?) => {
        $(#[$doc])*
        fn $name<'a, $($key: ToRedisArgs + Send + Sync + 'a,)? RV: FromRedisValue>(
            &'a mut self,
            $($arg: $ty),*
        ) -> RedisFuture<'a, RV> {
            let cmd = build::$name($($arg),*);
            Box::pin(async move { cmd.query_async(self).await })
        }
    };
}

/// The module's commands on any redis-rs async connection, generic over the reply type as
/// redis-rs's commands are: `let id: u64 = con.snowflake_next("orders").await?;`.
pub trait IdgenAsyncCommands: ConnectionLike + Send + Sized {
    command_method!(
        /// `SNOWFLAKE.NEXT key`: one ID (read it as `u64`, `i64`, or [`crate::Id`] through
        /// `i64`).
        snowflake_next(key: K) <K>
    );
    command_method!(
        /// `SNOWFLAKE.NEXT key COUNT count`: `count` increasing IDs (`Vec<u64>`).
        snowflake_next_count(key: K, count: u32) <K>
    );
    command_method!(
        /// `SNOWFLAKE.NEXT key COUNT count SHARD shard`.
        snowflake_next_in_shard(key: K, count: u32, shard: u64) <K>
    );
    command_method!(
        /// `SNOWFLAKE.NEXT key FORMAT format`: one ID as a string (`String`).
        snowflake_next_as(key: K, format: IdFormat) <K>
    );
    command_method!(
        /// `SEGMENT.NEXT key`: the next value of this node's class (`i64`).
        segment_next(key: K) <K>
    );
    command_method!(
        /// `SEGMENT.NEXT key COUNT count`: the range `(first, last, step)`.
        segment_next_count(key: K, count: u64) <K>
    );
    command_method!(
        /// `SNOWFLAKE.DECODE id`: field/value pairs (`HashMap<String, redis::Value>`).
        snowflake_decode(id: i64)
    );
    command_method!(
        /// `SNOWFLAKE.RANGE from-unix-ms to-unix-ms`: `(lowest, highest)`.
        snowflake_range(from_unix_ms: u64, to_unix_ms: u64)
    );
    command_method!(
        /// `SNOWFLAKE.COMPOSE unix-ms shard sequence`: the ID with these fields.
        snowflake_compose(unix_ms: u64, shard: u64, sequence: u64)
    );
    command_method!(
        /// `IDGEN.IDENTITY`: the node's step, offset, layout and module version
        /// (`HashMap<String, String>`).
        idgen_identity()
    );
}

impl<C: ConnectionLike + Send + Sized> IdgenAsyncCommands for C {}
