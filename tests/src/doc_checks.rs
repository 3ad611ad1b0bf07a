//! Checks of the documentation's text for `tests/tests/docs.rs`: internal links and their
//! anchors, command and setting names named in prose, measured figures that belong to
//! BENCHMARKS.md, and the length of README.md and its sentences.
//!
//! Every check is a function of the documents' text (and, for names, of what a live server
//! reports), returning one line per failure, so that each can be shown failing on a
//! planted error (the unit tests below).

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

/// A Markdown file's path (relative to the repository's root, `/`-separated) and text.
#[derive(Debug, Clone)]
pub struct Page {
    /// For example `docs/commands.md`.
    pub path: String,
    /// The whole file.
    pub text: String,
}

/// The files whose text the checks read: README.md, docs/*.md, BENCHMARKS.md, CHANGELOG.md and
/// the crates' READMEs.
pub fn pages(root: &Path) -> Vec<Page> {
    let mut paths = vec![
        "README.md".to_string(),
        "BENCHMARKS.md".to_string(),
        "CHANGELOG.md".to_string(),
        "client/README.md".to_string(),
        "core/README.md".to_string(),
    ];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| Page {
            text: std::fs::read_to_string(root.join(&path))
                .unwrap_or_else(|e| panic!("read {path}: {e}")),
            path,
        })
        .collect()
}

/// The text with every fenced code block's lines blanked (line numbers kept).
pub fn without_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Byte ranges of inline code spans (`` `…` ``) in text without fences; a span does not
/// cross a blank line.
fn code_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' && i + 1 < bytes.len() && bytes[i + 1] == b'\n' {
            open = None;
        }
        if b == b'`' {
            match open {
                None => open = Some(i),
                Some(start) => {
                    spans.push((start, i + 1));
                    open = None;
                }
            }
        }
    }
    spans
}

fn inside(spans: &[(usize, usize)], at: usize) -> bool {
    spans.iter().any(|&(a, b)| a <= at && at < b)
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// A Markdown link in a page: its text, its target, and the byte range of the whole link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// 1-based line of the link's target.
    pub line: usize,
    /// What is between the brackets.
    pub text: String,
    /// What is between the parentheses.
    pub target: String,
    start: usize,
    end: usize,
}

/// The inline links of a page's prose (not in code blocks or code spans; images included).
pub fn links(text: &str) -> Vec<Link> {
    let prose = without_fences(text);
    let spans = code_spans(&prose);
    let bytes = prose.as_bytes();
    let mut found = Vec::new();
    for (at, _) in prose.match_indices("](") {
        if inside(&spans, at) {
            continue;
        }
        // Back to the matching `[`.
        let mut depth = 0usize;
        let mut start = None;
        for i in (0..at).rev() {
            match bytes[i] {
                b']' => depth += 1,
                b'[' if depth == 0 => {
                    start = Some(i);
                    break;
                }
                b'[' => depth -= 1,
                b'\n' if i > 0 && bytes[i - 1] == b'\n' => break,
                _ => {}
            }
        }
        let Some(start) = start else { continue };
        let rest = &prose[at + 2..];
        let Some(close) = rest.find(')') else {
            continue;
        };
        let target = rest[..close].trim().to_string();
        if target.contains(char::is_whitespace) {
            continue;
        }
        found.push(Link {
            line: line_of(&prose, at),
            text: prose[start + 1..at].to_string(),
            target,
            start,
            end: at + 2 + close + 1,
        });
    }
    found
}

/// The anchor GitHub gives a heading's text: lower case, letters, digits, `-` and `_` kept,
/// spaces as `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c == ' ' {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}

/// A heading of a page: its level, its anchor and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `#`, 2 for `##`, …
    pub level: usize,
    /// The anchor, with GitHub's `-1`, `-2` suffixes for repeated headings.
    pub anchor: String,
    /// 1-based line.
    pub line: usize,
}

/// The headings of a page, outside code blocks.
pub fn headings(text: &str) -> Vec<Heading> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, line) in without_fences(text).lines().enumerate() {
        let level = line.chars().take_while(|&c| c == '#').count();
        if level == 0 || level > 6 || !line[level..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[level..]);
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        out.push(Heading {
            level,
            anchor,
            line: i + 1,
        });
    }
    out
}

