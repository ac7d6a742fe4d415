//! Seeing through wrappers: `sudo`, `env`, `timeout`, `bash -c`, `eval`,
//! `find -exec`, `xargs`, ... are unwrapped, recursively, so the program
//! that really runs is judged, not the wrapper in front of it.

mod wrappers;

use wrappers::through_wrapper;

use std::collections::BTreeSet;

use super::parse::{Parsed, Simple, UNQUOTED_EXPANSION, is_quoted_expansion, parse};
use super::values::Expanded;

/// Folders whose programs are the system's own.
const SYSTEM_DIRS: [&str; 6] = [
    "/bin",
    "/usr/bin",
    "/usr/local/bin",
    "/sbin",
    "/usr/sbin",
    "/usr/local/sbin",
];
const SHELLS: [&str; 8] = ["bash", "sh", "zsh", "dash", "ksh", "ash", "mksh", "fish"];

/// Classes the unwrapper itself gives.
pub const OPAQUE: &str = "opaque";
pub const PRIVILEGE: &str = "privilege";
pub const PIPE_TO_SHELL: &str = "pipe_to_shell";
pub const NONSTANDARD_PATH: &str = "nonstandard_path";

/// One program that would run, with what the wrappers around it add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The program as written (a path stays a path).
    pub program: String,
    /// Its basename, which the class table matches.
    pub name: String,
    pub args: Vec<String>,
    /// Classes that come from how it is run, not from the table.
    pub extra: BTreeSet<String>,
    /// What the words it was written with expand that the text does not
    /// spell out (a wrapper's words count for what it runs).
    pub expanded: Vec<Expanded>,
}

/// Everything that would run.
#[derive(Debug, Clone, Default)]
pub struct Unwrapped {
    pub runs: Vec<Run>,
    /// Output redirection targets (`None`: not a literal).
    pub writes: Vec<Option<String>>,
    /// Input redirection sources (`None`: not a literal).
    pub reads: Vec<Option<String>>,
    /// Literal words named outside the commands' arguments (assigned
    /// values, `for` lists).
    pub named_words: Vec<String>,
    /// Every variable the text assigns, in any form (`VAR=x cmd`,
    /// `env VAR=x`, `export`, `declare`, `read VAR`, `for VAR in`, a plain
    /// `VAR=x`).
    pub assignments: Vec<String>,
    /// Names the text defines as functions or aliases: a later use of
    /// such a name is not the program of that name.
    pub defined: BTreeSet<String>,
    /// Programs that run the ones judged (`env`, `timeout`, `xargs`,
    /// `bash -c`, the `sh` that `watch` starts): they run too, and the
    /// command's facts name them among its programs.
    pub wrappers: BTreeSet<String>,
    /// Something could not be seen through.
    pub opaque: bool,
    /// A `cd` or `pushd` changes where relative paths point.
    pub changes_directory: bool,
    /// Where each `cd`/`pushd` goes, when its operand is a literal (`~`
    /// for a bare `cd`); `None` when unknown (`cd -`, `popd`, `cd $X`).
    pub directories: Vec<Option<String>>,
}

pub fn unwrap_source(source: &str, depth: usize, out: &mut Unwrapped) {
    let parsed: Parsed = parse(source);
    if parsed.unparseable {
        out.opaque = true;
    }
    out.writes.extend(parsed.writes);
    out.reads.extend(parsed.reads);
    out.assignments.extend(parsed.assignments);
    out.named_words.extend(parsed.named_words);
    out.defined.extend(parsed.functions);
    for simple in parsed.commands {
        unwrap_simple(&simple, depth, out);
    }
}

fn unwrap_simple(simple: &Simple, depth: usize, out: &mut Unwrapped) {
    let before = out.runs.len();
    unwrap_words(simple, depth, out);
    for run in &mut out.runs[before..] {
        for value in &simple.expanded {
            if !run.expanded.contains(value) {
                run.expanded.push(value.clone());
            }
        }
    }
}

/// Programs that run the rest of their words once their own options (and
/// a fixed number of operands) are skipped: `timeout 5 CMD`, `nice -n 3
/// CMD`. The program after them is judged in their stead.
struct Prefix {
    names: &'static [&'static str],
    /// Their options that take a value as the next word; `None`: they take
    /// no options at all (`busybox APPLET`).
    options_with_value: Option<&'static [&'static str]>,
    /// Operands before the program (`timeout DURATION`, `chrt PRIORITY`).
    operands: usize,
    /// Running through it is a privilege (`sudo`).
    privileged: bool,
    /// Alone (`sudo` with nothing after it), it is itself the run.
    recorded_alone: bool,
}

