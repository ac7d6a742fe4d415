//! The README and the book in `docs/` run: every command block is executed
//! against the built binary, so what a newcomer copies is what works.
//!
//! A page's blocks run in order in a folder of their own, which is also
//! `HOME` (so `~/.config/portcullis` is the page's own), with `portcullis`
//! first on `PATH`, no `PORTCULLIS_*` variable from outside and `EDITOR`
//! set to `true` (a block that opens an editor goes on with the file as it
//! is). The conventions, stated for writers in `docs/SUMMARY.md`:
//!
//! - ```` ```sh ````: one bash script (`set -euo pipefail`) that must exit 0.
//! - ```` ```console ````: a transcript. `$ ` starts a command (a line
//!   ending in `\` continues it); the lines up to the next command are its
//!   output, stdout and stderr together. `...` in a line stands for any
//!   text, a line of only `...` for any number of lines, and a last line
//!   `[exit N]` for the command's exit code (0 when there is none).
//! - `needs=PROGRAM` after the language: the block runs only where
//!   `PROGRAM --version` runs; otherwise the test says what it skipped (so
//!   no later block of the page may rest on it).
//! - `norun`: a block that starts something without end (a server a client
//!   then talks to) or runs this test suite itself; the test counts them
//!   and requires each to be one of those (it names a `serve` or `cargo`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{have, npm_install};

/// What the README opens with: the main job on built-in defaults, and the
/// test command `.ci/run` calls.
const THE_TWO_COMMANDS: &str = "cargo run --release -- demo\ncargo test\n";

#[derive(Debug, PartialEq)]
enum Kind {
    Script,
    Transcript,
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    needs: Option<String>,
    norun: bool,
    /// The block's first line in its file, for messages.
    line: usize,
    text: String,
}

/// The fenced blocks of `markdown` written in `sh` or `console`.
fn command_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match open.take() {
            None if fence => {
                let info = line.trim_start().trim_start_matches('`').trim().to_owned();
                open = Some((info, index + 2, String::new()));
            }
            None => {}
            Some((info, start, text)) if fence => {
                let mut words = info.split_whitespace();
                let kind = match words.next() {
                    Some("sh") => Kind::Script,
                    Some("console") => Kind::Transcript,
                    _ => continue,
                };
                let mut block = Block {
                    kind,
                    needs: None,
                    norun: false,
                    line: start,
                    text,
                };
                for word in words {
                    match word.split_once('=') {
                        Some(("needs", program)) => block.needs = Some(program.to_owned()),
                        None if word == "norun" => block.norun = true,
                        _ => panic!("line {start}: unknown block attribute `{word}`"),
                    }
                }
                blocks.push(block);
            }
            Some((info, start, mut text)) => {
                text.push_str(line);
                text.push('\n');
                open = Some((info, start, text));
            }
        }
    }
    assert!(open.is_none(), "a fenced block is never closed");
    blocks
}

/// One command of a transcript and the output written under it.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
    exit: i32,
}

fn transcript_steps(text: &str, line: usize) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continuing = false;
    for row in text.lines() {
        if continuing {
            let step = steps.last_mut().expect("a continuation follows a command");
            step.command.push('\n');
            step.command.push_str(row);
            continuing = row.ends_with('\\');
        } else if let Some(command) = row.strip_prefix("$ ") {
            steps.push(Step {
                command: command.to_owned(),
                expected: Vec::new(),
                exit: 0,
            });
            continuing = command.ends_with('\\');
        } else {
            let step = steps
                .last_mut()
                .unwrap_or_else(|| panic!("line {line}: a transcript starts with `$ `"));
            match row.strip_prefix("[exit ").and_then(|r| r.strip_suffix(']')) {
                Some(code) => step.exit = code.parse().expect("an exit code"),
                None => step.expected.push(row.to_owned()),
            }
        }
    }
    steps
}