/// `path` joined onto the directory of `page` and normalised (`..` taken out), or `None`
/// when it leaves the repository.
fn resolve(page: &str, path: &str) -> Option<String> {
    let mut parts: Vec<String> = Path::new(page)
        .parent()
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part.to_string_lossy().to_string()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// Every internal link of every page must reach a file that exists (`exists` is asked with
/// the path relative to the root) and, with `#anchor`, a heading of that Markdown file.
pub fn broken_links(pages: &[Page], exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let anchors: HashMap<&str, BTreeSet<String>> = pages
        .iter()
        .map(|p| {
            (
                p.path.as_str(),
                headings(&p.text).into_iter().map(|h| h.anchor).collect(),
            )
        })
        .collect();
    let mut failures = Vec::new();
    for page in pages {
        for link in links(&page.text) {
            let target = link.target.trim_start_matches('<').trim_end_matches('>');
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target, None),
            };
            let file = if path.is_empty() {
                Some(page.path.clone())
            } else {
                resolve(&page.path, path)
            };
            let Some(file) = file else {
                failures.push(format!(
                    "{}:{}: ({}) leaves the repository",
                    page.path, link.line, link.target
                ));
                continue;
            };
            if !path.is_empty() && !exists(&file) {
                failures.push(format!(
                    "{}:{}: ({}): no file {file}",
                    page.path, link.line, link.target
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                match anchors.get(file.as_str()) {
                    Some(known) if known.contains(anchor) => {}
                    Some(_) => failures.push(format!(
                        "{}:{}: ({}): {file} has no heading with the anchor #{anchor}",
                        page.path, link.line, link.target
                    )),
                    None if file.ends_with(".md") => failures.push(format!(
                        "{}:{}: ({}): {file} is not among the checked pages, so its anchors \
                         cannot be checked",
                        page.path, link.line, link.target
                    )),
                    None => {}
                }
            }
        }
    }
    failures
}

/// The module commands a page names (`SNOWFLAKE.NEXT`, `LEASE.ACQUIRE`, …), upper case as
/// written, with their lines: words of the families `SNOWFLAKE.`, `SEGMENT.`, `LEASE.` and
/// `IDGEN.` in capitals, anywhere in the page.
pub fn commands_named(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for family in ["SNOWFLAKE.", "SEGMENT.", "LEASE.", "IDGEN."] {
        for (at, _) in text.match_indices(family) {
            if at > 0 {
                let before = text[..at].chars().next_back().unwrap();
                if before.is_alphanumeric() || before == '_' || before == '.' {
                    continue;
                }
            }
            let rest = &text[at + family.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if name.is_empty() {
                continue; // `LEASE.*`, a family named as such
            }
            found.push((line_of(text, at), format!("{family}{name}")));
        }
    }
    found.sort();
    found
}

/// Commands named in the pages that the live module does not have (`known`: `COMMAND LIST`,
/// lower case).
pub fn unknown_commands(pages: &[Page], known: &BTreeSet<String>) -> Vec<String> {
    let mut failures = Vec::new();
    for page in pages {
        for (line, name) in commands_named(&page.text) {
            if !known.contains(&name.to_ascii_lowercase()) {
                failures.push(format!(
                    "{}:{line}: {name} is not a command of the module (COMMAND LIST)",
                    page.path
                ));
            }
        }
    }
    failures
}

/// What a page names as a setting, with its line: every `idgen.<name>` (not a file name such
/// as `idgen.so`), and the first word of each code span that is a lower-case hyphenated name
/// (`segment-fence`, `identity-conflicts warn`).
pub fn settings_named(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("idgen.") {
        if at > 0 {
            let before = text[..at].chars().next_back().unwrap();
            if before.is_alphanumeric() || before == '_' || before == '/' || before == '-' {
                continue; // libidgen.so, a path, a crate name
            }
        }
        let rest = &text[at + "idgen.".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let mut after = rest[name.len()..].chars();
        let extension =
            after.next() == Some('.') && after.next().is_some_and(char::is_alphanumeric);
        if name.is_empty() || extension {
            continue; // `idgen.*`, `idgen.so.1`
        }
        if ["so", "lua", "conf", "md"].contains(&name.as_str()) {
            continue; // file names
        }
        found.push((line_of(text, at), name));
    }
    let prose = without_fences(text);
    for (a, b) in code_spans(&prose) {
        let span = &prose[a + 1..b - 1];
        let Some(first) = span.split_whitespace().next() else {
            continue;
        };
        let hyphenated = first.contains('-')
            && !first.starts_with('-')
            && !first.ends_with('-')
            && first.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        if hyphenated {
            found.push((line_of(&prose, a), first.to_string()));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Settings named in the pages that nothing knows: `is_known(name)` says whether the live
/// server has it (as `idgen.<name>` or a server setting) or it is a known name of another
/// kind (a crate, a feature, a tool, a soak fault).
pub fn unknown_settings(pages: &[Page], is_known: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut failures = Vec::new();
    for page in pages {
        for (line, name) in settings_named(&page.text) {
            if !is_known(&name) {
                failures.push(format!(
                    "{}:{line}: `{name}` is named like a setting, but the server has no \
                     idgen.{name} nor {name} (CONFIG GET), and it is no crate, feature, tool \
                     or soak fault this test knows",
                    page.path
                ));
            }
        }
    }
    failures
}

/// The `idgen_…` names a page uses, with their lines: INFO fields, the exporter script's
/// keys, or crate paths (`idgen_client::…`).
pub fn info_fields_named(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("idgen_") {
        if at > 0 {
            let before = text[..at].chars().next_back().unwrap();
            if before.is_alphanumeric() || before == '_' || before == '.' {
                continue;
            }
        }
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if name.ends_with('_') {
            continue; // a family: `idgen_lease_*`
        }
        found.push((line_of(text, at), name));
    }
    found.sort();
    found.dedup();
    found
}

/// `idgen_…` names in the pages that are neither an INFO field of the live module nor
/// otherwise known (`is_known`: the exporter script's keys, the crates).
pub fn unknown_info_fields(pages: &[Page], is_known: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut failures = Vec::new();
    for page in pages {
        for (line, name) in info_fields_named(&page.text) {
            if !is_known(&name) {
                failures.push(format!(
                    "{}:{line}: {name} is not a field of INFO idgen, a key of the exporter \
                     script or a crate",
                    page.path
                ));
            }
        }
    }
    failures
}

/// A measured figure in prose: a multiplier (`5.95×`), a rate (`10.23 M IDs/s`, `1,000 IDs a
/// second`) or a ratio (`0.94`). Returns (byte offset, the figure as written, its number).
pub fn figures(prose: &str) -> Vec<(usize, String, String)> {
    const RATE_UNITS: &[&str] = &[
        "IDs/s",
        "M IDs/s",
        "values/s",
        "M values/s",
        "M/s",
        "requests/s",
        "IDs a second",
        "values a second",
        "calls a second",
    ];
    const NOT_RATIOS: &[&str] = &["µs", "ms", "s", "B", "KB", "MB", "%", "GiB", "ns"];
    let bytes = prose.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_number =
            bytes[i].is_ascii_digit() && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric()));
        let after_dot = i > 0 && (bytes[i - 1] == b'.' || bytes[i - 1] == b',');
        if !starts_number || after_dot {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len()
            && (bytes[j].is_ascii_digit()
                || ((bytes[j] == b',' || bytes[j] == b'.')
                    && j + 1 < bytes.len()
                    && bytes[j + 1].is_ascii_digit()))
        {
            j += 1;
        }
        let number = &prose[i..j];
        let rest = &prose[j..];
        let trimmed = rest.trim_start_matches(' ');
        let figure = if trimmed.starts_with('×') {
            Some(format!("{number}×"))
        } else if let Some(unit) = RATE_UNITS
            .iter()
            .filter(|u| trimmed.starts_with(**u))
            .max_by_key(|u| u.len())
        {
            Some(format!("{number} {unit}"))
        } else {
            let is_ratio = number.len() == 4
                && (number.starts_with("0.") || number.starts_with("1."))
                && !rest.starts_with('.');
            let unit_after = trimmed
                .split(|c: char| !c.is_alphanumeric() && c != '%' && c != 'µ')
                .next()
                .unwrap_or("");
            (is_ratio && !NOT_RATIOS.contains(&unit_after)).then(|| number.to_string())
        };
        if let Some(figure) = figure {
            found.push((i, figure, number.to_string()));
        }
        i = j.max(i + 1);
    }
    found
}

/// Whether `number` occurs in `text` as a whole number (not inside a longer one).
fn has_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + number.len()..].chars().next();
        let after_next = text[at + number.len()..].chars().nth(1);
        let joined_before = before.is_some_and(|c| c.is_ascii_digit() || c == '.' || c == ',');
        let digit_after = after.is_some_and(|c| c.is_ascii_digit());
        let continues = matches!(after, Some('.') | Some(','))
            && after_next.is_some_and(|c| c.is_ascii_digit());
        !(joined_before || digit_after || continues)
    })
}

