//! The strictest part decides: for random compositions of fragments
//! (prefix assignments, wrappers, redirects, joined by `;`, `&&`, `||` and
//! `|`), the gate's decision of the whole is never weaker than the decision
//! of any part judged alone.

use std::fs;
use std::sync::OnceLock;

use portcullis::facts::{Root, Transport};
use portcullis::gate::judge;
use portcullis::pdp::{ClientRecord, Engine, Outcome, PolicyBundle};
use portcullis::tools::Registry;
use proptest::prelude::*;

const PROGRAMS: &[&str] = &[
    "ls -la",
    "cat README.md",
    "git status",
    "git log --oneline",
    "sort names.txt",
    "sed -n 1,5p f",
    "echo hi",
    "rm -rf build",
    "git push",
    "cargo build",
    "curl https://example.com",
    "cat .env",
    "sort -o out.txt names.txt",
    "sed 'e id' f",
    "awk '{print $1}' f",
    "awk '{system(\"id\")}' f",
    "sudo ls",
    "git -c core.pager=id log",
    "find . -fprint out.txt",
    "jq -n env",
    "unknowncommand",
    "grep -rn TODO src",
];
const PREFIXES: &[&str] = &[
    "",
    "",
    "LANG=C ",
    "FOO=1 ",
    "LD_PRELOAD=/tmp/x.so ",
    "PATH=/tmp ",
];
const WRAPPERS: &[&str] = &[
    "",
    "",
    "timeout 5 ",
    "nice ",
    "env ",
    "command ",
    "nohup ",
    "bash -c ",
];
const REDIRECTS: &[&str] = &[
    "",
    "",
    " 2>/dev/null",
    " > out.txt",
    " > .git/config",
    " >> ../x",
    " < in.txt",
];
const JOINERS: &[&str] = &["; ", " && ", " || ", " | "];

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// One fragment, decorated.
fn fragment(program: usize, prefix: usize, wrapper: usize, redirect: usize) -> String {
    let program = PROGRAMS[program];
    let body = match WRAPPERS[wrapper] {
        "bash -c " => format!("bash -c {}", quote(program)),
        wrapper => format!("{wrapper}{program}"),
    };
    format!("{}{body}{}", PREFIXES[prefix], REDIRECTS[redirect])
}

fn fragments() -> impl Strategy<Value = Vec<(String, usize)>> {
    prop::collection::vec(
        (
            0..PROGRAMS.len(),
            0..PREFIXES.len(),
            0..WRAPPERS.len(),
            0..REDIRECTS.len(),
            0..JOINERS.len(),
        )
            .prop_map(|(p, x, w, r, j)| (fragment(p, x, w, r), j)),
        1..5,
    )
}

struct Gate {
    engine: Engine,
    root: Root,
    _dir: tempfile::TempDir,
}

impl Gate {
    fn shared() -> &'static Self {
        static GATE: OnceLock<Gate> = OnceLock::new();
        GATE.get_or_init(Self::new)
    }

    fn new() -> Self {
        let clients = [ClientRecord {
            name: "agent".into(),
            tier: "paired".into(),
        }];
        let engine = Engine::load(
            &PolicyBundle::builtin(),
            &Registry::builtin().unwrap(),
            &clients,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("ws/.git")).unwrap();
        let root = Root::new(&dir.path().join("ws")).unwrap();
        Self {
            engine,
            root,
            _dir: dir,
        }
    }

    fn decide(&self, command: &str) -> Outcome {
        judge(
            &self.engine,
            "agent",
            &self.root,
            None,
            command,
            Transport::Cli,
        )
        .unwrap()
        .decision
        .outcome
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_whole_is_never_weaker_than_its_strictest_part(parts in fragments()) {
        let gate = Gate::shared();
        let mut line = String::new();
        for (i, (part, joiner)) in parts.iter().enumerate() {
            if i > 0 {
                line.push_str(JOINERS[*joiner]);
            }
            line.push_str(part);
        }
        let whole = gate.decide(&line);
        for (part, _) in &parts {
            let alone = gate.decide(part);
            prop_assert!(
                whole >= alone,
                "{line:?} is {whole:?}, but its part {part:?} alone is {alone:?}"
            );
        }
    }
}
