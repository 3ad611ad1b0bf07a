//! The history checker: no snowflake ID twice across all keys and clients, no segment value
//! twice per key (ranges compared as arithmetic progressions, never expanded), every value
//! in the residue class of the node that answered, the longest time without an answer.
//!
//! Pure: it reads a [`History`] and the deployment's offsets and returns a [`Verdict`].

use std::collections::BTreeMap;

use super::history::{History, Progression};

/// Values two calls both received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// `snowflake`, or the segment key.
    pub what: String,
    /// The smallest repeated value.
    pub value: i64,
    /// How many values the two calls share.
    pub count: u64,
    /// The two calls (indexes into [`History::calls`]).
    pub calls: (u32, u32),
}

/// A value outside the residue class of the node that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongClass {
    /// The value.
    pub value: i64,
    /// Its residue (`value mod step`; for snowflakes, of the sequence field).
    pub residue: u64,
    /// The call that got it.
    pub call: u32,
}

/// Where an ID came from: a client's call, or a leased-generator holder process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// An index into [`History::calls`].
    Call(u32),
    /// An index into the holder processes given to [`check_leased`].
    Holder(u32),
}

/// An ID a holder issued that another holder, or a client of the module, also got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedDuplicate {
    /// The ID.
    pub id: u64,
    /// Who got it (at least one a holder).
    pub sources: (Source, Source),
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Repeated values, pair by pair.
    pub duplicates: Vec<Duplicate>,
    /// Repeated values counted one by one (a range pair sharing 5 values counts 5).
    pub duplicate_values: u64,
    /// Values outside their node's residue class (at most the first 100 kept).
    pub wrong_class: Vec<WrongClass>,
    /// How many values were outside their node's residue class.
    pub wrong_class_count: u64,
    /// The longest time in ms during which no client that follows the master got an
    /// answer (counted from the start and up to the end too).
    pub longest_outage_ms: u64,
    /// IDs of holders that another holder or a client also got (also counted in
    /// `duplicate_values`); at most the first 1000 kept.
    pub leased_duplicates: Vec<LeasedDuplicate>,
    /// Holder IDs whose worker id lies outside the leased band (counted in
    /// `wrong_class_count`).
    pub leased_outside_band: u64,
}

/// What the checker needs to know about the deployment.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The shared step.
    pub step: u64,
    /// Width of the snowflake sequence field (12 by default).
    pub sequence_bits: u32,
    /// Each node's offset, by label (`n0` → 0…).
    pub offsets: BTreeMap<String, u64>,
}

/// Checks a history; `duration_ms` is how long the clients ran.
pub fn check(history: &History, deployment: &Deployment, duration_ms: u64) -> Verdict {
    let mut verdict = Verdict::default();
    snowflake_duplicates(history, &mut verdict);
    for (key, ranges) in &history.segments {
        segment_duplicates(key, ranges, &mut verdict);
    }
    residues(history, deployment, &mut verdict);
    verdict.longest_outage_ms = longest_gap(&history.follower_answers, duration_ms);
    verdict
}

/// Checks the IDs of leased-generator holders (`holders[i]`: every ID process `i` issued)
/// together with every snowflake the clients got: none twice, and each holder ID's worker id
/// (shard field) at or above `band_first`. Duplicates among the clients alone are
/// [`check`]'s.
pub fn check_leased(
    history: &History,
    holders: &[&[u64]],
    deployment: &Deployment,
    band_first: u64,
    verdict: &mut Verdict,
) {
    let shard_mask = (1u64 << (63 - 41 - deployment.sequence_bits).min(63)) - 1;
    let mut all: Vec<(u64, Source)> = Vec::with_capacity(
        history.snowflakes.len() + holders.iter().map(|ids| ids.len()).sum::<usize>(),
    );
    for (index, ids) in holders.iter().enumerate() {
        for &id in ids.iter() {
            if (id >> deployment.sequence_bits) & shard_mask < band_first {
                verdict.leased_outside_band += 1;
                verdict.wrong_class_count += 1;
            }
            all.push((id, Source::Holder(index as u32)));
        }
    }
    all.extend(
        history
            .snowflakes
            .iter()
            .map(|&(id, call)| (id as u64, Source::Call(call))),
    );
    all.sort_unstable();
    for pair in all.windows(2) {
        let ((a, source_a), (b, source_b)) = (pair[0], pair[1]);
        let holder_involved =
            matches!(source_a, Source::Holder(_)) || matches!(source_b, Source::Holder(_));
        if a == b && holder_involved {
            verdict.duplicate_values += 1;
            if verdict.leased_duplicates.len() < 1000 {
                verdict.leased_duplicates.push(LeasedDuplicate {
                    id: a,
                    sources: (source_a, source_b),
                });
            }
        }
    }
}