/// The text of the section of `text` under the heading with `anchor` (to the next heading
/// of the same or a higher level), or the whole text without an anchor.
fn section<'a>(text: &'a str, anchor: Option<&str>) -> Option<&'a str> {
    let Some(anchor) = anchor else {
        return Some(text);
    };
    let all = headings(text);
    let index = all.iter().position(|h| h.anchor == anchor)?;
    let level = all[index].level;
    let end_line = all[index + 1..]
        .iter()
        .find(|h| h.level <= level)
        .map(|h| h.line);
    let offsets: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .collect();
    let start = offsets[all[index].line - 1];
    let end = end_line.map_or(text.len(), |line| offsets[line - 1]);
    Some(&text[start..end])
}

/// The rule for figures: what `scripts/bench.sh` measures is written in BENCHMARKS.md only.
/// Another page may quote a figure only inside the text of a link to BENCHMARKS.md, and
/// the quoted number must be in the linked section. CHANGELOG.md is history (each entry's
/// figures are of its day) and BENCHMARKS.md the source: both are left out. Code blocks and
/// code spans are left out (formulas, program output).
pub fn misplaced_figures(pages: &[Page]) -> Vec<String> {
    let Some(benchmarks) = pages.iter().find(|p| p.path == "BENCHMARKS.md") else {
        return vec!["BENCHMARKS.md is not among the pages".into()];
    };
    let mut failures = Vec::new();
    for page in pages {
        if page.path == "BENCHMARKS.md" || page.path == "CHANGELOG.md" {
            continue;
        }
        let prose = without_fences(&page.text);
        let spans = code_spans(&prose);
        let page_links = links(&page.text);
        for (at, figure, number) in figures(&prose) {
            if inside(&spans, at) {
                continue;
            }
            let link = page_links.iter().find(|l| l.start < at && at < l.end);
            let Some(link) = link else {
                failures.push(format!(
                    "{}:{}: the figure {figure} is stated outside BENCHMARKS.md: link to the \
                     figure there instead (or quote it as the text of that link)",
                    page.path,
                    line_of(&prose, at)
                ));
                continue;
            };
            let (path, anchor) = match link.target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.target.as_str(), None),
            };
            if resolve(&page.path, path).as_deref() != Some("BENCHMARKS.md") {
                failures.push(format!(
                    "{}:{}: the figure {figure} is quoted in a link to {}, not to BENCHMARKS.md",
                    page.path,
                    line_of(&prose, at),
                    link.target
                ));
                continue;
            }
            match section(&benchmarks.text, anchor) {
                Some(text) if has_number(text, &number) => {}
                Some(_) => failures.push(format!(
                    "{}:{}: the figure {figure} is not in BENCHMARKS.md{}",
                    page.path,
                    line_of(&prose, at),
                    anchor.map(|a| format!("#{a}")).unwrap_or_default()
                )),
                None => failures.push(format!(
                    "{}:{}: BENCHMARKS.md has no section #{}",
                    page.path,
                    line_of(&prose, at),
                    anchor.unwrap_or("")
                )),
            }
        }
    }
    failures
}