/// Whether `actual` is `expected`, `...` standing for any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("...");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (index, part) in parts.iter().enumerate() {
        if index + 1 == parts.len() {
            return rest.len() >= part.len() && rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether `actual` lines are the `expected` ones, a line of `...`
/// standing for any number of lines.
fn output_matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=actual.len()).any(|skip| output_matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, more)| line_matches(first, line) && output_matches(rest, more)),
    }
}

struct Page {
    file: PathBuf,
    home: tempfile::TempDir,
    /// Links to the Node clients the page may use, and nothing else of
    /// their install (whose own `node` would stand in for the system's).
    _clients: tempfile::TempDir,
    path: String,
}

impl Page {
    fn new(file: &Path, clients: Option<&Path>) -> Self {
        let bin = Path::new(env!("CARGO_BIN_EXE_portcullis"))
            .parent()
            .unwrap()
            .to_owned();
        let linked = tempfile::tempdir().unwrap();
        if let Some(clients) = clients {
            std::os::unix::fs::symlink(clients.join("claude"), linked.path().join("claude"))
                .unwrap();
        }
        let path = format!(
            "{}:{}:{}",
            bin.display(),
            linked.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Self {
            file: file.to_owned(),
            home: tempfile::tempdir().unwrap(),
            _clients: linked,
            path,
        }
    }

    fn bash(&self, script: &str) -> std::process::Output {
        let mut command = Command::new("bash");
        command
            .args(["-c", script])
            .current_dir(self.home.path())
            .env("HOME", self.home.path())
            .env("PATH", &self.path)
            .env("EDITOR", "true")
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_DATA_HOME");
        for (name, _) in std::env::vars() {
            if name.starts_with("PORTCULLIS_") {
                command.env_remove(name);
            }
        }
        command.output().unwrap()
    }

    /// Whether `program --version` runs on the page's `PATH`.
    fn has(&self, program: &str) -> bool {
        self.bash(&format!("{program} --version")).status.success()
    }

    fn run(&self, block: &Block) {
        let at = format!("{}:{}", self.file.display(), block.line);
        match block.kind {
            Kind::Script => {
                let out = self.bash(&format!("set -euo pipefail\n{}", block.text));
                assert!(
                    out.status.success(),
                    "{at}: the block exited {:?}\n--- stdout\n{}\n--- stderr\n{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Kind::Transcript => {
                for step in transcript_steps(&block.text, block.line) {
                    let out = self.bash(&format!("exec 2>&1\n{}", step.command));
                    let text = String::from_utf8_lossy(&out.stdout);
                    let actual: Vec<&str> = text.lines().collect();
                    assert!(
                        out.status.code() == Some(step.exit)
                            && output_matches(&step.expected, &actual),
                        "{at}: `{}` exited {:?} (the book says {}) and printed\n{text}\n--- the book says\n{}",
                        step.command,
                        out.status.code(),
                        step.exit,
                        step.expected.join("\n")
                    );
                }
            }
        }
    }
}

fn book_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

fn run_page(file: &Path, clients: Option<&Path>) -> (usize, usize) {
    let markdown = fs::read_to_string(file).unwrap();
    let page = Page::new(file, clients);
    let (mut ran, mut not_run) = (0, 0);
    let mut blocks = command_blocks(&markdown);
    if file.ends_with("README.md") {
        // The README opens with the two commands; the second is this suite.
        let first = blocks.remove(0);
        assert_eq!(first.text, THE_TWO_COMMANDS, "the README's first block");
        not_run += 1;
    }
    for block in blocks {
        if block.norun {
            assert!(
                block.text.contains("serve") || block.text.contains("cargo "),
                "{}:{}: `norun` is for a block that serves or runs this suite",
                file.display(),
                block.line
            );
            not_run += 1;
            continue;
        }
        if let Some(program) = &block.needs
            && !page.has(program)
        {
            eprintln!(
                "SKIPPED: {}:{}: `{program}` is not installed",
                file.display(),
                block.line
            );
            continue;
        }
        page.run(&block);
        ran += 1;
    }
    (ran, not_run)
}

/// The pinned Node clients (Claude Code's CLI, the Inspector) the book's
/// `needs=claude` blocks use, where Node is installed.
fn clients() -> Option<PathBuf> {
    if !have("node") || !have("npm") {
        eprintln!("SKIPPED: node and npm are needed for the book's blocks that use Node clients");
        return None;
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/clients/package.json");
    Some(npm_install(&source, "interop-clients").join("node_modules/.bin"))
}

#[test]
fn the_readme_opens_with_the_two_commands_and_ci_runs_the_second() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let first = command_blocks(&readme).remove(0);
    assert_eq!(first.text, THE_TWO_COMMANDS);
    let ci = fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(ci.lines().any(|line| line == "cargo test"), "{ci}");
    // `cargo run` without `--bin` must know which of the package's binaries
    // to run, as cargo itself reads the manifest.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        metadata.status.success(),
        "{}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    assert_eq!(
        metadata["packages"][0]["default_run"], "portcullis",
        "`cargo run -- demo` would not know which binary to run"
    );
}

#[test]
fn every_command_block_of_the_readme_and_the_book_runs_as_written() {
    if !crate::util::solver_or_skip() {
        return;
    }
    let clients = clients();
    let (mut ran, mut not_run) = (0, 0);
    // A writer checks one page: PORTCULLIS_BOOK_PAGE=hooks runs docs/hooks.md.
    let only = std::env::var("PORTCULLIS_BOOK_PAGE").ok();
    for file in book_files() {
        if let Some(only) = &only
            && !file.to_string_lossy().contains(only.as_str())
        {
            continue;
        }
        let (r, n) = run_page(&file, clients.as_deref());
        ran += r;
        not_run += n;
    }
    eprintln!("{ran} command blocks ran, {not_run} serve or run the suite and were not run");
    assert!(only.is_some() || ran > 20, "only {ran} command blocks ran");
}

#[test]
fn the_book_lists_every_page_and_the_readme_stays_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let summary = fs::read_to_string(root.join("docs/SUMMARY.md")).unwrap();
    for file in book_files().iter().skip(1) {
        let name = file.file_name().unwrap().to_str().unwrap();
        if name != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("({name})")),
                "docs/SUMMARY.md does not list {name}"
            );
        }
    }
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 260,
        "the README is {} lines",
        readme.lines().count()
    );
}

