//! Seeing through wrappers: `sudo`, `env`, `timeout`, `bash -c`, `eval`,
//! `find -exec`, `xargs`, ... are unwrapped, recursively, so the program
//! that really runs is judged, not the wrapper in front of it.

use std::collections::BTreeSet;

use super::parse::{
    MAX_DEPTH, Parsed, QUOTED_EXPANSION, Simple, UNQUOTED_EXPANSION, is_quoted_expansion, parse,
};
use super::values::{Expanded, read_variables};

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

/// Every other program: a wrapper with its own way of running what it
/// runs, or (the last arm) the program itself.
fn through_wrapper(step: &Step<'_>, extra: &mut BTreeSet<String>, out: &mut Unwrapped) -> Next {
    let Step {
        simple,
        depth,
        first,
        name,
        rest,
    } = *step;
    match name {
        "env" => return through_env(step, extra, out),
        "flock" => return through_flock(step, out),
        "command" => return through_command(step, extra, out),
        "xargs" => return Next::Words(through_xargs(rest, out)),
        "watch" => {
            // `watch CMD ARGS` joins its words and runs them with `sh -c`.
            let after = skip_options(rest, &["-n", "--interval", "-q", "--equexit"]);
            let script: Option<Vec<String>> = after.iter().map(script_word).collect();
            let script = script.filter(|s| !s.is_empty()).map(|s| s.join(" "));
            out.wrappers.insert("sh".to_owned());
            run_script(script.as_deref(), depth, out);
            return Next::Done;
        }
        "script" => {
            // `script -c CMD` runs CMD with a shell; without it, an
            // interactive shell: nothing to see.
            let command = option_value(rest, &["-c", "--command"])
                .flatten()
                .filter(|s| !is_quoted_expansion(s));
            run_script(command.as_deref(), depth, out);
        }
        shell if SHELLS.contains(&shell) => {
            unwrap_shell(first, rest, simple, depth, extra, out);
            return Next::Done;
        }
        "eval" => {
            let script: Option<Vec<String>> = rest.iter().map(script_word).collect();
            run_script(script.map(|s| s.join(" ")).as_deref(), depth, out);
            return Next::Done;
        }
        "source" | "." => {
            // Runs a file portcullis cannot see; one that is other
            // commands' output is a pipe to the shell.
            out.opaque = true;
            if rest.first().is_some_and(|f| reads_output(f, simple)) {
                extra.insert(PIPE_TO_SHELL.to_owned());
            }
        }
        "find" => {
            unwrap_find(first, name, rest, depth, extra, out);
            return Next::Done;
        }
        "trap" => {
            // `trap 'CMD' SIGNAL` runs CMD later: it is judged now.
            let operands = skip_options(rest, &[]);
            if operands.len() > 1 {
                run_script(
                    operands.first().and_then(script_word).as_deref(),
                    depth,
                    out,
                );
            }
        }
        "alias" => define_aliases(rest, depth, out),
        "read" => out.assignments.extend(read_variables(rest)),
        "export" | "declare" | "typeset" | "local" | "readonly" => out.assignments.extend(
            rest.iter()
                .flatten()
                .filter(|w| !w.starts_with('-') && !w.starts_with('+'))
                .filter_map(|w| declared(w).map(str::to_owned)),
        ),
        "cd" | "pushd" | "popd" => change_directory(name, rest, out),
        _ => {}
    }
    record(out, first, name, &literals(rest), extra);
    Next::Done
}

/// The value after the first of `options` (`-c CMD`): `None` when none is
/// given, `Some(None)` when the value is not a literal or is missing.
fn option_value(words: &[Option<String>], options: &[&str]) -> Option<Option<String>> {
    words
        .iter()
        .position(|w| w.as_deref().is_some_and(|w| options.contains(&w)))
        .map(|at| words.get(at + 1).cloned().flatten())
}

fn through_env(step: &Step<'_>, extra: &BTreeSet<String>, out: &mut Unwrapped) -> Next {
    let (after, split) = skip_env_options(step.rest, out);
    if let Some(script) = split {
        run_script(
            script.filter(|s| !is_quoted_expansion(s)).as_deref(),
            step.depth,
            out,
        );
        return Next::Done;
    }
    let mut words = after;
    words.retain(|w| match w.as_deref().and_then(assigned) {
        Some(name) => {
            out.assignments.push(name.to_owned());
            false
        }
        None => true,
    });
    if words.is_empty() {
        record(out, step.first, step.name, &[], extra);
        return Next::Done;
    }
    Next::Words(words)
}

