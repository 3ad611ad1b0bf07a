//! The command line: subcommands, and the topology options every subcommand shares.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Check, watch and use a redis-idgen deployment.
///
/// Nodes are URLs as redis-cli and the client crate take them:
/// `redis://[user:password@]host:port[/db]`, `rediss://` for TLS (add `#insecure` to skip the
/// certificate check of a self-signed certificate). Without any, 127.0.0.1:6379.
#[derive(Debug, Parser)]
#[command(name = "idgen", version, about, long_about = None)]
pub struct Cli {
    /// Where the deployment is.
    #[command(flatten)]
    pub target: TargetArgs,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The deployment's nodes, given one of three ways.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// An independent node (repeat for several; each has its own offset).
    #[arg(long = "node", short = 'u', value_name = "URL", global = true)]
    pub nodes: Vec<String>,

    /// A Redis Cluster, by one of its nodes (repeat for more seeds); every master and
    /// replica is found from it.
    #[arg(long, value_name = "URL", global = true, conflicts_with = "nodes")]
    pub cluster: Vec<String>,

    /// A Sentinel (repeat for more); needs --service. The master and replicas are found
    /// from it.
    #[arg(long, value_name = "URL", global = true, conflicts_with_all = ["nodes", "cluster"])]
    pub sentinel: Vec<String>,

    /// The master's name as the sentinels know it (`sentinel monitor NAME …`).
    #[arg(long, value_name = "NAME", global = true)]
    pub service: Option<String>,

    /// With --sentinel: a URL whose user, password, database and TLS are used for the data
    /// nodes the sentinels name (its host and port are ignored). Without it they are
    /// reached without credentials.
    #[arg(long, value_name = "URL", global = true)]
    pub data_nodes: Option<String>,

    /// How long to wait for a node to connect or answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2000, global = true)]
    pub timeout_ms: u64,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check that the deployment is sound: one line per finding, pass/warn/fail.
    /// Exit 0 when nothing fails, 1 when a check fails, 2 when a node cannot be reached.
    Check(CheckArgs),
    /// A live view, once a second per node: IDs per second by kind, calls, errors,
    /// refusals, the clock's pacing, warnings. Until Ctrl-C.
    Watch(WatchArgs),
    /// Take IDs: snowflake IDs (default) or segment values for KEY.
    Next(NextArgs),
    /// Take an ID apart: time, shard, sequence and the offset of the node that issued it
    /// (or the leased worker id that made it).
    Decode(DecodeArgs),
    /// List a lease pool's worker ids: holder, state, window and last renewal.
    Leases(LeasesArgs),
}

/// `idgen leases`.
#[derive(Debug, Args)]
pub struct LeasesArgs {
    /// The pool's key.
    pub pool: String,

    /// Print the leases as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `idgen check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Independent nodes to check (the same as --node URL for each).
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,

    /// Print the findings as one JSON document instead of lines.
    #[arg(long)]
    pub json: bool,

    /// The key the permission probes name: one of the application's keys, so that key
    /// patterns in its ACL (`~orders:*`) are checked too. Nothing is written to it.
    #[arg(long, value_name = "KEY", default_value = "idgen:check")]
    pub probe_key: String,

    /// Offsets to keep free for nodes still to be added (replicas, new masters): warn when
    /// fewer are left.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub spare_offsets: u64,
}

/// `idgen watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Independent nodes to watch (the same as --node URL for each).
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,

    /// Stop after this many samples (default: until Ctrl-C).
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,

    /// Time between samples, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub interval_ms: u64,
}

/// `idgen next`.
#[derive(Debug, Args)]
pub struct NextArgs {
    /// The key to take IDs for.
    pub key: String,

    /// How many (a snowflake batch, or a segment range of this size).
    #[arg(long, short = 'n', default_value_t = 1)]
    pub count: u32,

    /// Take segment values (`SEGMENT.NEXT`) instead of snowflake IDs.
    #[arg(long)]
    pub segment: bool,

    /// How to print snowflake IDs.
    #[arg(long, value_enum, default_value_t = OutputFormat::Decimal)]
    pub format: OutputFormat,
}

/// The text form of a snowflake ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The 63-bit integer.
    Decimal,
    /// Crockford base32, 13 characters, sorts like the numbers.
    Base32,
    /// base62, 11 characters, sorts like the numbers.
    Base62,
}

/// `idgen decode`: with a node (--node, --cluster, --sentinel), the deployment's layout;
/// without one, offline, with the default layout or the one these options give.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The ID: decimal, or its base32 or base62 text.
    pub id: String,

    /// Print the parts as JSON.
    #[arg(long)]
    pub json: bool,

    /// Offline: the deployment's step (all nodes share it), to name the issuing offset.
    #[arg(long, value_name = "N")]
    pub step: Option<u64>,

    /// Offline: the layout's epoch, in unix milliseconds (default 1704067200000,
    /// 2024-01-01).
    #[arg(long, value_name = "UNIX_MS")]
    pub epoch: Option<u64>,

    /// Offline: bits of the time field (default 41).
    #[arg(long, value_name = "BITS")]
    pub time_bits: Option<u32>,

    /// Offline: bits of the shard field (default 10).
    #[arg(long, value_name = "BITS")]
    pub shard_bits: Option<u32>,

    /// Offline: bits of the sequence field (default 12).
    #[arg(long, value_name = "BITS")]
    pub sequence_bits: Option<u32>,

    /// Offline: milliseconds in one unit of the time field (default 1).
    #[arg(long, value_name = "MS")]
    pub time_unit_ms: Option<u64>,
}