fn snowflake_duplicates(history: &History, verdict: &mut Verdict) {
    let mut ids = history.snowflakes.clone();
    ids.sort_unstable();
    for pair in ids.windows(2) {
        if pair[0].0 == pair[1].0 {
            verdict.duplicate_values += 1;
            verdict.duplicates.push(Duplicate {
                what: "snowflake".into(),
                value: pair[0].0,
                count: 1,
                calls: (pair[0].1, pair[1].1),
            });
        }
    }
}

/// Sweeps one key's ranges in order of their first value, comparing each with the ranges
/// still open (whose last value is not below its first).
fn segment_duplicates(key: &str, ranges: &[(Progression, u32)], verdict: &mut Verdict) {
    let mut sorted: Vec<&(Progression, u32)> = ranges.iter().collect();
    sorted.sort_unstable_by_key(|(range, _)| (range.first, range.last()));
    let mut open: Vec<&(Progression, u32)> = Vec::new();
    for entry in sorted {
        let (range, call) = entry;
        open.retain(|(other, _)| other.last() >= range.first);
        for (other, other_call) in &open {
            if let Some((value, count)) = common_values(other, range) {
                verdict.duplicate_values += count;
                verdict.duplicates.push(Duplicate {
                    what: key.to_string(),
                    value,
                    count,
                    calls: (*other_call, *call),
                });
            }
        }
        open.push(entry);
    }
}

