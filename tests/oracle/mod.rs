//! The command gate's oracle, shared by the integration tests and the fuzz
//! target: every command the gate allows is run with the
//! real `bash -c` under `strace -f` in a throwaway workspace, and what bash
//! did is held against what the gate judged. A command fails the oracle
//! when bash
//! - runs a program the gate did not judge (a hidden substitution, xargs,
//!   a pager or a driver);
//! - passes a program other words than the gate judged (a continuation, a
//!   brace sequence, quoting), where the gate's word is not a pattern;
//! - opens a file for writing, creates, renames, removes or links one, or
//!   changes its mode (but a scratch file a program makes new in the temp
//!   folder and removes, as `sort` and `tac` do);
//! - opens a secret (by its resolved path, with the built-in path classes)
//!   for reading;
//! - opens a network socket.
//!
//! The workspace is a git repository with a `.env`, a fake `HOME` holding
//! credential files, a link to a folder outside the root, a nested
//! repository that tracks a `.env` of its own and a bare repository kept as
//! ordinary files. Git runs with
//! `GIT_OPTIONAL_LOCKS=0`, as `git status` does for any tool that only
//! reads (without it, git refreshes its index on a read). Skipped, with a
//! message, only where `strace` or `bash` is missing; `.ci/run` installs
//! both.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use portcullis::facts::{PathClasses, Root, Transport};
use portcullis::gate::judge;
use portcullis::pdp::{ClientRecord, Engine, Outcome, PolicyBundle};
use portcullis::tools::Registry;

/// Programs Debian ships as shell scripts that exec another program with
/// fixed words first (`/usr/bin/egrep` is `exec grep -E "$@"`): the gate
/// judges the script as what it is, and the exec it makes is that call.
const SCRIPT_EXECS: [(&str, &[&str]); 4] = [
    ("egrep", &["grep", "-E"]),
    ("fgrep", &["grep", "-F"]),
    ("gunzip", &["gzip", "-d"]),
    ("uncompress", &["gzip", "-d"]),
];
/// How long one command may run before it is stopped (`tail -f` never
/// ends): what it did until then is judged.
const RUN_FOR: Duration = Duration::from_secs(10);

/// Syscalls that run, write, remove, link, change or connect.
const TRACED: &str = "execve,execveat,open,openat,openat2,creat,unlink,unlinkat,rmdir,rename,renameat,renameat2,link,linkat,symlink,symlinkat,chmod,fchmod,fchmodat,mkdir,mkdirat,truncate,mknod,mknodat,socket,connect";

pub struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

fn run(command: &mut Command) {
    let status = command.status().unwrap();
    assert!(status.success(), "{command:?}");
}

pub fn workspace() -> Workspace {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let home = dir.path().join("home");
    let outside = dir.path().join("outside");
    for folder in [
        &root.join("src"),
        &root.join("sub"),
        &root.join("docs"),
        &home.join(".ssh"),
        &home.join(".aws"),
        &outside,
    ] {
        fs::create_dir_all(folder).unwrap();
    }
    for (file, text) in [
        ("README.md", "# readme\nTODO: more\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("names.txt", "b\na\nc\n"),
        ("in.txt", "hello\n"),
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("data.csv", "x,y\n1,2\n"),
        ("log.txt", "one\ntwo\n"),
        ("notes.txt", "notes\n"),
        ("list", "a.txt\n"),
        (".env", "TOKEN=secret\n"),
    ] {
        fs::write(root.join(file), text).unwrap();
    }
    fs::write(home.join(".ssh/id_rsa"), "-----BEGIN KEY-----\n").unwrap();
    fs::write(home.join(".aws/credentials"), "[default]\n").unwrap();
    fs::write(outside.join("plain.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("docs/outside")).unwrap();
    // Links to the secret, one named like an option: a command that reads
    // them reads `.env`, however it comes to the word.
    std::os::unix::fs::symlink("../.env", root.join("docs/envlink")).unwrap();
    std::os::unix::fs::symlink(".env", root.join("-env")).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        run(Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", &home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null()));
    };
    git(&root, &["init", "-q"]);
    git(
        &root,
        &[
            "-c",
            "user.email=o@x",
            "-c",
            "user.name=o",
            "add",
            "README.md",
            "src",
        ],
    );
    git(
        &root,
        &[
            "-c",
            "user.email=o@x",
            "-c",
            "user.name=o",
            "commit",
            "-qm",
            "first",
        ],
    );
    fs::create_dir_all(root.join("vendor/lib")).unwrap();
    git(&root.join("vendor/lib"), &["init", "-q"]);
    // A secret the nested repository tracks: its `git grep` and `git show`
    // print it with no name in the command.
    fs::write(root.join("vendor/lib/.env"), "VENDOR_TOKEN=fake\n").unwrap();
    git(&root.join("vendor/lib"), &["add", ".env"]);
    // A bare repository carried as ordinary files.
    git(&root, &["init", "-q", "--bare", "evil.git"]);
    let root = fs::canonicalize(root).unwrap();
    Workspace {
        _dir: dir,
        root,
        home,
    }
}

/// One syscall strace saw, joined across `unfinished`/`resumed`.
#[derive(Debug)]
struct Call {
    pid: String,
    name: String,
    args: String,
    result: String,
}

fn calls(log: &str) -> Vec<Call> {
    let mut pending: std::collections::HashMap<String, String> = Default::default();
    let mut out = Vec::new();
    for line in log.lines() {
        let (pid, rest) = line.split_once(' ').unwrap_or(("", line));
        let rest = rest.trim_start();
        let whole = if let Some(start) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid.to_owned(), start.to_owned());
            continue;
        } else if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = resumed.split_once(" resumed>") else {
                continue;
            };
            let start = pending.remove(pid).unwrap_or_default();
            format!("{start}{tail}")
        } else {
            rest.to_owned()
        };
        let Some(open) = whole.find('(') else {
            continue;
        };
        // strace pads a short call with spaces up to its result's column:
        // `unlink("/tmp/x")          = 0`.
        let Some(equals) = whole.rfind(" = ") else {
            continue;
        };
        let Some(close) = whole[..equals].trim_end().strip_suffix(')').map(str::len) else {
            continue;
        };
        if close < open {
            continue;
        }
        out.push(Call {
            pid: pid.to_owned(),
            name: whole[..open].to_owned(),
            args: whole[open + 1..close].to_owned(),
            result: whole[equals + 3..].to_owned(),
        });
    }
    out
}

