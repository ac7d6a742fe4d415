//! The built-in tools against a filesystem that changes under them: a racer
//! exchanging folders and files with symlinks to outside the root or to a
//! secret (`renameat2(RENAME_EXCHANGE)`), FIFOs and sparse files swapped in,
//! hardlinks. Every call is allowed by policy (writes need no approval
//! here), so only the tools' handling of the filesystem stands between the
//! racer and the outside: no call may read, write, list or delete anything
//! outside the root or under a secret's name.

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use rustix::fs::{CWD, RenameFlags, renameat, renameat_with};
use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served, Session};

/// Calls per tool under the racer.
const CALLS: usize = 60;
const OUTSIDE_MARKER: &str = "OUTSIDE-MARKER";
const SECRET_MARKER: &str = "SECRET-MARKER";

/// Allows every built-in tool without approval, deletes included.
fn served() -> Served {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    served.tree.write_policy(
        "40_approvals.cedar",
        "// No approvals: the race tests need every call allowed.\n",
    );
    served.tree.write_policy(
        "tiers.json",
        r#"[{"uid": {"type": "Portcullis::Tier", "id": "paired"},
             "attrs": {"capabilities": ["read", "write", "network", "destructive"]},
             "parents": []}]"#,
    );
    served
}

/// Exchanges two names until stopped; where the kernel cannot exchange,
/// swaps them with three renames (a wider window, with a moment where one
/// name is missing).
pub(crate) struct Racer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Racer {
    pub(crate) fn start(a: PathBuf, b: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let spare = a.with_extension("spare");
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).is_err() {
                        let _ = renameat(CWD, &a, CWD, &spare);
                        let _ = renameat(CWD, &b, CWD, &a);
                        let _ = renameat(CWD, &spare, CWD, &b);
                    }
                    swaps += 1;
                    // Two cores: leave the server room to run between swaps.
                    std::thread::yield_now();
                }
                swaps
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

struct Client {
    session: Session,
    next_id: u64,
}

impl Client {
    fn start(served: &Served) -> Self {
        let mut session = Session::start(served);
        session.initialize();
        Self {
            session,
            next_id: 1,
        }
    }

    /// Calls a tool; the whole response frame, as text, and whether the
    /// tool answered without an error.
    fn call(&mut self, name: &str, arguments: Value) -> (String, bool) {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}});
        self.session.send(&frame.to_string());
        let response = self.session.next();
        assert_eq!(response["id"], id, "{response}");
        let ok = response["result"]["isError"] == json!(false);
        (response.to_string(), ok)
    }
}

/// What a folder holds, by name: content, device and inode, link count.
fn snapshot(folder: &Path) -> Vec<(String, String, u64, u64, u64)> {
    let mut entries: Vec<_> = fs::read_dir(folder)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = fs::symlink_metadata(entry.path()).unwrap();
            let content = fs::read_to_string(entry.path()).unwrap_or_default();
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, content, meta.dev(), meta.ino(), meta.nlink())
        })
        .collect();
    entries.sort();
    entries
}

/// Root `ws/` with `d/` (exchanged with `l`, a symlink to the outside
/// folder), `s/` (exchanged with `k`, a symlink to `.ssh`), and `e/g.txt`
/// (exchanged with `e/h`, a symlink to the outside file). Every target holds
/// the word `inside`, so an edit through a swapped link would succeed.
struct Arena {
    served: Served,
    outside: tempfile::TempDir,
}