/// `flock [options] FILE -c CMD` runs CMD with `sh -c`; `flock [options]
/// FILE CMD ARGS` runs CMD. Either way FILE is created when it does not
/// exist: a write.
fn through_flock(step: &Step<'_>, out: &mut Unwrapped) -> Next {
    let after = skip_options(
        step.rest,
        &[
            "-w",
            "--wait",
            "--timeout",
            "-E",
            "--conflict-exit-code",
            "-c",
            "--command",
        ],
    );
    if let Some(file) = after.first() {
        out.writes.push(file.clone());
    }
    if let Some(script) = option_value(step.rest, &["-c", "--command"]) {
        run_script(
            script.filter(|s| !is_quoted_expansion(s)).as_deref(),
            step.depth,
            out,
        );
        return Next::Done;
    }
    Next::Words(after.get(1..).map(<[_]>::to_vec).unwrap_or_default())
}

/// `command NAME ARGS` runs NAME; `-v`/`-V` only look the name up when
/// they come before it (alone or as `-pv`): after the name they are its
/// words, and `command mkdir d -v` runs mkdir.
fn through_command(step: &Step<'_>, extra: &BTreeSet<String>, out: &mut Unwrapped) -> Next {
    let after = skip_options(step.rest, &[]);
    let leading = &step.rest[..step.rest.len() - after.len()];
    let lookup = leading.iter().any(|w| {
        w.as_deref()
            .is_some_and(|w| w != "--" && w.starts_with('-') && w[1..].contains(['v', 'V']))
    });
    if lookup {
        record(out, step.first, step.name, &literals(step.rest), extra);
        return Next::Done;
    }
    Next::Words(after)
}

/// The words of what `xargs` runs: its command (`echo` when none), then a
/// word for what it reads from stdin, unknown (and possibly an option:
/// `echo '-o out' | xargs sort`). With `-I R` every word holding R becomes
/// what stdin says, a shell script included (`xargs -I{} sh -c {}` runs
/// the input): what runs cannot be seen. The words are still judged as
/// written, so `rm {}` stays a `rm`.
fn through_xargs(rest: &[Option<String>], out: &mut Unwrapped) -> Vec<Option<String>> {
    let replaced = xargs_replace_string(rest);
    let mut words = skip_options(
        rest,
        &[
            "-n",
            "-I",
            "-P",
            "-d",
            "-L",
            "-s",
            "-a",
            "-E",
            "--max-args",
            "--max-procs",
        ],
    );
    if words.is_empty() {
        words = vec![Some("echo".to_owned())];
    }
    if let Some(replaced) = replaced
        && words.iter().any(|word| {
            word.as_deref()
                .is_none_or(|w| w.contains(replaced.as_str()))
        })
    {
        out.opaque = true;
    }
    words.push(None);
    words
}

/// `alias NAME=TEXT`: TEXT runs wherever NAME is used.
fn define_aliases(rest: &[Option<String>], depth: usize, out: &mut Unwrapped) {
    for word in rest {
        match script_word(word).as_deref().and_then(|w| w.split_once('=')) {
            Some((alias, text)) => {
                out.defined.insert(alias.to_owned());
                run_script(Some(text), depth, out);
            }
            None if word.is_none() => out.opaque = true,
            None => {}
        }
    }
}

fn change_directory(name: &str, rest: &[Option<String>], out: &mut Unwrapped) {
    out.changes_directory = true;
    let operand = rest.iter().find(|w| {
        !w.as_deref()
            .is_some_and(|w| w.starts_with('-') && w.len() > 1)
    });
    out.directories.push(match (name, operand) {
        ("popd", _) => None,
        (_, None) => Some("~".to_owned()),
        (_, Some(word)) => word.clone().filter(|w| w != "-" && !is_quoted_expansion(w)),
    });
}

/// Judges shell text a command runs (`bash -c`, `eval`, `watch`, an
/// alias): text the gate cannot read, or nested too deep, is opaque.
fn run_script(script: Option<&str>, depth: usize, out: &mut Unwrapped) {
    match script {
        Some(script) if depth < MAX_DEPTH => unwrap_source(script, depth + 1, out),
        _ => out.opaque = true,
    }
}

