//! Parse, unwrap and classify any text as the command gate does, under
//! the default policies. Three properties: nothing panics; a command
//! whose syntax tree holds a node kind the gate does not know (or an
//! error node) is never allowed; and a command the gate allows does, run
//! by the real `bash -c` under `strace -f`, only what the gate judged
//! (the oracle of `tests/oracle`, where `strace` and `bash` are present).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use portcullis::facts::{KNOWN_NODE_KINDS, Root, Transport, join_continuations};
use portcullis::gate::judge;
use portcullis::pdp::{ClientRecord, Engine, Outcome, PolicyBundle};
use portcullis::tools::Registry;
use tree_sitter::{Node, Parser};

#[path = "../../tests/oracle/mod.rs"]
mod oracle;

struct Setup {
    engine: Engine,
    root: Root,
    _dir: tempfile::TempDir,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let clients = [ClientRecord {
            name: "agent".into(),
            tier: "paired".into(),
        }];
        let engine = Engine::load(
            &PolicyBundle::builtin(),
            &Registry::builtin().expect("the built-in registry loads"),
            &clients,
        )
        .expect("the default policies load");
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::create_dir_all(dir.path().join("ws/sub")).expect("a workspace");
        let root = Root::new(&dir.path().join("ws")).expect("a root");
        Setup {
            engine,
            root,
            _dir: dir,
        }
    })
}

/// The oracle, made once per fuzzing process; `None` (said once) where
/// `strace` or `bash` is missing.
fn the_oracle() -> Option<&'static oracle::Oracle> {
    static ORACLE: OnceLock<Option<oracle::Oracle>> = OnceLock::new();
    ORACLE.get_or_init(oracle::Oracle::new).as_ref()
}

fn unknown_kind(node: Node<'_>) -> Option<String> {
    if node.is_error() || node.is_missing() {
        return Some(node.kind().to_owned());
    }
    if node.is_named() && !KNOWN_NODE_KINDS.contains(&node.kind()) {
        return Some(node.kind().to_owned());
    }
    let mut cursor = node.walk();
    let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
    children.into_iter().find_map(unknown_kind)
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let setup = setup();
    let Ok(answer) = judge(
        &setup.engine,
        "agent",
        &setup.root,
        None,
        source,
        Transport::Cli,
    ) else {
        return;
    };
    if answer.decision.outcome != Outcome::Allow {
        return;
    }
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .expect("the bash grammar loads");
    // The gate reads the command with its line continuations joined, as
    // bash does (a command it cannot join is opaque, never allowed).
    let joined = join_continuations(source).expect("an allowed command is joined");
    let tree = parser.parse(joined.as_ref(), None).expect("a tree");
    if let Some(kind) = unknown_kind(tree.root_node()) {
        panic!("allowed, yet the tree holds `{kind}`: {source:?}");
    }
    assert!(!answer.facts.opaque, "allowed while opaque: {source:?}");
    if let Some(found) = the_oracle().and_then(|oracle| oracle.check(source))
        && !found.is_empty()
    {
        panic!("allowed, yet bash did otherwise:\n{}", found.join("\n"));
    }
});
