//! What the documentation claims, read out of its Markdown for `tests/tests/docs.rs` to run:
//! redis-cli sessions, `ACL SETUSER` lines, shell lines, and the keys code examples use.
//!
//! A *session* is a fenced ```` ```text ```` block holding lines that start with the prompt
//! `127.0.0.1:6379> `; each prompt line is a command, and the lines up to the next prompt are
//! its reply exactly as `redis-cli` prints it. The first session of a document must be
//! preceded (as the last non-blank line before its fence) by `<!-- server: ARGS -->`, the
//! module arguments of the fresh server it ran on (`<!-- server: -->` for none); such a
//! comment before a later session starts another fresh server. A text block that uses any
//! other prompt (`redis> `, another port) is reported as an error, so that no transcript
//! escapes the test.

use std::path::{Path, PathBuf};

/// The prompt a session's command lines start with: redis-cli's, connected to the default
/// port.
pub const PROMPT: &str = "127.0.0.1:6379> ";

/// One command of a session and the reply the document shows for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Line number (1-based) of the prompt line in the document.
    pub line: usize,
    /// What follows the prompt, as typed into redis-cli.
    pub command: String,
    /// The reply lines as the document shows them.
    pub reply: Vec<String>,
}

/// One transcript block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Line number (1-based) of the opening fence.
    pub line: usize,
    /// `Some(args)` when a `<!-- server: ARGS -->` comment precedes the block: a fresh
    /// server with these module arguments; `None` to continue on the previous session's.
    pub fresh_server: Option<Vec<String>>,
    /// The commands in order.
    pub steps: Vec<Step>,
}

/// An `ACL SETUSER` line the document gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclLine {
    /// Line number (1-based) where it starts.
    pub line: usize,
    /// The words after `ACL SETUSER`: the user name, then its rules.
    pub words: Vec<String>,
}

impl AclLine {
    /// The user name.
    pub fn user(&self) -> &str {
        &self.words[0]
    }

    /// The password the line sets (`>pw`); any password works for a `nopass` user (`None`
    /// when the line sets neither, so no one can log in).
    pub fn password(&self) -> Option<&str> {
        self.words
            .iter()
            .find_map(|w| w.strip_prefix('>'))
            .or_else(|| {
                self.words
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case("nopass"))
                    .then_some("any")
            })
    }

    /// The commands granted by name (`+snowflake.next` → `snowflake.next`), lower case.
    pub fn granted_commands(&self) -> Vec<String> {
        self.words
            .iter()
            .filter_map(|w| w.strip_prefix('+'))
            .filter(|w| !w.starts_with('@'))
            .map(str::to_ascii_lowercase)
            .collect()
    }
}

/// A line of a ```` ```sh ```` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellLine {
    /// Line number (1-based).
    pub line: usize,
    /// The command, with any trailing `# comment` removed and whitespace trimmed.
    pub command: String,
}

/// A fenced code example (not a transcript, not a shell block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The fence's info string (`python`, `js`, `rust`, …).
    pub language: String,
    /// Line number (1-based) of the opening fence.
    pub line: usize,
    /// The code.
    pub text: String,
    /// `Some(runner)` when `<!-- run: RUNNER -->` is the last non-blank line before the
    /// fence: `tests/tests/doc_examples.rs` runs it (`python`, `node`).
    pub run: Option<String>,
}

/// The runner of a `<!-- run: RUNNER -->` comment, or `None` if `line` is not one.
pub fn run_comment(line: &str) -> Option<String> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    Some(inner.strip_prefix("run:")?.trim().to_string())
}

/// Everything the docs test checks in one Markdown file.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// The file.
    pub path: PathBuf,
    /// Its redis-cli transcripts in order.
    pub sessions: Vec<Session>,
    /// Its `ACL SETUSER` lines (in prose, code spans, blocks or transcripts).
    pub acl_lines: Vec<AclLine>,
    /// The lines of its shell blocks.
    pub shell_lines: Vec<ShellLine>,
    /// Every other fenced block: code examples.
    pub code_blocks: Vec<CodeBlock>,
    /// Mistakes in the document's own form: a transcript with another prompt, a first
    /// session without its server comment. Each names the line.
    pub errors: Vec<String>,
}

/// Reads and parses a Markdown file.
pub fn read_document(path: &Path) -> Document {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut document = parse_document(&text);
    document.path = path.to_path_buf();
    document
}