impl Arena {
    fn new() -> Self {
        let served = served();
        let outside = tempfile::tempdir().unwrap();
        let ws = served.root.path();
        fs::write(
            outside.path().join("f.txt"),
            format!("inside\n{OUTSIDE_MARKER}\n"),
        )
        .unwrap();
        fs::write(
            outside.path().join("outside-only.txt"),
            format!("{OUTSIDE_MARKER}\n"),
        )
        .unwrap();
        fs::create_dir(ws.join("d")).unwrap();
        fs::create_dir(ws.join(".ssh")).unwrap();
        fs::create_dir(ws.join("s")).unwrap();
        fs::create_dir(ws.join("e")).unwrap();
        for i in 0..CALLS {
            fs::write(ws.join(format!("d/v{i}.txt")), "inside\n").unwrap();
            fs::write(outside.path().join(format!("v{i}.txt")), OUTSIDE_MARKER).unwrap();
            fs::write(ws.join(format!(".ssh/v{i}.txt")), SECRET_MARKER).unwrap();
            fs::write(ws.join(format!("s/v{i}.txt")), "inside\n").unwrap();
        }
        fs::write(ws.join("d/f.txt"), "inside\n").unwrap();
        fs::write(ws.join("s/f.txt"), "inside\n").unwrap();
        fs::write(ws.join(".ssh/f.txt"), format!("inside\n{SECRET_MARKER}\n")).unwrap();
        fs::write(ws.join(".ssh/id_secret_name"), SECRET_MARKER).unwrap();
        fs::write(ws.join("e/g.txt"), "inside\n").unwrap();
        symlink(outside.path(), ws.join("l")).unwrap();
        symlink(".ssh", ws.join("k")).unwrap();
        symlink(outside.path().join("f.txt"), ws.join("e/h")).unwrap();
        Self { served, outside }
    }

    fn ws(&self) -> &Path {
        self.served.root.path()
    }

    fn racers(&self) -> Vec<Racer> {
        let ws = self.ws();
        vec![
            Racer::start(ws.join("d"), ws.join("l")),
            Racer::start(ws.join("s"), ws.join("k")),
            Racer::start(ws.join("e/g.txt"), ws.join("e/h")),
        ]
    }

    fn secrets(&self) -> PathBuf {
        self.ws().join(".ssh")
    }
}

fn assert_clean(frame: &str, what: &str) {
    assert!(
        !frame.contains(OUTSIDE_MARKER) && !frame.contains(SECRET_MARKER),
        "{what} reached outside the root or a secret: {frame}"
    );
    assert!(
        !frame.contains("outside-only") && !frame.contains("id_secret_name"),
        "{what} listed outside the root or a secret: {frame}"
    );
}

#[test]
fn no_call_under_a_racer_reaches_outside_the_root_or_a_secret() {
    let arena = Arena::new();
    let outside_before = snapshot(arena.outside.path());
    let secrets_before = snapshot(&arena.secrets());
    let mut client = Client::start(&arena.served);
    let racers = arena.racers();
    let mut succeeded = 0usize;
    for i in 0..CALLS {
        let calls = [
            ("read_file", json!({"path": "d/f.txt"})),
            ("read_file", json!({"path": "s/f.txt"})),
            ("read_file", json!({"path": "e/g.txt"})),
            (
                "write_file",
                json!({"path": format!("d/w{i}.txt"), "content": "w"}),
            ),
            (
                "write_file",
                json!({"path": "e/g.txt", "content": "inside\n"}),
            ),
            (
                "write_file",
                json!({"path": format!("s/n/w{i}.txt"), "content": "w"}),
            ),
            (
                "edit_file",
                json!({"path": "d/f.txt", "old_string": "inside", "new_string": "inside"}),
            ),
            (
                "edit_file",
                json!({"path": "s/f.txt", "old_string": "inside", "new_string": "inside"}),
            ),
            ("delete_file", json!({"path": format!("d/v{i}.txt")})),
            ("delete_file", json!({"path": format!("s/v{i}.txt")})),
            ("search", json!({"pattern": "MARKER|inside"})),
            ("search", json!({"pattern": "MARKER", "path": "d"})),
            ("list_dir", json!({"path": "d"})),
            ("list_dir", json!({"path": "s"})),
        ];
        for (tool, arguments) in calls {
            let what = format!("{tool} {arguments}");
            let (frame, ok) = client.call(tool, arguments);
            assert_clean(&frame, &what);
            succeeded += usize::from(ok);
        }
    }
    let swaps: u64 = racers.into_iter().map(Racer::stop).sum();
    client.session.finish();
    assert!(swaps > 0, "the racers never ran");
    // Some calls must have run for the test to mean anything.
    assert!(succeeded > CALLS, "only {succeeded} calls succeeded");
    assert_eq!(
        snapshot(arena.outside.path()),
        outside_before,
        "something outside the root changed"
    );
    assert_eq!(
        snapshot(&arena.secrets()),
        secrets_before,
        "a secret changed"
    );
}

