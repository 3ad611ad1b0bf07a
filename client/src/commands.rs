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

/// Declares each command once: its doc line and how its `Cmd` is built. From the one list
/// come the [`build`] functions (for pipelines) and the [`IdgenAsyncCommands`] methods (one
/// round trip on any async connection, generic over the reply type as redis-rs's commands
/// are).
macro_rules! commands {
    ($(
        $(#[$doc:meta])*
        $name:ident($($arg:ident: $ty:ty),*) $(<$key:ident>)? => $body:expr;
    )*) => {
        /// `Cmd` builders for the module's commands, for pipelines and cluster pipelines:
        /// `redis::pipe().add_command(idgen_client::commands::build::snowflake_next("orders"))`.
        pub mod build {
            use super::names::*;
            use super::*;

            /// The command `name` with `args` (a value, or a tuple of them, in order).
            fn command(name: &str, args: impl ToRedisArgs) -> Cmd {
                let mut cmd = redis::cmd(name);
                cmd.arg(args);
                cmd
            }

            $(
                $(#[$doc])*
                pub fn $name$(<$key: ToRedisArgs>)?($($arg: $ty),*) -> Cmd {
                    $body
                }
            )*
        }

        /// The module's commands on any redis-rs async connection, generic over the reply
        /// type as redis-rs's commands are: `let id: u64 = con.snowflake_next("orders").await?;`.
        pub trait IdgenAsyncCommands: ConnectionLike + Send + Sized {
            $(
                $(#[$doc])*
                fn $name<'a, $($key: ToRedisArgs + Send + Sync + 'a,)? RV: FromRedisValue>(
                    &'a mut self,
                    $($arg: $ty),*
                ) -> RedisFuture<'a, RV> {
                    let cmd = build::$name($($arg),*);
                    Box::pin(async move { cmd.query_async(self).await })
                }
            )*
        }
    };
}

commands! {
    /// `SNOWFLAKE.NEXT key`: one ID (read it as `u64`, `i64`, or [`crate::Id`] through `i64`).
    snowflake_next(key: K) <K> => command(SNOWFLAKE_NEXT, key);
    /// `SNOWFLAKE.NEXT key COUNT count`: `count` increasing IDs (`Vec<u64>`).
    snowflake_next_count(key: K, count: u32) <K> => command(SNOWFLAKE_NEXT, (key, COUNT, count));
    /// `SNOWFLAKE.NEXT key COUNT count SHARD shard`.
    snowflake_next_in_shard(key: K, count: u32, shard: u64) <K> =>
        command(SNOWFLAKE_NEXT, (key, COUNT, count, SHARD, shard));
    /// `SNOWFLAKE.NEXT key FORMAT format`: one ID as a string (`String`).
    snowflake_next_as(key: K, format: IdFormat) <K> =>
        command(SNOWFLAKE_NEXT, (key, FORMAT, format.name()));
    /// `SEGMENT.NEXT key`: the next value of this node's class (`i64`).
    segment_next(key: K) <K> => command(SEGMENT_NEXT, key);
    /// `SEGMENT.NEXT key COUNT count`: the range `(first, last, step)`.
    segment_next_count(key: K, count: u64) <K> => command(SEGMENT_NEXT, (key, COUNT, count));
    /// `SNOWFLAKE.DECODE id`: field/value pairs (`HashMap<String, redis::Value>`).
    snowflake_decode(id: i64) => command(SNOWFLAKE_DECODE, id);
    /// `SNOWFLAKE.RANGE from-unix-ms to-unix-ms`: `(lowest, highest)`.
    snowflake_range(from_unix_ms: u64, to_unix_ms: u64) =>
        command(SNOWFLAKE_RANGE, (from_unix_ms, to_unix_ms));
    /// `SNOWFLAKE.COMPOSE unix-ms shard sequence`: the ID with these fields.
    snowflake_compose(unix_ms: u64, shard: u64, sequence: u64) =>
        command(SNOWFLAKE_COMPOSE, (unix_ms, shard, sequence));
    /// `IDGEN.IDENTITY`: the node's step, offset, layout and module version
    /// (`HashMap<String, String>`).
    idgen_identity() => redis::cmd(IDGEN_IDENTITY);
    /// `LEASE.ACQUIRE pool holder DURATION ms`: a free worker id of the pool and its window
    /// (see [`crate::LeasedGenerator`], which leases for you).
    lease_acquire(pool: &str, holder: &str, duration_ms: u64) =>
        command(LEASE_ACQUIRE, (pool, holder, DURATION, duration_ms));
    /// `LEASE.RENEW pool worker-id holder DURATION ms`: the holder's window extended.
    lease_renew(pool: &str, worker: u64, holder: &str, duration_ms: u64) =>
        command(LEASE_RENEW, (pool, worker, holder, DURATION, duration_ms));
    /// `LEASE.RELEASE pool worker-id holder`: the holder's worker id given back.
    lease_release(pool: &str, worker: u64, holder: &str) =>
        command(LEASE_RELEASE, (pool, worker, holder));
}

impl<C: ConnectionLike + Send + Sized> IdgenAsyncCommands for C {}