const PREFIXES: [Prefix; 9] = [
    Prefix {
        names: &["sudo", "doas"],
        options_with_value: Some(&["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"]),
        operands: 0,
        privileged: true,
        recorded_alone: true,
    },
    Prefix {
        names: &["timeout"],
        options_with_value: Some(&["-s", "-k", "--signal", "--kill-after"]),
        operands: 1,
        privileged: false,
        recorded_alone: false,
    },
    Prefix {
        names: &["nice"],
        options_with_value: Some(&["-n", "--adjustment"]),
        operands: 0,
        privileged: false,
        recorded_alone: false,
    },
    Prefix {
        names: &["setsid", "unbuffer", "nohup", "builtin", "time"],
        options_with_value: Some(&[]),
        operands: 0,
        privileged: false,
        recorded_alone: false,
    },
    Prefix {
        names: &["ionice"],
        options_with_value: Some(&[
            "-c",
            "-n",
            "-p",
            "-P",
            "-u",
            "--class",
            "--classdata",
            "--pid",
            "--pgid",
            "--uid",
        ]),
        operands: 0,
        privileged: false,
        recorded_alone: false,
    },
    // `chrt [options] PRIORITY CMD`, `taskset [options] MASK CMD`.
    Prefix {
        names: &["chrt", "taskset"],
        options_with_value: Some(&[
            "-T",
            "-P",
            "-D",
            "--sched-runtime",
            "--sched-period",
            "--sched-deadline",
        ]),
        operands: 1,
        privileged: false,
        recorded_alone: false,
    },
    // `busybox APPLET ARGS`: the applet is the program.
    Prefix {
        names: &["busybox"],
        options_with_value: None,
        operands: 0,
        privileged: false,
        recorded_alone: false,
    },
    Prefix {
        names: &["stdbuf"],
        options_with_value: Some(&["-i", "-o", "-e"]),
        operands: 0,
        privileged: false,
        recorded_alone: false,
    },
    Prefix {
        names: &["exec"],
        options_with_value: Some(&["-a"]),
        operands: 0,
        privileged: false,
        // `exec 3>FILE`: changes the shell's own descriptors.
        recorded_alone: true,
    },
];

/// The command word being unwrapped, and what follows it.
struct Step<'a> {
    simple: &'a Simple,
    depth: usize,
    /// The program as written, and its basename.
    first: &'a str,
    name: &'a str,
    rest: &'a [Option<String>],
}

/// What a wrapper leaves: the words of the program it runs, unwrapped in
/// turn; or nothing more to see.
enum Next {
    Words(Vec<Option<String>>),
    Done,
}

fn unwrap_words(simple: &Simple, depth: usize, out: &mut Unwrapped) {
    let mut words: Vec<Option<String>> = simple.words.clone();
    let mut extra = BTreeSet::new();
    out.assignments.extend(simple.assignments.iter().cloned());
    loop {
        // `VAR=x` words in front (after env and the like) set the environment.
        while let Some(name) = words.first().and_then(|w| w.as_deref()).and_then(assigned) {
            out.assignments.push(name.to_owned());
            words.remove(0);
        }
        let Some(first) = words.first() else {
            return;
        };
        let Some(first) = first.clone().filter(|w| !is_quoted_expansion(w)) else {
            // A variable or substitution in command position.
            out.opaque = true;
            return;
        };
        let name = basename(&first).to_owned();
        let rest: Vec<Option<String>> = words[1..].to_vec();
        out.wrappers.insert(name.clone());
        let step = Step {
            simple,
            depth,
            first: &first,
            name: &name,
            rest: &rest,
        };
        let next = match PREFIXES.iter().find(|p| p.names.contains(&name.as_str())) {
            Some(prefix) => through_prefix(prefix, &step, &mut extra, out),
            None => through_wrapper(&step, &mut extra, out),
        };
        match next {
            Next::Words(next) => words = next,
            Next::Done => return,
        }
    }
}

fn through_prefix(
    prefix: &Prefix,
    step: &Step<'_>,
    extra: &mut BTreeSet<String>,
    out: &mut Unwrapped,
) -> Next {
    if prefix.privileged {
        extra.insert(PRIVILEGE.to_owned());
    }
    let mut words = match prefix.options_with_value {
        Some(options) => skip_options(step.rest, options),
        None => step.rest.to_vec(),
    };
    if words.is_empty() && prefix.recorded_alone {
        let args = if prefix.privileged {
            Vec::new()
        } else {
            literals(step.rest)
        };
        record(out, step.first, step.name, &args, extra);
        return Next::Done;
    }
    words.drain(..prefix.operands.min(words.len()));
    Next::Words(words)
}

