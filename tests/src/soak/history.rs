//! What every client received: the calls, the snowflake IDs and the segment ranges, kept
//! compact (a range is its first value, step and count, never its values).

use std::collections::BTreeMap;

/// One answered or failed call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The client that made it (an index into [`History::clients`]).
    pub client: u16,
    /// The node that answered, as a label (`n0`…), or `follow` when the project's client
    /// chose the node itself.
    pub node: String,
    /// Milliseconds since the soak started, when the reply came.
    pub at_ms: u64,
    /// The key asked for.
    pub key: String,
}

/// A segment range as the server replied it: `count` values `first, first+step, …`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progression {
    /// The smallest value.
    pub first: i64,
    /// The distance between values (≥ 1).
    pub step: u64,
    /// How many values (≥ 1).
    pub count: u64,
}

impl Progression {
    /// The largest value.
    pub fn last(&self) -> i64 {
        self.first + (self.step * (self.count - 1)) as i64
    }
}

/// Everything the clients of one soak received.
#[derive(Debug, Default)]
pub struct History {
    /// Client names, by index (`follow-0`, `stale-n1`…).
    pub clients: Vec<String>,
    /// Every answered call, by index.
    pub calls: Vec<Call>,
    /// Snowflake IDs with the index of the call that got them.
    pub snowflakes: Vec<(i64, u32)>,
    /// Segment ranges by key, each with the index of the call that got it.
    pub segments: BTreeMap<String, Vec<(Progression, u32)>>,
    /// Failed calls by kind of error (`READONLY`, `timeout`, `connection`…).
    pub errors: BTreeMap<String, u64>,
    /// Times (ms since the start) at which a client that follows the master got an
    /// answer, for the longest outage.
    pub follower_answers: Vec<u64>,
}

impl History {
    /// Records an answered snowflake call.
    pub fn add_snowflakes(&mut self, call: Call, ids: &[i64]) {
        let index = self.push_call(call);
        self.snowflakes.extend(ids.iter().map(|&id| (id, index)));
    }

    /// Records an answered segment call.
    pub fn add_segment(&mut self, call: Call, range: Progression) {
        let key = call.key.clone();
        let index = self.push_call(call);
        self.segments.entry(key).or_default().push((range, index));
    }

    /// Records a failed call.
    pub fn add_error(&mut self, kind: &str) {
        *self.errors.entry(kind.to_string()).or_default() += 1;
    }

    fn push_call(&mut self, call: Call) -> u32 {
        self.calls.push(call);
        (self.calls.len() - 1) as u32
    }

    /// Adds another client's history to this one (call indexes are renumbered).
    pub fn merge(&mut self, other: History) {
        let client_base = self.clients.len() as u16;
        let call_base = self.calls.len() as u32;
        self.clients.extend(other.clients);
        self.calls.extend(other.calls.into_iter().map(|mut call| {
            call.client += client_base;
            call
        }));
        self.snowflakes.extend(
            other
                .snowflakes
                .into_iter()
                .map(|(id, call)| (id, call + call_base)),
        );
        for (key, ranges) in other.segments {
            self.segments
                .entry(key)
                .or_default()
                .extend(ranges.into_iter().map(|(r, call)| (r, call + call_base)));
        }
        for (kind, count) in other.errors {
            *self.errors.entry(kind).or_default() += count;
        }
        self.follower_answers.extend(other.follower_answers);
    }

    /// Number of segment values received (the sum of the ranges' counts).
    pub fn segment_values(&self) -> u64 {
        self.segments
            .values()
            .flat_map(|ranges| ranges.iter().map(|(r, _)| r.count))
            .sum()
    }
}