/// The sentences of a page's prose, with their lines: paragraphs and list items (not
/// headings, tables, code blocks or HTML comments), link targets dropped, split after `.`,
/// `?` or `!` followed by a space and a capital letter, and at a paragraph's end.
pub fn prose_sentences(text: &str) -> Vec<(usize, String)> {
    let prose = without_fences(text);
    let mut blocks: Vec<(usize, String)> = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in prose.lines().enumerate() {
        let trimmed = line.trim();
        let ends_block = trimmed.is_empty()
            || trimmed.starts_with('#')
            || trimmed.starts_with('|')
            || trimmed.starts_with("<!--");
        let starts_item =
            trimmed.starts_with("- ") || trimmed.starts_with("* ") || starts_numbered(trimmed);
        if ends_block || starts_item {
            if let Some(block) = current.take() {
                blocks.push(block);
            }
        }
        if ends_block {
            continue;
        }
        match current.as_mut() {
            Some((_, text)) => {
                text.push(' ');
                text.push_str(trimmed);
            }
            None => current = Some((i + 1, trimmed.to_string())),
        }
    }
    if let Some(block) = current {
        blocks.push(block);
    }
    let mut sentences = Vec::new();
    for (line, block) in blocks {
        let block = drop_link_targets(&block);
        let mut start = 0;
        let chars: Vec<(usize, char)> = block.char_indices().collect();
        for k in 0..chars.len() {
            let (at, c) = chars[k];
            let ends = matches!(c, '.' | '?' | '!')
                && chars.get(k + 1).is_some_and(|&(_, n)| n == ' ')
                && chars.get(k + 2).is_some_and(|&(_, n)| n.is_uppercase());
            if ends {
                sentences.push((line, block[start..=at].trim().to_string()));
                start = at + 1;
            }
        }
        let last = block[start..].trim();
        if !last.is_empty() {
            sentences.push((line, last.to_string()));
        }
    }
    sentences
}

