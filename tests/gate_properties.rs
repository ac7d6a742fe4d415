//! The strictest part decides: for random compositions of fragments
//! (prefix assignments, wrappers, redirects, joined by `;`, `&&`, `||` and
//! `|`), the gate's decision of the whole is never weaker than the decision
//! of any part judged alone.

use std::sync::OnceLock;

use portcullis::facts::Transport;
use portcullis::gate::judge;
use portcullis::pdp::Outcome;
use proptest::prelude::*;

use crate::util::GateBench;

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

fn gate() -> &'static GateBench {
    static GATE: OnceLock<GateBench> = OnceLock::new();
    GATE.get_or_init(|| GateBench::new(&[".git"]))
}

fn decide(command: &str) -> Outcome {
    let gate = gate();
    judge(
        &gate.engine,
        "agent",
        &gate.root,
        None,
        command,
        Transport::Cli,
    )
    .unwrap()
    .decision
    .outcome
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_whole_is_never_weaker_than_its_strictest_part(parts in fragments()) {
        let mut line = String::new();
        for (i, (part, joiner)) in parts.iter().enumerate() {
            if i > 0 {
                line.push_str(JOINERS[*joiner]);
            }
            line.push_str(part);
        }
        let whole = decide(&line);
        for (part, _) in &parts {
            let alone = decide(part);
            prop_assert!(
                whole >= alone,
                "{line:?} is {whole:?}, but its part {part:?} alone is {alone:?}"
            );
        }
    }
}