fn unwrap_shell(
    program: &str,
    rest: &[Option<String>],
    simple: &Simple,
    depth: usize,
    extra: &BTreeSet<String>,
    out: &mut Unwrapped,
) {
    let mut index = 0;
    let mut script_follows = false;
    let mut operands = false;
    // `-s`: the script is read from stdin, and the operands are its
    // arguments.
    let mut script_from_stdin = false;
    while index < rest.len() {
        match rest[index].as_deref() {
            // A login or interactive shell first runs the system's and the
            // user's profile scripts: programs nobody can see from here.
            Some(flag)
                if flag == "--login"
                    || (flag.starts_with('-')
                        && !flag.starts_with("--")
                        && flag.contains(['l', 'i'])) =>
            {
                out.opaque = true;
                if flag.contains('c') {
                    script_follows = true;
                    index += 1;
                    break;
                }
            }
            Some(flag) if flag.starts_with('-') && !flag.starts_with("--") && flag.len() > 1 => {
                if flag.contains('c') {
                    script_follows = true;
                    index += 1;
                    break;
                }
                script_from_stdin |= flag.contains('s');
            }
            Some(flag) if flag.starts_with("--") => {}
            Some("+o") => index += 1,
            _ => {
                operands = true;
                break;
            }
        }
        index += 1;
    }
    if script_follows {
        run_script(rest.get(index).and_then(script_word).as_deref(), depth, out);
        return;
    }
    let script_file = rest.get(index);
    if operands && !script_from_stdin && script_file.is_some_and(|f| reads_output(f, simple)) {
        // `bash <(curl ...)`, `curl ... | bash /dev/stdin`: a script made
        // of commands' output.
        let mut extra = extra.clone();
        extra.insert(PIPE_TO_SHELL.to_owned());
        out.opaque = true;
        record(out, program, basename(program), &literals(rest), &extra);
        return;
    }
    if operands && !script_from_stdin {
        // A script file: portcullis cannot see into it.
        out.opaque = true;
        record(out, program, basename(program), &literals(rest), extra);
        return;
    }
    if simple.piped_into {
        let mut extra = extra.clone();
        extra.insert(PIPE_TO_SHELL.to_owned());
        record(out, program, basename(program), &[], &extra);
        return;
    }
    run_script(simple.stdin_text.as_deref(), depth, out)
}

/// Names of a shell's own stdin, as a script file.
const STDIN_FILES: [&str; 4] = ["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"];

/// Whether a script file operand is commands' output: a process
/// substitution, or stdin when stdin is fed by commands.
fn reads_output(word: &Option<String>, simple: &Simple) -> bool {
    match word.as_deref() {
        Some(QUOTED_EXPANSION) => true,
        Some(name) => simple.piped_into && STDIN_FILES.contains(&name),
        None => false,
    }
}

fn unwrap_find(
    program: &str,
    name: &str,
    rest: &[Option<String>],
    depth: usize,
    extra: &BTreeSet<String>,
    out: &mut Unwrapped,
) {
    let mut own = Vec::new();
    let mut index = 0;
    while index < rest.len() {
        let word = rest[index].clone();
        if matches!(
            word.as_deref(),
            Some("-exec" | "-execdir" | "-ok" | "-okdir")
        ) {
            own.push(word.unwrap_or_default());
            let mut inner = Vec::new();
            index += 1;
            while index < rest.len() && !matches!(rest[index].as_deref(), Some(";" | "+")) {
                inner.push(
                    rest[index]
                        .clone()
                        .filter(|w| w != "{}")
                        .or_else(|| Some("FILE".to_owned())),
                );
                index += 1;
            }
            if depth < MAX_DEPTH {
                let simple = Simple {
                    words: inner,
                    stdin_text: None,
                    piped_into: false,
                    assignments: Vec::new(),
                    expanded: Vec::new(),
                };
                unwrap_simple(&simple, depth + 1, out);
            } else {
                out.opaque = true;
            }
        } else {
            own.push(word.unwrap_or_else(|| "$?".to_owned()));
        }
        index += 1;
    }
    record(out, program, name, &own, extra);
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
