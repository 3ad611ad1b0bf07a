//! `idgen watch`: once an interval, one line per node from `INFO idgen`: IDs per second by
//! kind, calls, errors and refusals per second, the snowflake clock's lead and pacing, and
//! the node's warnings. Like `redis-cli --stat`; until Ctrl-C or `--iterations`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use idgen_client::redis::{self, aio::MultiplexedConnection};

use crate::args::WatchArgs;
use crate::error::{CliError, EXIT_OK, EXIT_UNREACHABLE};
use crate::info::{number, parse_info};
use crate::target::{connect, NodeAddress, Target};

/// The counters a line shows as rates.
const COUNTERS: [&str; 6] = [
    "idgen_snowflake_ids_issued",
    "idgen_segment_ids_issued",
    "idgen_snowflake_calls",
    "idgen_segment_calls",
    "idgen_errors",
    "idgen_drift_refusals",
];

struct Watched {
    node: NodeAddress,
    conn: Option<MultiplexedConnection>,
    last: Option<(Instant, HashMap<String, String>)>,
}

const HEADER: &str = "node                   snowflake/s  segment/s   calls/s  errors/s  \
                      refusals/s  ahead_ms  paced  warnings";

/// Watches until Ctrl-C, or for `--iterations` samples.
pub async fn run(target: &Target, args: &WatchArgs, timeout: Duration) -> Result<u8, CliError> {
    let nodes = target.discover(timeout).await?;
    let mut watched: Vec<Watched> = nodes
        .into_iter()
        .map(|node| Watched {
            node,
            conn: None,
            last: None,
        })
        .collect();
    let interval = Duration::from_millis(args.interval_ms.max(10));
    let mut sample = 0u64;
    let mut any_unreachable = false;
    loop {
        if sample.is_multiple_of(20) {
            println!("{HEADER}");
        }
        for node in &mut watched {
            let line = node.sample(timeout).await;
            any_unreachable |= line.contains("unreachable");
            println!("{line}");
        }
        sample += 1;
        if args.iterations.is_some_and(|limit| sample >= limit) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(if any_unreachable && args.iterations.is_some() {
        EXIT_UNREACHABLE
    } else {
        EXIT_OK
    })
}

impl Watched {
    async fn sample(&mut self, timeout: Duration) -> String {
        let address = self.node.address.clone();
        match self.read(timeout).await {
            Ok(info) => {
                let now = Instant::now();
                let line = render(&address, &info, self.last.as_ref(), now);
                self.last = Some((now, info));
                line
            }
            Err(error) => {
                self.conn = None;
                self.last = None;
                format!("{address:<22} unreachable: {error}")
            }
        }
    }

    async fn read(&mut self, timeout: Duration) -> Result<HashMap<String, String>, CliError> {
        if self.conn.is_none() {
            self.conn = Some(connect(&self.node.info, timeout).await?);
        }
        let conn = self.conn.as_mut().expect("connected above");
        let text: String = redis::cmd("INFO")
            .arg("idgen")
            .query_async(conn)
            .await
            .map_err(|e| crate::error::from_redis(&self.node.address, &e))?;
        Ok(parse_info(&text))
    }
}

/// One line; rates need a previous sample (the first line shows `-`).
fn render(
    address: &str,
    info: &HashMap<String, String>,
    last: Option<&(Instant, HashMap<String, String>)>,
    now: Instant,
) -> String {
    if !info.contains_key("idgen_step") {
        return format!("{address:<22} no idgen module (INFO idgen is empty)");
    }
    let rates: Vec<Option<f64>> = COUNTERS
        .iter()
        .map(|field| {
            let (then, before) = last?;
            let seconds = now.duration_since(*then).as_secs_f64().max(0.001);
            let delta = number(info, field)?.saturating_sub(number(before, field)?);
            Some(delta as f64 / seconds)
        })
        .collect();
    let show = |rate: Option<f64>| rate.map_or("-".to_string(), |r| format!("{r:.0}"));
    let calls = match (rates[2], rates[3]) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    format!(
        "{address:<22} {:>11}  {:>9}  {:>8}  {:>8}  {:>10}  {:>8}  {:>5}  {}",
        show(rates[0]),
        show(rates[1]),
        show(calls),
        show(rates[4]),
        show(rates[5]),
        info.get("idgen_clock_ahead_ms").map_or("?", String::as_str),
        if info.get("idgen_clock_paced").map(String::as_str) == Some("1") {
            "yes"
        } else {
            "no"
        },
        info.get("idgen_warnings").map_or("?", String::as_str),
    )
}