/// The argv of an `execve` as strace prints it (`"path", ["a", "b"],
/// [env...]`): the C strings of the first list, decoded.
fn argv_of(args: &str) -> Vec<String> {
    let chars: Vec<char> = args.chars().collect();
    let mut out = Vec::new();
    let mut depth = 0;
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        index += 1;
        match c {
            '[' => depth += 1,
            ']' if depth == 1 => break,
            ']' => depth -= 1,
            '"' => {
                let (text, next) = c_string(&chars, index);
                index = next;
                if depth == 1 {
                    out.push(text);
                }
            }
            _ => {}
        }
    }
    out
}

/// One C string as strace writes it, from just after its opening quote:
/// printable ASCII as it is, `\n`, `\t` and friends, every other byte in
/// octal (`\33`, `\323\243`). The text, and where it ends.
fn c_string(chars: &[char], mut index: usize) -> (String, usize) {
    let mut bytes: Vec<u8> = Vec::new();
    let push = |bytes: &mut Vec<u8>, c: char| {
        let mut buffer = [0; 4];
        bytes.extend(c.encode_utf8(&mut buffer).as_bytes());
    };
    while index < chars.len() {
        let c = chars[index];
        index += 1;
        match c {
            '"' => break,
            '\\' => {
                let Some(&next) = chars.get(index) else { break };
                index += 1;
                match next {
                    'n' => bytes.push(b'\n'),
                    't' => bytes.push(b'\t'),
                    'r' => bytes.push(b'\r'),
                    'v' => bytes.push(0x0b),
                    'f' => bytes.push(0x0c),
                    '0'..='7' => {
                        let mut value = next.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            match chars.get(index).and_then(|c| c.to_digit(8)) {
                                Some(v) => {
                                    value = value * 8 + v;
                                    index += 1;
                                }
                                None => break,
                            }
                        }
                        bytes.push(u8::try_from(value).unwrap_or(b'?'));
                    }
                    other => push(&mut bytes, other),
                }
            }
            other => push(&mut bytes, other),
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), index)
}

/// The path strace gave the descriptor a call returned (`= 3</x/y>`).
fn returned_path(result: &str) -> Option<&str> {
    let start = result.find('<')?;
    let end = result.rfind('>')?;
    (result.starts_with(|c: char| c.is_ascii_digit()) && end > start)
        .then(|| &result[start + 1..end])
}

fn succeeded(call: &Call) -> bool {
    !call.result.starts_with('-') && !call.result.starts_with('?')
}