fn starts_numbered(line: &str) -> bool {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && line[digits..].starts_with(". ")
}

/// `[text](target)` → `text`.
fn drop_link_targets(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(at) = out.find("](") {
        let Some(close) = out[at..].find(')') else {
            break;
        };
        out.replace_range(at..at + close + 1, "");
    }
    out.replace('[', "")
}

/// Sentences of more than `limit` words in a page.
pub fn long_sentences(page: &Page, limit: usize) -> Vec<String> {
    prose_sentences(&page.text)
        .into_iter()
        .filter(|(_, s)| s.split_whitespace().count() > limit)
        .map(|(line, s)| {
            format!(
                "{}:{line}: a sentence of {} words (at most {limit}): {s}",
                page.path,
                s.split_whitespace().count()
            )
        })
        .collect()
}

/// The repository root as a `PathBuf` for the files `broken_links` asks about.
pub fn file_exists(root: &Path) -> impl Fn(&str) -> bool + '_ {
    move |path: &str| -> bool { PathBuf::from(root).join(path).exists() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(path: &str, text: &str) -> Page {
        Page {
            path: path.into(),
            text: text.into(),
        }
    }

    #[test]
    fn slugs_are_githubs() {
        assert_eq!(
            slug(" SNOWFLAKE.DECODE id [FORMAT decimal|base32|base62]"),
            "snowflakedecode-id-format-decimalbase32base62"
        );
        assert_eq!(
            slug(" Write traffic: AOF and replication bytes per 100,000 single calls"),
            "write-traffic-aof-and-replication-bytes-per-100000-single-calls"
        );
        assert_eq!(
            slug(" Busy callers sharing a buffer (2026-11-27)"),
            "busy-callers-sharing-a-buffer-2026-11-27"
        );
        assert_eq!(slug(" `max-drift-ms`"), "max-drift-ms");
        let h = headings("# A\n\n```sh\n# not a heading\n```\n## B\n## B\n");
        let anchors: Vec<&str> = h.iter().map(|h| h.anchor.as_str()).collect();
        assert_eq!(anchors, ["a", "b", "b-1"]);
    }

    #[test]
    fn a_broken_link_or_anchor_is_caught() {
        let pages = vec![
            page(
                "docs/a.md",
                "# A\n\n## Two words\n\nSee [b](b.md#here) and [self](#two-words).\n",
            ),
            page("docs/b.md", "# B\n\n## Here\n"),
        ];
        let exists = |p: &str| ["docs/a.md", "docs/b.md"].contains(&p);
        assert_eq!(broken_links(&pages, &exists), Vec::<String>::new());

        let planted = vec![
            page(
                "docs/a.md",
                "# A\n\nSee [b](b.md#there), [c](c.md), [up](../../x.md) and `[no](code.md)`.\n",
            ),
            page("docs/b.md", "# B\n\n## Here\n"),
        ];
        let failures = broken_links(&planted, &exists);
        assert_eq!(failures.len(), 3, "{failures:#?}");
        assert!(failures[0].contains("no heading with the anchor #there"));
        assert!(failures[1].contains("no file docs/c.md"));
        assert!(failures[2].contains("leaves the repository"));
    }

    #[test]
    fn an_unknown_command_is_caught() {
        let known: BTreeSet<String> = ["snowflake.next", "lease.acquire"]
            .into_iter()
            .map(String::from)
            .collect();
        let good = vec![page(
            "README.md",
            "`SNOWFLAKE.NEXT` and LEASE.ACQUIRE, the LEASE.* family, IDFLOOR.NEXTID.",
        )];
        assert_eq!(unknown_commands(&good, &known), Vec::<String>::new());
        let planted = vec![page("README.md", "Call SNOWFLAKE.NEXTS or\nSEGMENT.TAKE.")];
        let failures = unknown_commands(&planted, &known);
        assert_eq!(failures.len(), 2, "{failures:#?}");
        assert!(failures[0].starts_with("README.md:1: SNOWFLAKE.NEXTS"));
        assert!(failures[1].starts_with("README.md:2: SEGMENT.TAKE"));
    }

    #[test]
    fn an_unknown_setting_is_caught() {
        let known = |name: &str| ["identity-conflicts", "segment-fence", "step"].contains(&name);
        let good = vec![page(
            "docs/x.md",
            "`identity-conflicts refuse`, idgen.segment-fence, `libidgen.so`, idgen.so, `idgen.*`.\n",
        )];
        assert_eq!(unknown_settings(&good, &known), Vec::<String>::new());
        let planted = vec![page(
            "docs/x.md",
            "With `identity-policy refuse` and idgen.segment-fences.\n",
        )];
        let failures = unknown_settings(&planted, &known);
        assert_eq!(failures.len(), 2, "{failures:#?}");
        assert!(failures.iter().any(|f| f.contains("`identity-policy`")));
        assert!(failures.iter().any(|f| f.contains("`segment-fences`")));
    }

    #[test]
    fn an_unknown_info_field_is_caught() {
        let known = |name: &str| ["idgen_warnings", "idgen_client"].contains(&name);
        let good = vec![page(
            "docs/x.md",
            "`idgen_warnings`, idgen_client::Client, libidgen_previous.so, `idgen_lease_*`.\n",
        )];
        assert_eq!(unknown_info_fields(&good, &known), Vec::<String>::new());
        let planted = vec![page(
            "docs/x.md",
            "Watch `idgen_warning` and\nidgen_drifts.\n",
        )];
        let failures = unknown_info_fields(&planted, &known);
        assert_eq!(failures.len(), 2, "{failures:#?}");
        assert!(failures[0].starts_with("docs/x.md:1: idgen_warning "));
        assert!(failures[1].starts_with("docs/x.md:2: idgen_drifts "));
    }

    #[test]
    fn a_figure_outside_benchmarks_is_caught() {
        let benchmarks = page(
            "BENCHMARKS.md",
            "# Benchmarks\n\n## Targets\n\n| a | 0.94 | 10,230,179 IDs/s |\n\n## Other\n\n0.90\n",
        );
        let good = vec![
            benchmarks.clone(),
            page(
                "docs/p.md",
                "Quoted: [0.94 of the floor](../BENCHMARKS.md#targets). Redis 7.0.15, \
                 `1.5 × max-drift-ms`, 0.12 µs, 4,096 IDs a millisecond.\n",
            ),
        ];
        assert_eq!(misplaced_figures(&good), Vec::<String>::new());
        let planted = vec![
            benchmarks,
            page(
                "docs/p.md",
                "SEGMENT.NEXT runs at 0.90 of the floor, 11.6 M IDs/s and about 3×.\n\
                 [0.90](../BENCHMARKS.md#targets) is in another section.\n",
            ),
        ];
        let failures = misplaced_figures(&planted);
        assert_eq!(failures.len(), 4, "{failures:#?}");
        assert!(failures[0].contains("0.90"));
        assert!(failures[1].contains("11.6 M IDs/s"));
        assert!(failures[2].contains("3×"));
        assert!(failures[3].contains("not in BENCHMARKS.md#targets"));
    }

    #[test]
    fn a_long_sentence_is_caught() {
        let short = page(
            "README.md",
            "# T\n\nOne short sentence. Another one: fine.\n",
        );
        assert_eq!(long_sentences(&short, 40), Vec::<String>::new());
        let words = vec!["word"; 41].join(" ");
        let planted = page(
            "README.md",
            &format!("# T\n\nShort. A [link](x.md#y) {words}.\n"),
        );
        let failures = long_sentences(&planted, 40);
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert!(failures[0].contains("a sentence of 43 words"));
    }
}
