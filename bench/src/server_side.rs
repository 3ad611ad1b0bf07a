//! Server side: INCR, a Lua generator, SNOWFLAKE.NEXT and SEGMENT.NEXT (single and
//! batched) at 1, 8 and 64 connections with pipelines of 1 and 32, each case against its own
//! freshly started redis-server.

use idgen_tests::{info_field, Server, ServerOptions};

use crate::cpus;
use crate::driver::{self, Load};
use crate::stats::median;

/// A per-millisecond INCRBY generator with step and offset, in the style of the published
/// Redis Lua ID generators: it returns (millisecond, sequence) and the caller assembles the
/// ID (Lua numbers are doubles and cannot hold a 63-bit ID).
pub const LUA_GENERATOR: &str = r"
local step = tonumber(ARGV[1])
local offset = tonumber(ARGV[2])
local now = redis.call('TIME')
local ms = now[1] * 1000 + math.floor(now[2] / 1000)
local last = tonumber(redis.call('HGET', KEYS[1], 'ms') or '-1')
local seq
if last == ms then
  seq = redis.call('HINCRBY', KEYS[1], 'seq', step)
  if seq >= 4096 then return redis.error_reply('BUSY sequence used up in this millisecond') end
else
  redis.call('HSET', KEYS[1], 'ms', ms, 'seq', offset)
  seq = offset
end
return {ms, seq}
";

/// One way of producing IDs on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approach {
    Incr,
    Lua,
    Snowflake,
    Segment,
    SnowflakeBatch,
    SegmentBatch,
}

impl Approach {
    pub const ALL: [Approach; 6] = [
        Approach::Incr,
        Approach::Lua,
        Approach::Snowflake,
        Approach::Segment,
        Approach::SnowflakeBatch,
        Approach::SegmentBatch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Approach::Incr => "INCR k",
            Approach::Lua => "Lua generator (EVALSHA)",
            Approach::Snowflake => "SNOWFLAKE.NEXT k",
            Approach::Segment => "SEGMENT.NEXT k",
            Approach::SnowflakeBatch => "SNOWFLAKE.NEXT k COUNT 100",
            Approach::SegmentBatch => "SEGMENT.NEXT k COUNT 1000",
        }
    }

    /// The INFO idgen counter of IDs this approach issues, where the module counts them.
    fn issued_counter(self) -> Option<&'static str> {
        match self {
            Approach::Snowflake | Approach::SnowflakeBatch => Some("snowflake_ids_issued"),
            Approach::Segment | Approach::SegmentBatch => Some("segment_ids_issued"),
            Approach::Incr | Approach::Lua => None,
        }
    }

    pub fn ids_per_request(self) -> u64 {
        match self {
            Approach::SnowflakeBatch => 100,
            Approach::SegmentBatch => 1000,
            _ => 1,
        }
    }

    pub fn command(self, server: &Server) -> Vec<String> {
        let words: Vec<String> = match self {
            Approach::Lua => {
                let sha = load_lua_generator(server);
                vec![
                    "EVALSHA".into(),
                    sha,
                    "1".into(),
                    "gen".into(),
                    "1".into(),
                    "0".into(),
                ]
            }
            other => other.name().split(' ').map(String::from).collect(),
        };
        words
    }
}

/// The connections × pipeline grid.
pub const CLIENTS: [u32; 3] = [1, 8, 64];
/// Pipeline depths.
pub const PIPELINES: [u32; 2] = [1, 32];

/// One cell of the grid.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub approach: Approach,
    pub clients: u32,
    pub pipeline: u32,
    /// Median IDs per second over the rounds.
    pub ids_per_second: f64,
    /// Calls the module refused with DRIFT during the rounds (batched snowflakes).
    pub drift_refusals: u64,
    /// Rounds in which redis-benchmark stopped at a refusal: the server paced the cell,
    /// and its rate is the IDs issued over the round's wall time.
    pub paced_rounds: usize,
    /// The server's own CPU time per call (`INFO commandstats` usec_per_call).
    pub usec_per_call: Option<f64>,
}

