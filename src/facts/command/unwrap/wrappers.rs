//! The wrappers that run another program each in their own way: `env`,
//! `flock`, `command`, `xargs`, a shell's `-c` or script, `find -exec`,
//! `alias` and `cd`. Each hands the words it runs back to be unwrapped in
//! turn, or records what it itself is.

use std::collections::BTreeSet;

use super::super::parse::{MAX_DEPTH, QUOTED_EXPANSION, Simple, is_quoted_expansion};
use super::super::values::read_variables;
use super::{
    Next, PIPE_TO_SHELL, SHELLS, Step, Unwrapped, assigned, basename, declared, literals, record,
    script_word, skip_env_options, skip_options, unwrap_simple, unwrap_source,
    xargs_replace_string,
};

/// Every other program: a wrapper with its own way of running what it
/// runs, or (the last arm) the program itself.
pub(super) fn through_wrapper(
    step: &Step<'_>,
    extra: &mut BTreeSet<String>,
    out: &mut Unwrapped,
) -> Next {
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
pub(super) fn option_value(words: &[Option<String>], options: &[&str]) -> Option<Option<String>> {
    words
        .iter()
        .position(|w| w.as_deref().is_some_and(|w| options.contains(&w)))
        .map(|at| words.get(at + 1).cloned().flatten())
}

pub(super) fn through_env(step: &Step<'_>, extra: &BTreeSet<String>, out: &mut Unwrapped) -> Next {
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
pub(super) fn through_flock(step: &Step<'_>, out: &mut Unwrapped) -> Next {
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
pub(super) fn through_command(
    step: &Step<'_>,
    extra: &BTreeSet<String>,
    out: &mut Unwrapped,
) -> Next {
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
pub(super) fn through_xargs(rest: &[Option<String>], out: &mut Unwrapped) -> Vec<Option<String>> {
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
pub(super) fn define_aliases(rest: &[Option<String>], depth: usize, out: &mut Unwrapped) {
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

pub(super) fn change_directory(name: &str, rest: &[Option<String>], out: &mut Unwrapped) {
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
pub(super) fn run_script(script: Option<&str>, depth: usize, out: &mut Unwrapped) {
    match script {
        Some(script) if depth < MAX_DEPTH => unwrap_source(script, depth + 1, out),
        _ => out.opaque = true,
    }
}

pub(super) fn unwrap_shell(
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
pub(super) fn reads_output(word: &Option<String>, simple: &Simple) -> bool {
    match word.as_deref() {
        Some(QUOTED_EXPANSION) => true,
        Some(name) => simple.piped_into && STDIN_FILES.contains(&name),
        None => false,
    }
}

pub(super) fn unwrap_find(
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