/// The smallest value two progressions share and how many they share, without listing
/// them: a common value solves x ≡ a.first (mod a.step), x ≡ b.first (mod b.step) inside
/// both intervals (the Chinese remainder theorem for steps that need not be coprime).
pub fn common_values(a: &Progression, b: &Progression) -> Option<(i64, u64)> {
    let (lo, hi) = (
        i128::from(a.first.max(b.first)),
        i128::from(a.last().min(b.last())),
    );
    if lo > hi {
        return None;
    }
    let (s, t) = (i128::from(a.step), i128::from(b.step));
    let g = gcd(s, t);
    let difference = i128::from(b.first) - i128::from(a.first);
    if difference.rem_euclid(g) != 0 {
        return None;
    }
    // s/g and t/g are coprime: the first has an inverse modulo the second.
    let (_, inverse, _) = extended_gcd(s / g, t / g);
    let modulus = t / g;
    // a.first + s·k ≡ b.first (mod t)  ⇔  (s/g)·k ≡ difference/g (mod t/g).
    let k =
        ((difference / g).rem_euclid(modulus) * inverse.rem_euclid(modulus)).rem_euclid(modulus);
    let solution = i128::from(a.first) + s * k;
    let lcm = s / g * t;
    let first = lo + (solution - lo).rem_euclid(lcm);
    if first > hi {
        return None;
    }
    Some((first as i64, ((hi - first) / lcm + 1) as u64))
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// (g, x, y) with a·x + b·y = g = gcd(a, b).
fn extended_gcd(a: i128, b: i128) -> (i128, i128, i128) {
    if b == 0 {
        (a, 1, 0)
    } else {
        let (g, x, y) = extended_gcd(b, a % b);
        (g, y, x - (a / b) * y)
    }
}

fn residues(history: &History, deployment: &Deployment, verdict: &mut Verdict) {
    let step = deployment.step;
    let sequence_mask = (1u64 << deployment.sequence_bits) - 1;
    let mut check = |value: i64, residue: u64, call: u32| {
        let node = &history.calls[call as usize].node;
        let fits = match deployment.offsets.get(node) {
            Some(&offset) => residue == offset,
            // A client that follows the master: any node of the deployment may have answered.
            None => deployment.offsets.values().any(|&offset| offset == residue),
        };
        if !fits {
            verdict.wrong_class_count += 1;
            if verdict.wrong_class.len() < 100 {
                verdict.wrong_class.push(WrongClass {
                    value,
                    residue,
                    call,
                });
            }
        }
    };
    for &(id, call) in &history.snowflakes {
        check(id, (id as u64 & sequence_mask) % step, call);
    }
    for ranges in history.segments.values() {
        for &(range, call) in ranges {
            let residue = range.first.rem_euclid(step as i64) as u64;
            // Every value of the range has the first value's residue only if the range's
            // step is a multiple of the deployment's.
            let residue = if range.step % step == 0 {
                residue
            } else {
                u64::MAX
            };
            check(range.first, residue, call);
        }
    }
}

/// The longest stretch of `[0, end_ms]` with no answer in `answers`.
pub fn longest_gap(answers: &[u64], end_ms: u64) -> u64 {
    let mut times = answers.to_vec();
    times.sort_unstable();
    let mut previous = 0;
    let mut longest = 0;
    for time in times.into_iter().chain(std::iter::once(end_ms)) {
        longest = longest.max(time.saturating_sub(previous));
        previous = previous.max(time);
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::history::Call;

    fn p(first: i64, step: u64, count: u64) -> Progression {
        Progression { first, step, count }
    }

    /// The common values by listing both progressions: what `common_values` must match.
    fn listed(a: &Progression, b: &Progression) -> Option<(i64, u64)> {
        let values_a: Vec<i64> = (0..a.count)
            .map(|i| a.first + (i * a.step) as i64)
            .collect();
        let common: Vec<i64> = (0..b.count)
            .map(|i| b.first + (i * b.step) as i64)
            .filter(|v| values_a.contains(v))
            .collect();
        common.first().map(|&first| (first, common.len() as u64))
    }

    #[test]
    fn progressions_of_the_same_step_and_class_overlap_where_their_intervals_do() {
        assert_eq!(common_values(&p(0, 4, 10), &p(8, 4, 10)), Some((8, 8)));
        assert_eq!(common_values(&p(0, 4, 10), &p(36, 4, 3)), Some((36, 1)));
        assert_eq!(common_values(&p(0, 4, 10), &p(40, 4, 3)), None);
    }

    #[test]
    fn progressions_of_different_classes_never_overlap() {
        assert_eq!(common_values(&p(0, 4, 1000), &p(1, 4, 1000)), None);
        assert_eq!(common_values(&p(2, 6, 1000), &p(5, 6, 1000)), None);
    }

    #[test]
    fn progressions_of_different_steps_meet_where_the_remainder_theorem_says() {
        // 3, 7, 11, 15, 19, 23, 27 and 1, 7, 13, 19, 25: common 7 and 19.
        assert_eq!(common_values(&p(3, 4, 7), &p(1, 6, 5)), Some((7, 2)));
        // Even numbers never meet odd ones.
        assert_eq!(common_values(&p(0, 2, 50), &p(1, 4, 50)), None);
    }

    #[test]
    fn common_values_agree_with_listing_both_progressions() {
        let mut state = 12345u64;
        let mut next = |bound: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % bound
        };
        for _ in 0..20_000 {
            let a = p(next(60) as i64 - 20, next(7) + 1, next(15) + 1);
            let b = p(next(60) as i64 - 20, next(7) + 1, next(15) + 1);
            assert_eq!(common_values(&a, &b), listed(&a, &b), "{a:?} {b:?}");
        }
    }

    #[test]
    fn huge_ranges_are_compared_without_listing_them() {
        let a = p(1_000_000_000, 6, 1 << 40);
        let b = p(1_000_000_000 + 6 * ((1 << 40) - 1), 6, 1 << 40);
        assert_eq!(common_values(&a, &b), Some((b.first, 1)));
    }

    fn call(node: &str, at_ms: u64) -> Call {
        Call {
            client: 0,
            node: node.into(),
            at_ms,
            key: "k".into(),
        }
    }

    fn deployment() -> Deployment {
        Deployment {
            step: 4,
            sequence_bits: 12,
            offsets: [("n0".to_string(), 0), ("n1".to_string(), 1)].into(),
        }
    }

    #[test]
    fn a_clean_history_has_no_duplicates() {
        let mut history = History::default();
        history.add_snowflakes(call("n0", 1), &[4096, 4100]);
        history.add_snowflakes(call("n1", 2), &[4097, 4101]);
        history.add_segment(call("n0", 3), p(0, 4, 100));
        history.add_segment(call("n1", 4), p(1, 4, 100));
        history.add_segment(call("n0", 5), p(400, 4, 100));
        let verdict = check(&history, &deployment(), 10);
        assert_eq!(verdict.duplicate_values, 0, "{:?}", verdict.duplicates);
        assert_eq!(verdict.wrong_class_count, 0);
    }

    #[test]
    fn repeated_snowflakes_and_overlapping_ranges_are_found_with_their_calls() {
        let mut history = History::default();
        history.add_snowflakes(call("n0", 1), &[4096, 4100]);
        history.add_snowflakes(call("n0", 2), &[4100]);
        history.add_segment(call("n0", 3), p(0, 4, 100));
        history.add_segment(call("n0", 4), p(392, 4, 10));
        let verdict = check(&history, &deployment(), 10);
        assert_eq!(verdict.duplicate_values, 1 + 2);
        assert_eq!(verdict.duplicates[0].calls, (0, 1));
        assert_eq!(verdict.duplicates[1].value, 392);
        assert_eq!(verdict.duplicates[1].calls, (2, 3));
    }

    #[test]
    fn the_same_values_under_two_keys_are_not_duplicates() {
        let mut history = History::default();
        history.add_segment(call("n0", 3), p(0, 4, 100));
        let mut other = call("n0", 4);
        other.key = "other".into();
        history.add_segment(other, p(0, 4, 100));
        assert_eq!(check(&history, &deployment(), 10).duplicate_values, 0);
    }

    #[test]
    fn values_outside_the_answering_nodes_class_are_reported() {
        let mut history = History::default();
        history.add_snowflakes(call("n1", 1), &[4096]);
        history.add_segment(call("n0", 2), p(5, 4, 3));
        history.add_segment(call("follow", 2), p(7, 4, 3));
        let verdict = check(&history, &deployment(), 10);
        assert_eq!(verdict.wrong_class_count, 3);
    }

    #[test]
    fn holder_ids_are_checked_against_each_other_and_the_clients() {
        let deployment = deployment();
        let leased = |worker: u64, ms: u64, seq: u64| (ms << 22) | (worker << 12) | seq;
        let mut history = History::default();
        history.add_snowflakes(call("n0", 1), &[leased(3, 10, 0) as i64]);
        let (a, b) = (
            vec![leased(1000, 10, 0), leased(1000, 10, 1)],
            vec![leased(1001, 10, 0), leased(1001, 11, 0)],
        );
        let mut verdict = Verdict::default();
        check_leased(&history, &[&a, &b], &deployment, 960, &mut verdict);
        assert_eq!(verdict.duplicate_values, 0);
        assert_eq!(verdict.wrong_class_count, 0);
        // Another process of the same worker id in the same millisecond; a holder ID a
        // client also got; an ID outside the band.
        let c = vec![leased(1000, 10, 1), leased(3, 10, 0)];
        let mut verdict = Verdict::default();
        check_leased(&history, &[&a, &b, &c], &deployment, 960, &mut verdict);
        assert_eq!(verdict.duplicate_values, 2);
        assert_eq!(verdict.leased_outside_band, 1);
        let mut pairs: Vec<_> = verdict
            .leased_duplicates
            .iter()
            .map(|d| d.sources)
            .collect();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                (Source::Call(0), Source::Holder(2)),
                (Source::Holder(0), Source::Holder(2))
            ]
        );
    }

    #[test]
    fn the_longest_outage_counts_the_start_and_the_end() {
        assert_eq!(longest_gap(&[], 500), 500);
        assert_eq!(longest_gap(&[100, 150, 900, 1000], 1200), 750);
        assert_eq!(longest_gap(&[300, 400], 2000), 1600);
    }
}