/// What bash did that the gate's answer does not allow, in words.
pub fn disagreements(
    command: &str,
    judged: &portcullis::facts::CommandFacts,
    log: &str,
    secrets: &PathClasses,
) -> Vec<String> {
    let mut found = Vec::new();
    // Scratch files programs made (see `scratch_file`), until removed.
    let mut scratch = BTreeSet::new();
    // Every program the gate says the command runs: the ones it judged,
    // and those it saw through (`env`, `xargs`, `bash -c`).
    let mut programs: BTreeSet<String> = judged
        .programs
        .iter()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
        .collect();
    // Every argv the gate judged, with the exec each shell-script program
    // makes: `egrep x f` runs `grep -E x f`, which is what was judged.
    let mut argvs: Vec<Vec<String>> = Vec::new();
    for part in &judged.parts {
        let mut argv = part.argv.clone();
        argv[0] = argv[0].rsplit('/').next().unwrap_or(&argv[0]).to_owned();
        if let Some((_, target)) = SCRIPT_EXECS.iter().find(|(script, _)| *script == argv[0]) {
            let mut implied: Vec<String> = target.iter().map(|w| (*w).to_owned()).collect();
            implied.extend(argv[1..].iter().cloned());
            programs.insert(implied[0].clone());
            argvs.push(implied);
        }
        argvs.push(argv);
    }
    let mut first_exec = true;
    // What each process runs now, by pid.
    let mut running: std::collections::HashMap<String, String> = Default::default();
    for call in calls(log) {
        match call.name.as_str() {
            "execve" | "execveat" if succeeded(&call) => {
                if first_exec {
                    // bash itself, as strace started it.
                    first_exec = false;
                    continue;
                }
                let argv = argv_of(&call.args);
                let Some(program) = argv.first() else {
                    continue;
                };
                let name = program.rsplit('/').next().unwrap_or(program).to_owned();
                running.insert(call.pid.clone(), name.clone());
                if !programs.contains(&name) {
                    found.push(format!(
                        "ran `{}`, which the gate did not judge",
                        argv.join(" ")
                    ));
                    continue;
                }
                // A program the gate saw through (`env`, `nohup`, `bash -c`,
                // `xargs`) passes on words the gate judged in the program
                // it runs, whose own exec is held to them here.
                let judged_here = argvs.iter().any(|gate| gate[0] == name);
                if !judged_here {
                    continue;
                }
                let explained = argvs.iter().any(|gate| {
                    let gate = gate.clone();
                    let mut ran = argv.clone();
                    ran[0] = name.clone();
                    let pattern = |w: &str| w.contains(['*', '?', '[', '{', '~', '$']);
                    if gate.iter().any(|w| pattern(w)) {
                        // A pattern becomes other words: the program, and
                        // every word the gate wrote as it is, must be there.
                        gate[0] == ran[0]
                            && gate.iter().filter(|w| !pattern(w)).all(|w| ran.contains(w))
                    } else {
                        gate == ran
                    }
                });
                if !explained {
                    found.push(format!(
                        "ran {argv:?}, which is none of the gate's argv {:?}",
                        argvs
                    ));
                }
            }
            "open" | "openat" | "openat2" | "creat" if succeeded(&call) => {
                let path = returned_path(&call.result).unwrap_or("").to_owned();
                let writes = call.name == "creat"
                    || ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"]
                        .iter()
                        .any(|flag| call.args.contains(flag));
                let device = path.starts_with("/dev/")
                    || path.starts_with("pipe:")
                    || path.starts_with("socket:")
                    || path.starts_with("/proc/");
                if writes && scratch_file(&path, &call.args) {
                    scratch.insert(path);
                } else if writes && !device && !scratch.contains(&path) {
                    found.push(format!("opened {path} for writing"));
                } else if !writes {
                    let mut classes = BTreeSet::new();
                    secrets.classify_into(Path::new(&path), &mut classes);
                    // `ps` opens every process's environ to read its
                    // size and prints it only with `e`, which the gate
                    // calls a secret: not a disclosure.
                    let ps_probe = running
                        .get(&call.pid)
                        .map_or(programs.contains("ps"), |p| p == "ps")
                        && path.starts_with("/proc/")
                        && path.ends_with("/environ");
                    if classes.contains("secrets")
                        && !judged.classes.contains("secrets")
                        && !ps_probe
                    {
                        found.push(format!("read the secret {path}"));
                    }
                }
            }
            "unlink" | "unlinkat" | "rmdir" | "rename" | "renameat" | "renameat2" | "link"
            | "linkat" | "symlink" | "symlinkat" | "chmod" | "fchmod" | "fchmodat" | "mkdir"
            | "mkdirat" | "truncate" | "mknod" | "mknodat"
                if succeeded(&call) =>
            {
                let removed = scratch
                    .iter()
                    .find(|path| call.args.contains(&format!("\"{path}\"")))
                    .cloned();
                match removed {
                    Some(path) if call.name.starts_with("unlink") => {
                        scratch.remove(&path);
                    }
                    _ => found.push(format!("{}({})", call.name, call.args)),
                }
            }
            "socket" if succeeded(&call) && !call.args.starts_with("AF_UNIX") => {
                found.push(format!("opened a socket: socket({})", call.args));
            }
            _ => {}
        }
    }
    found.extend(
        scratch
            .iter()
            .map(|path| format!("left {path} in the temp folder")),
    );
    found
        .into_iter()
        .map(|why| format!("{command:?}: {why}"))
        .collect()
}

