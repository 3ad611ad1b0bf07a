//! What a soak prints: faults and errors by kind, each duplicate with who got it, from which
//! node, when, and the faults just before; the history kept on disk when something repeated;
//! the closing line.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::checker::{Source, Verdict};
use super::history::History;
use super::holders::Generation;
use super::nemesis::LogLine;
use super::schedule::FaultKind;
use super::{Options, Outcome};

/// How far back the faults printed with a duplicate go.
const FAULTS_BEFORE_MS: u64 = 30_000;
/// Duplicates printed in full (all are in the kept files).
const PRINTED: usize = 20;

/// What the leased-generator holders wrote.
pub struct Leased<'a> {
    /// Every holder process, in the order [`super::checker::check_leased`] numbered them.
    pub generations: &'a [Generation],
    /// The unix ms at which the soak's clock (`LogLine` times) started.
    pub start_unix_ms: u64,
    /// Holders that issued nothing in the 20 s after the last fault healed.
    pub stalled: &'a [String],
}

impl Leased<'_> {
    /// A holder ID's time as soak seconds (default layout: 41 ms bits from the default
    /// epoch).
    fn soak_seconds(&self, id: u64) -> f64 {
        let unix_ms = idgen_core::DEFAULT_EPOCH_UNIX_MS + (id >> 22);
        (unix_ms as f64 - self.start_unix_ms as f64) / 1000.0
    }

    /// Prints every holder's figures; returns the IDs issued and the longest time a running
    /// holder went without an ID (ms).
    fn print_holders(&self) -> (u64, u64) {
        let mut by_holder: BTreeMap<&str, Vec<&Generation>> = BTreeMap::new();
        for generation in self.generations {
            let holder = generation.label.split('/').next().unwrap_or("");
            by_holder.entry(holder).or_default().push(generation);
        }
        let mut total = 0;
        let mut longest_overall = 0;
        for (holder, generations) in by_holder {
            let ids: usize = generations.iter().map(|g| g.ids.len()).sum();
            let leases: usize = generations.iter().map(|g| g.leases()).sum();
            let longest = generations
                .iter()
                .filter_map(|g| g.longest_gap().map(|gap| (gap, g.label.as_str())))
                .max();
            total += ids as u64;
            let longest_text = match longest {
                Some(((gap, ended), label)) => {
                    longest_overall = longest_overall.max(gap);
                    format!(
                        "longest without an ID {:.1} s ({label}, ended at {:.1} s)",
                        gap as f64 / 1000.0,
                        (ended as f64 - self.start_unix_ms as f64) / 1000.0
                    )
                }
                None => "never issued".into(),
            };
            println!(
                "soak: holder {holder}: {} process(es), {ids} IDs, {leases} leases and \
                 renewals taken up, {longest_text}",
                generations.len()
            );
        }
        (total, longest_overall)
    }

    fn describe(&self, history: &History, source: Source) -> String {
        match source {
            Source::Holder(index) => format!("holder {}", self.generations[index as usize].label),
            Source::Call(call) => {
                let call = &history.calls[call as usize];
                format!(
                    "client {} from {} at {:.3} s",
                    history.clients[call.client as usize],
                    call.node,
                    call.at_ms as f64 / 1000.0
                )
            }
        }
    }
}