fn record(
    out: &mut Unwrapped,
    program: &str,
    name: &str,
    args: &[String],
    extra: &BTreeSet<String>,
) {
    let mut extra = extra.clone();
    if program.contains('/') {
        let standard = SYSTEM_DIRS
            .iter()
            .any(|dir| std::path::Path::new(program).parent() == Some(std::path::Path::new(dir)));
        if !standard {
            extra.insert(NONSTANDARD_PATH.to_owned());
        }
    }
    out.runs.push(Run {
        program: program.to_owned(),
        name: name.to_owned(),
        args: args.to_vec(),
        extra,
        expanded: Vec::new(),
    });
}

/// Arguments as text; what is not a literal reads as `UNQUOTED_EXPANSION`.
fn literals(words: &[Option<String>]) -> Vec<String> {
    words
        .iter()
        .map(|w| w.clone().unwrap_or_else(|| UNQUOTED_EXPANSION.to_owned()))
        .collect()
}

/// A word that is shell text to run (`eval`, `bash -c`, `trap`), when
/// its text is known.
fn script_word(word: &Option<String>) -> Option<String> {
    word.clone().filter(|w| !is_quoted_expansion(w))
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// The variable a `NAME=value` word assigns.
fn assigned(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let name = name.strip_suffix('+').unwrap_or(name);
    is_identifier(name).then_some(name)
}

/// The variable a declaration operand (`NAME=value`, `NAME`) names.
fn declared(word: &str) -> Option<&str> {
    assigned(word).or_else(|| is_identifier(word).then_some(word))
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Drops leading options; those in `with_value` take the next word too.
/// The string `xargs` replaces with each input line (`-I R`, `-IR`,
/// `-i[R]`, `--replace[=R]`; `-i` alone means `{}`), if it replaces.
/// An option it cannot read is taken to replace `{}`.
fn xargs_replace_string(words: &[Option<String>]) -> Option<String> {
    let mut index = 0;
    while let Some(word) = words.get(index) {
        let Some(word) = word.as_deref() else {
            return Some("{}".to_owned());
        };
        if word == "--" || !word.starts_with('-') || word.len() == 1 {
            return None;
        }
        index += 1;
        if word == "-I" {
            return Some(
                words
                    .get(index)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| "{}".to_owned()),
            );
        }
        if let Some(attached) = word.strip_prefix("-I").or_else(|| word.strip_prefix("-i")) {
            return Some(if attached.is_empty() { "{}" } else { attached }.to_owned());
        }
        if let Some(rest) = word.strip_prefix("--replace") {
            return Some(rest.strip_prefix('=').unwrap_or("{}").to_owned());
        }
        // A cluster holding `I` or `i` (`-tI R`): which string it replaces
        // is not read here, so every word is taken as replaced.
        if !word.starts_with("--") && word.contains(['I', 'i']) {
            return Some(String::new());
        }
        if matches!(
            word,
            "-n" | "-P" | "-d" | "-L" | "-s" | "-a" | "-E" | "--max-args" | "--max-procs"
        ) {
            index += 1;
        }
    }
    None
}

fn skip_options(words: &[Option<String>], with_value: &[&str]) -> Vec<Option<String>> {
    let mut index = 0;
    while index < words.len() {
        match words[index].as_deref() {
            Some("--") => {
                index += 1;
                break;
            }
            Some(flag) if flag.starts_with('-') && flag.len() > 1 => {
                let takes_value = with_value.contains(&flag);
                index += if takes_value { 2 } else { 1 };
            }
            _ => break,
        }
    }
    words[index.min(words.len())..].to_vec()
}

/// `env`'s options; `-S STRING` splits a string into a command line, and
/// `-u VAR` changes the environment as much as an assignment does.
fn skip_env_options(
    words: &[Option<String>],
    out: &mut Unwrapped,
) -> (Vec<Option<String>>, Option<Option<String>>) {
    let mut index = 0;
    while index < words.len() {
        match words[index].as_deref() {
            Some("--") => {
                index += 1;
                break;
            }
            Some("-S" | "--split-string") => {
                return (Vec::new(), Some(words.get(index + 1).cloned().flatten()));
            }
            Some("-u" | "--unset") => {
                let name = words.get(index + 1).cloned().flatten();
                out.assignments
                    .push(name.unwrap_or_else(|| UNQUOTED_EXPANSION.to_owned()));
                index += 2;
            }
            Some("-C" | "--chdir") => index += 2,
            Some(flag) if flag.starts_with('-') && flag.len() > 1 => index += 1,
            _ => break,
        }
    }
    (words[index.min(words.len())..].to_vec(), None)
}