#[test]
fn transcripts_match_with_ellipses_and_exit_codes() {
    let steps = transcript_steps(
        "$ portcullis gate \\\n  --command 'x'\nDENY ... exit\n...\n[exit 2]\n$ true\n",
        1,
    );
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].command, "portcullis gate \\\n  --command 'x'");
    assert_eq!(steps[0].exit, 2);
    assert_eq!(steps[1].exit, 0);
    let expected = &steps[0].expected;
    assert!(output_matches(
        expected,
        &["DENY (forbidden) exit", "a", "b"]
    ));
    assert!(output_matches(expected, &["DENY  exit"]));
    assert!(!output_matches(expected, &["ALLOW exit"]));
    assert!(!output_matches(expected, &["DENY exit now"]));
    assert!(!output_matches(&["a".to_owned()], &["a", "b"]));
    assert!(line_matches("a...b...c", "a1b2c"));
    assert!(!line_matches("a...b...c", "a1c2b"));
    assert!(line_matches("x", "x"));
}

#[test]
fn blocks_in_other_languages_are_not_commands_and_attributes_are_known() {
    let blocks = command_blocks(
        "```toml\na = 1\n```\n```sh needs=node\nnode -v\n```\n```console norun\n$ portcullis serve\n```\n",
    );
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].needs.as_deref(), Some("node"));
    assert_eq!(blocks[0].line, 5);
    assert!(blocks[1].norun && blocks[1].kind == Kind::Transcript);
    let unknown = std::panic::catch_unwind(|| command_blocks("```sh nope\nx\n```\n"));
    assert!(unknown.is_err());
}