/// Prints the report, keeps the data if anything repeated, and returns the outcome.
pub fn report(
    options: &Options,
    history: &History,
    verdict: &Verdict,
    leased: &Leased,
    log: &[LogLine],
    applied: &[FaultKind],
    duration_ms: u64,
) -> Outcome {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for kind in applied {
        *by_kind.entry(kind.name()).or_default() += 1;
    }
    println!("soak: faults by kind: {by_kind:?}");
    println!("soak: failed calls by kind: {:?}", history.errors);
    let answered_by: BTreeMap<&str, usize> =
        history.calls.iter().fold(BTreeMap::new(), |mut map, call| {
            *map.entry(call.node.as_str()).or_default() += 1;
            map
        });
    println!("soak: answered calls by node: {answered_by:?}");
    for duplicate in verdict.duplicates.iter().take(PRINTED) {
        let (a, b) = (
            &history.calls[duplicate.calls.0 as usize],
            &history.calls[duplicate.calls.1 as usize],
        );
        let later = a.at_ms.max(b.at_ms);
        let faults: Vec<String> = log
            .iter()
            .filter(|(at, _)| *at <= later && later - *at <= FAULTS_BEFORE_MS)
            .map(|(at, text)| format!("{:.1} s {text}", *at as f64 / 1000.0))
            .collect();
        println!(
            "DUPLICATE {} {} ({} value(s)): {} from {} at {:.3} s, and {} from {} at {:.3} s; \
             faults in the 30 s before: {faults:?}",
            duplicate.what,
            duplicate.value,
            duplicate.count,
            history.clients[a.client as usize],
            a.node,
            a.at_ms as f64 / 1000.0,
            history.clients[b.client as usize],
            b.node,
            b.at_ms as f64 / 1000.0,
        );
    }
    if verdict.duplicates.len() > PRINTED {
        println!(
            "soak: {} more duplicate pairs (all in the kept files)",
            verdict.duplicates.len() - PRINTED
        );
    }
    for duplicate in verdict.leased_duplicates.iter().take(PRINTED) {
        let at = leased.soak_seconds(duplicate.id);
        let faults: Vec<String> = log
            .iter()
            .filter(|(when, _)| {
                let when = *when as f64 / 1000.0;
                when <= at && at - when <= FAULTS_BEFORE_MS as f64 / 1000.0
            })
            .map(|(when, text)| format!("{:.1} s {text}", *when as f64 / 1000.0))
            .collect();
        println!(
            "DUPLICATE leased ID {} (worker {}, time {at:.3} s): {} and {}; faults in the 30 s \
             before: {faults:?}",
            duplicate.id,
            (duplicate.id >> 12) & 1023,
            leased.describe(history, duplicate.sources.0),
            leased.describe(history, duplicate.sources.1),
        );
    }
    if verdict.leased_duplicates.len() > PRINTED {
        println!(
            "soak: {} more leased duplicates",
            verdict.leased_duplicates.len() - PRINTED
        );
    }
    if verdict.leased_outside_band > 0 {
        println!(
            "WRONG WORKER: {} holder IDs carry a worker id outside the leased band",
            verdict.leased_outside_band
        );
    }
    let (leased_ids, longest_holder_gap) = leased.print_holders();
    if !leased.stalled.is_empty() {
        println!(
            "STALLED holders {:?}: no ID in the 20 s after the last fault healed",
            leased.stalled
        );
    }
    for wrong in &verdict.wrong_class {
        let call = &history.calls[wrong.call as usize];
        println!(
            "WRONG CLASS {} (residue {}) to {} from {} at {:.3} s",
            wrong.value,
            wrong.residue,
            history.clients[call.client as usize],
            call.node,
            call.at_ms as f64 / 1000.0
        );
    }
    let faults = applied.len() as u64;
    let snowflakes = history.snowflakes.len() as u64;
    let segment_values = history.segment_values();
    let duplicates = verdict.duplicate_values;
    let summary = format!(
        "soak: {faults} faults, {snowflakes} snowflakes + {segment_values} segment values, \
         {duplicates} duplicates, longest outage {:.1} s{}",
        verdict.longest_outage_ms as f64 / 1000.0,
        if leased.generations.is_empty() {
            String::new()
        } else {
            format!(
                "; {leased_ids} leased IDs from {} holder processes, longest holder without \
                 an ID {:.1} s",
                leased.generations.len(),
                longest_holder_gap as f64 / 1000.0
            )
        }
    );
    let seconds = duration_ms / 1000;
    let enough_faults = faults >= (seconds / 20).max(3);
    let enough_traffic = snowflakes >= 50 * seconds
        && segment_values >= 10_000 * seconds
        && (leased.generations.is_empty() || leased_ids >= 100 * seconds);
    let clean = duplicates == 0 && verdict.wrong_class_count == 0;
    if !enough_faults || !enough_traffic {
        println!(
            "soak: too little happened to mean something (need at least {} faults, {} \
             snowflakes and {} segment values in {seconds} s)",
            (seconds / 20).max(3),
            50 * seconds,
            10_000 * seconds
        );
    }
    let passed = if options.control_lease_fence {
        println!(
            "soak: control run (lost lease grants with the lease fence off): it passes when \
             it finds duplicates"
        );
        duplicates > 0
    } else if options.control_shared_offset {
        println!("soak: control run (every node on offset 0): it passes when it finds duplicates");
        duplicates > 0
    } else if options.control_identity_warn {
        println!(
            "soak: control run (identity mistakes under identity-conflicts warn): it passes \
             when it finds duplicates"
        );
        duplicates > 0
    } else {
        clean && enough_faults && enough_traffic && leased.stalled.is_empty()
    };
    // A failed run keeps what explains it (a stalled holder's log, say), as does a duplicate.
    if duplicates > 0 || verdict.wrong_class_count > 0 || !passed {
        match keep(options, history, verdict, log) {
            Ok(()) => println!("soak: history kept in {}", options.run_dir.display()),
            Err(e) => println!("soak: could not keep the history: {e}"),
        }
    } else if std::env::var_os("SOAK_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&options.run_dir);
    }
    Outcome { summary, passed }
}

/// Writes the history as tab-separated files next to the nodes' data.
fn keep(
    options: &Options,
    history: &History,
    verdict: &Verdict,
    log: &[LogLine],
) -> std::io::Result<()> {
    use std::io::Write;
    let dir = &options.run_dir;
    let file = |name: &str| -> std::io::Result<std::io::BufWriter<std::fs::File>> {
        Ok(std::io::BufWriter::new(std::fs::File::create(
            dir.join(name),
        )?))
    };
    let mut calls = file("calls.tsv")?;
    writeln!(calls, "call\tclient\tnode\tat_ms\tkey")?;
    for (index, call) in history.calls.iter().enumerate() {
        writeln!(
            calls,
            "{index}\t{}\t{}\t{}\t{}",
            history.clients[call.client as usize], call.node, call.at_ms, call.key
        )?;
    }
    let mut snowflakes = file("snowflakes.tsv")?;
    writeln!(snowflakes, "id\tcall")?;
    for (id, call) in &history.snowflakes {
        writeln!(snowflakes, "{id}\t{call}")?;
    }
    let mut segments = file("segments.tsv")?;
    writeln!(segments, "key\tfirst\tstep\tcount\tcall")?;
    for (key, ranges) in &history.segments {
        for (range, call) in ranges {
            writeln!(
                segments,
                "{key}\t{}\t{}\t{}\t{call}",
                range.first, range.step, range.count
            )?;
        }
    }
    let mut text = String::new();
    for (at, line) in log {
        let _ = writeln!(text, "{at}\t{line}");
    }
    std::fs::write(dir.join("faults.tsv"), text)?;
    let mut duplicates = file("duplicates.tsv")?;
    writeln!(duplicates, "what\tvalue\tcount\tcall_a\tcall_b")?;
    for d in &verdict.duplicates {
        writeln!(
            duplicates,
            "{}\t{}\t{}\t{}\t{}",
            d.what, d.value, d.count, d.calls.0, d.calls.1
        )?;
    }
    Ok(())
}