/// The module arguments of a `<!-- server: ARGS -->` comment, or `None` if `line` is not one.
pub fn server_comment(line: &str) -> Option<Vec<String>> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    let args = inner.strip_prefix("server:")?;
    Some(args.split_whitespace().map(str::to_string).collect())
}

/// Whether a line of a text block looks like a prompt of some redis-cli session.
fn looks_like_a_prompt(line: &str) -> bool {
    if line.starts_with("redis> ") {
        return true;
    }
    // host:port> command
    match line.split_once("> ") {
        Some((head, _)) => {
            let mut parts = head.rsplitn(2, ':');
            let port = parts.next().unwrap_or("");
            let host = parts.next().unwrap_or("");
            !host.is_empty()
                && !host.contains(' ')
                && !port.is_empty()
                && port.chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Parses Markdown text (see the module documentation for what counts).
pub fn parse_document(text: &str) -> Document {
    let lines: Vec<&str> = text.lines().collect();
    let mut document = Document::default();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let fence_line = i + 1;
        let language = info.trim().to_string();
        let body_start = i + 1;
        let mut end = body_start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        let body = &lines[body_start..end.min(lines.len())];
        match language.as_str() {
            "text" => {
                let is_session = body.iter().any(|l| l.starts_with(PROMPT));
                for (k, l) in body.iter().enumerate() {
                    if !l.starts_with(PROMPT) && looks_like_a_prompt(l) {
                        document.errors.push(format!(
                            "line {}: a transcript prompt other than `{PROMPT}` (write it as \
                             redis-cli shows it, so that the docs test runs it): {l}",
                            body_start + k + 1
                        ));
                    }
                }
                if is_session {
                    let before = lines[..i].iter().rev().find(|l| !l.trim().is_empty());
                    let fresh_server = before.and_then(|l| server_comment(l));
                    if fresh_server.is_none() && document.sessions.is_empty() {
                        document.errors.push(format!(
                            "line {fence_line}: the document's first redis-cli transcript has no \
                             `<!-- server: ARGS -->` line before it: say which module arguments \
                             the server that answered was started with (`<!-- server: -->` for \
                             none)"
                        ));
                    }
                    document.sessions.push(Session {
                        line: fence_line,
                        fresh_server,
                        steps: parse_steps(body, body_start),
                    });
                }
                for (k, l) in body.iter().enumerate() {
                    let command = l.strip_prefix(PROMPT).unwrap_or(l);
                    if let Some(words) = acl_words(command) {
                        document.acl_lines.push(AclLine {
                            line: body_start + k + 1,
                            words,
                        });
                    }
                }
            }
            "sh" | "bash" | "shell" => {
                for (k, l) in body.iter().enumerate() {
                    let command = strip_shell_comment(l).trim().to_string();
                    if !command.is_empty() {
                        document.shell_lines.push(ShellLine {
                            line: body_start + k + 1,
                            command,
                        });
                    }
                }
            }
            _ => {
                let before = lines[..i].iter().rev().find(|l| !l.trim().is_empty());
                document.code_blocks.push(CodeBlock {
                    language,
                    line: fence_line,
                    text: body.join("\n"),
                    run: before.and_then(|l| run_comment(l)),
                })
            }
        }
        i = end + 1;
    }
    document.acl_lines.extend(acl_lines_in_prose(&lines));
    document.acl_lines.sort_by_key(|a| a.line);
    document
}

fn parse_steps(body: &[&str], body_start: usize) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for (k, l) in body.iter().enumerate() {
        match l.strip_prefix(PROMPT) {
            Some(command) => steps.push(Step {
                line: body_start + k + 1,
                command: command.to_string(),
                reply: Vec::new(),
            }),
            None => {
                if let Some(step) = steps.last_mut() {
                    step.reply.push(l.to_string());
                }
            }
        }
    }
    steps
}

/// The words of `ACL SETUSER …` at the start of `text` (case-insensitive), if it is one.
fn acl_words(text: &str) -> Option<Vec<String>> {
    let mut words = text.split_whitespace();
    let acl = words.next()?;
    let setuser = words.next()?;
    if !acl.eq_ignore_ascii_case("ACL") || !setuser.eq_ignore_ascii_case("SETUSER") {
        return None;
    }
    let rest: Vec<String> = words.map(str::to_string).collect();
    (!rest.is_empty()).then_some(rest)
}

/// `ACL SETUSER` inside inline code spans of the prose (outside fenced blocks); a span may
/// continue on the next line, as Markdown allows.
fn acl_lines_in_prose(lines: &[&str]) -> Vec<AclLine> {
    let mut found = Vec::new();
    let mut in_block = false;
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut rest = *line;
        while let Some(start) = rest.find("`ACL SETUSER") {
            let after = &rest[start + 1..];
            let (span, remainder) = match after.find('`') {
                Some(end) => (after[..end].to_string(), &after[end + 1..]),
                None => {
                    // The span goes on on the next line(s).
                    let mut span = after.to_string();
                    let mut j = i + 1;
                    while j < lines.len() {
                        match lines[j].find('`') {
                            Some(end) => {
                                span.push(' ');
                                span.push_str(&lines[j][..end]);
                                break;
                            }
                            None => {
                                span.push(' ');
                                span.push_str(lines[j]);
                            }
                        }
                        j += 1;
                    }
                    (span, "")
                }
            };
            if let Some(words) = acl_words(&span) {
                found.push(AclLine { line: i + 1, words });
            }
            rest = remainder;
        }
    }
    found
}