#[test]
fn a_fifo_swapped_in_ends_each_call_with_a_fixed_error() {
    let arena = Arena::new();
    let ws = arena.ws().to_owned();
    rustix::fs::mknodat(
        CWD,
        ws.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    fs::write(ws.join("p.txt"), "inside\n").unwrap();
    let mut client = Client::start(&arena.served);
    let (frame, ok) = client.call("read_file", json!({"path": "pipe"}));
    assert!(
        !ok && frame.contains("the path is not a regular file"),
        "{frame}"
    );
    let racer = Racer::start(ws.join("p.txt"), ws.join("pipe"));
    for _ in 0..CALLS {
        for (tool, arguments) in [
            ("read_file", json!({"path": "p.txt"})),
            (
                "edit_file",
                json!({"path": "p.txt", "old_string": "inside", "new_string": "inside"}),
            ),
            ("search", json!({"pattern": "inside"})),
        ] {
            let (frame, ok) = client.call(tool, arguments);
            assert!(
                ok || frame.contains("not a regular file") || frame.contains("changed after"),
                "{frame}"
            );
        }
    }
    racer.stop();
    // The server still answers, and exits when its client goes.
    let (_, ok) = client.call("list_dir", json!({}));
    assert!(ok);
    client.session.finish();
}

/// Peak resident memory of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_sparse_file_swapped_in_is_never_read_whole() {
    let arena = Arena::new();
    let ws = arena.ws().to_owned();
    let big = fs::File::create(ws.join("big.txt")).unwrap();
    big.set_len(2 << 30).unwrap();
    drop(big);
    fs::write(ws.join("small.txt"), "inside\n").unwrap();
    let mut client = Client::start(&arena.served);
    let (frame, ok) = client.call("read_file", json!({"path": "big.txt"}));
    assert!(!ok && frame.contains("larger than"), "{frame}");
    let racer = Racer::start(ws.join("small.txt"), ws.join("big.txt"));
    for _ in 0..CALLS {
        for (tool, arguments) in [
            ("read_file", json!({"path": "small.txt"})),
            (
                "edit_file",
                json!({"path": "small.txt", "old_string": "inside", "new_string": "inside"}),
            ),
            ("search", json!({"pattern": "inside"})),
        ] {
            let (frame, ok) = client.call(tool, arguments);
            assert!(
                ok || frame.contains("larger than") || frame.contains("changed after"),
                "{frame}"
            );
        }
    }
    racer.stop();
    let peak = peak_rss_kib(client.session.child.id());
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
    client.session.finish();
}

#[test]
fn a_hardlink_is_read_as_if_it_were_outside_the_root() {
    let arena = Arena::new();
    let ws = arena.ws().to_owned();
    fs::hard_link(arena.outside.path().join("f.txt"), ws.join("x.txt")).unwrap();
    fs::hard_link(ws.join(".ssh/f.txt"), ws.join("y.txt")).unwrap();
    let mut client = Client::start(&arena.served);
    for path in ["x.txt", "y.txt"] {
        let (frame, ok) = client.call("read_file", json!({"path": path}));
        assert!(!ok, "{frame}");
        assert_clean(&frame, path);
    }
    let (frame, ok) = client.call("search", json!({"pattern": "MARKER"}));
    assert!(ok, "{frame}");
    assert_clean(&frame, "search");
    client.session.finish();
}