/// Whether an open makes a private scratch file: a new one (`O_EXCL`, so
/// never a file that was there) directly in the temp folder, as `sort`
/// keeps while merging a file into its own output or past its buffer, and
/// `tac` to copy a pipe. Not an effect as long as the program removes it
/// (held at the end of the trace): under `exec` the temp folder is the
/// command's own, and without it nothing that was there is touched.
fn scratch_file(path: &str, flags: &str) -> bool {
    path.strip_prefix("/tmp/")
        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
        && flags.contains("O_CREAT")
        && flags.contains("O_EXCL")
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `command` with bash under strace in `ws`; the trace.
pub fn traced(ws: &Workspace, command: &str, log: &Path) -> String {
    let _ = fs::remove_file(log);
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-y", "-v", "-s", "4096", "-e"])
        .arg(format!("trace={TRACED}"))
        .arg("-o")
        .arg(log)
        .args(["bash", "-c", command])
        .current_dir(&ws.root)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &ws.home)
        .env("LANG", "C")
        .env("TERM", "dumb")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > RUN_FOR {
            kill_group(&child);
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // What the command left running goes too (`tail -f` past the time, a
    // job put in the background): killing strace alone detached them, and
    // they ran on after the test, `watch -n 0` taking a core.
    kill_group(&child);
    fs::read_to_string(log).unwrap_or_default()
}

/// Kills every process of the group `child` leads, and waits (up to
/// `RUN_FOR`) until none of them is alive: a process killed is not gone at
/// once, least of all on a busy machine.
fn kill_group(child: &std::process::Child) {
    let Some(group) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let started = Instant::now();
    while group_alive(group.as_raw_nonzero().get()) && started.elapsed() < RUN_FOR {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a process of the group `group` is alive (not a zombie), by its
/// `/proc/PID/stat`: `PID (NAME) STATE PPID PGRP ...`.
fn group_alive(group: i32) -> bool {
    let group = group.to_string();
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some((_, fields)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = fields.split_whitespace().take(3).collect();
        matches!(fields[..], [state, _, pgrp] if pgrp == group && state != "Z" && state != "X")
    })
}

/// What both tests run the oracle with: the workspace, the default set,
/// the built-in secret classes and the trace file.
pub struct Oracle {
    pub ws: Workspace,
    pub engine: Engine,
    pub root: Root,
    pub secrets: PathClasses,
    pub log: PathBuf,
}

impl Oracle {
    /// `None`, saying so, where `strace` or `bash` is missing.
    pub fn new() -> Option<Self> {
        if !have("strace") || !have("bash") {
            eprintln!("skipped: the gate's oracle needs strace and bash (.ci/run installs them)");
            return None;
        }
        let ws = workspace();
        let engine = Engine::load(
            &PolicyBundle::builtin(),
            &Registry::builtin().unwrap(),
            &[ClientRecord {
                name: "agent".into(),
                tier: "paired".into(),
            }],
        )
        .unwrap();
        // The gate's `~` is the home its bash runs with.
        let root = Root::new(&ws.root)
            .unwrap()
            .with_home(Some(ws.home.clone()));
        let secrets =
            PathClasses::parse("path_classes.toml", portcullis::facts::BUILTIN_PATH_CLASSES)
                .unwrap();
        let log = ws.root.parent().unwrap().join("trace.log");
        Some(Self {
            ws,
            engine,
            root,
            secrets,
            log,
        })
    }
}

impl Oracle {
    /// What bash did with `command` that the gate's answer does not
    /// allow; `None` where the gate does not allow it (only an allow
    /// promises what bash will do).
    pub fn check(&self, command: &str) -> Option<Vec<String>> {
        let answer = judge(
            &self.engine,
            "agent",
            &self.root,
            None,
            command,
            Transport::Cli,
        )
        .ok()?;
        if answer.decision.outcome != Outcome::Allow {
            return None;
        }
        let trace = traced(&self.ws, command, &self.log);
        Some(disagreements(command, &answer.facts, &trace, &self.secrets))
    }
}