/// A shell line without its trailing comment (a `#` after whitespace, outside quotes).
fn strip_shell_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return &line[..i],
            None => {}
        }
        previous = c;
    }
    line
}

/// The Markdown files the docs test reads: README.md and docs/*.md, sorted.
pub fn documented_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
Intro `ACL SETUSER app on >pw ~orders
+snowflake.next` more.

<!-- server: step 6 offset 2 -->
```text
127.0.0.1:6379> SET invoice 5
OK
127.0.0.1:6379> SEGMENT.NEXT invoice COUNT 2
1) (integer) 1000000010
2) (integer) 1000000016
3) (integer) 6
```

```text
127.0.0.1:6379> GET invoice
\"1000000016\"
```

```sh
scripts/demo.sh   # the demo
redis-cli -p 7000 \"a # b\"
```

<!-- run: python -->
```rust
client.next_snowflake(\"orders\")
```
";

    #[test]
    fn sessions_steps_acl_and_shell_lines_are_found() {
        let d = parse_document(SAMPLE);
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        assert_eq!(d.sessions.len(), 2);
        assert_eq!(
            d.sessions[0].fresh_server,
            Some(vec!["step".into(), "6".into(), "offset".into(), "2".into()])
        );
        assert_eq!(d.sessions[1].fresh_server, None);
        assert_eq!(d.sessions[0].steps.len(), 2);
        assert_eq!(
            d.sessions[0].steps[1].command,
            "SEGMENT.NEXT invoice COUNT 2"
        );
        assert_eq!(d.sessions[0].steps[1].reply.len(), 3);
        assert_eq!(d.sessions[0].steps[1].line, 8);
        assert_eq!(d.acl_lines.len(), 1);
        assert_eq!(d.acl_lines[0].user(), "app");
        assert_eq!(d.acl_lines[0].password(), Some("pw"));
        assert_eq!(d.acl_lines[0].granted_commands(), vec!["snowflake.next"]);
        assert_eq!(d.shell_lines.len(), 2);
        assert_eq!(d.shell_lines[0].command, "scripts/demo.sh");
        assert_eq!(d.shell_lines[1].command, "redis-cli -p 7000 \"a # b\"");
        assert_eq!(d.code_blocks.len(), 1);
        assert_eq!(d.code_blocks[0].run.as_deref(), Some("python"));
    }

    #[test]
    fn a_first_session_without_its_server_comment_is_an_error() {
        let d = parse_document("```text\n127.0.0.1:6379> PING\nPONG\n```\n");
        assert_eq!(d.errors.len(), 1);
        assert!(
            d.errors[0].contains("<!-- server: ARGS -->"),
            "{}",
            d.errors[0]
        );
    }

    #[test]
    fn a_nopass_user_logs_in_with_any_password() {
        let d = parse_document("Use `ACL SETUSER mon on nopass +info` for it.\n");
        assert_eq!(d.acl_lines.len(), 1);
        assert_eq!(d.acl_lines[0].password(), Some("any"));
        let d = parse_document("`ACL SETUSER off +info`\n");
        assert_eq!(d.acl_lines[0].password(), None);
    }

    #[test]
    fn other_prompts_are_errors() {
        let d = parse_document("```text\nredis> PING\nPONG\n127.0.0.1:7000> PING\n```\n");
        assert_eq!(d.errors.len(), 2, "{:?}", d.errors);
        assert!(d.sessions.is_empty());
    }
}