/// Loads [`LUA_GENERATOR`] into `server`; its SHA1, for `EVALSHA`.
pub fn load_lua_generator(server: &Server) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(LUA_GENERATOR)
        .query(&mut server.conn())
        .expect("SCRIPT LOAD")
}

/// `usec_per_call` of `command` in `INFO commandstats`.
fn usec_per_call(server: &Server, command: &str) -> Option<f64> {
    let stats = server.info_value(
        "commandstats",
        &format!("cmdstat_{}", command.to_lowercase()),
    )?;
    stats
        .split(',')
        .find_map(|field| field.strip_prefix("usec_per_call="))
        .and_then(|value| value.parse().ok())
}

/// Module arguments of every benchmarked server: a single instance (step 1), with the
/// restart fence off so a freshly started server can borrow milliseconds at once.
pub const MODULE_ARGS: [&str; 2] = ["snowflake-restart-fence", "no"];

pub fn run(rounds: usize, scale: f64) -> Vec<Measurement> {
    let mut results = Vec::new();
    for approach in Approach::ALL {
        for clients in CLIENTS {
            for pipeline in PIPELINES {
                let server = Server::start_with(
                    ServerOptions::module(&MODULE_ARGS).run_under(&cpus::server_launcher()),
                )
                .unwrap_or_else(|failure| panic!("the server did not start:\n{}", failure.log));
                let command = approach.command(&server);
                let base = if pipeline == 1 { 30_000.0 } else { 400_000.0 };
                let requests =
                    ((base * scale) as u64 / approach.ids_per_request().min(10)).max(1000);
                let load = Load {
                    clients,
                    pipeline,
                    requests,
                    pinned: true,
                };
                let mut rates = Vec::new();
                let mut paced_rounds = 0;
                for _ in 0..rounds {
                    let mut conn = server.conn();
                    let before = approach
                        .issued_counter()
                        .map(|field| info_field(&mut conn, field));
                    let run = driver::run(server.port(), load, &command);
                    let rate = match (approach.issued_counter(), before, run.requests_per_second) {
                        // IDs the module actually issued over redis-benchmark's elapsed time
                        // (requests / rps), so refused calls do not count.
                        (Some(field), Some(before), Some(rps)) => {
                            let after: f64 = info_field(&mut conn, field).parse().unwrap();
                            let issued = after - before.parse::<f64>().unwrap();
                            issued * rps / requests as f64
                        }
                        // redis-benchmark stopped at a refusal: what was issued over the
                        // round's wall time.
                        (Some(field), Some(before), None) => {
                            paced_rounds += 1;
                            let after: f64 = info_field(&mut conn, field).parse().unwrap();
                            let issued = after - before.parse::<f64>().unwrap();
                            issued / run.elapsed.as_secs_f64()
                        }
                        (_, _, rps) => {
                            let rps = rps.unwrap_or_else(|| {
                                panic!("redis-benchmark gave no rate for {command:?}")
                            });
                            rps * approach.ids_per_request() as f64
                        }
                    };
                    rates.push(rate);
                }
                let drift_refusals = info_field(&mut server.conn(), "drift_refusals")
                    .parse()
                    .unwrap();
                let measurement = Measurement {
                    approach,
                    clients,
                    pipeline,
                    ids_per_second: median(&rates),
                    drift_refusals,
                    paced_rounds,
                    usec_per_call: usec_per_call(&server, &command[0]),
                };
                eprintln!(
                    "{:<28} c={clients:<3} P={pipeline:<3} {:>14.0} IDs/s{}",
                    approach.name(),
                    measurement.ids_per_second,
                    if paced_rounds > 0 {
                        format!(" (paced: {paced_rounds} of {rounds} rounds refused with DRIFT)")
                    } else {
                        String::new()
                    }
                );
                results.push(measurement);
            }
        }
    }
    results
}
