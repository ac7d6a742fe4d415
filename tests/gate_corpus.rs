//! The command gate against its corpus (`tests/gate/corpus.txt`): every
//! command with the decision the default policies must give. Nothing that
//! should be denied or asked may be allowed.

use std::fs;

use portcullis::facts::{Root, Transport};
use portcullis::gate::judge;
use portcullis::pdp::{Engine, Outcome, PolicyBundle};
use portcullis::tools::Registry;

use crate::util::GateBench;

fn corpus() -> Vec<(Outcome, String)> {
    let text = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/gate/corpus.txt"
    ))
    .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (expected, command) = line.split_once('\t').unwrap();
            let expected = match expected {
                "allow" => Outcome::Allow,
                "ask" => Outcome::Ask,
                "deny" => Outcome::Deny,
                other => panic!("bad expectation {other}"),
            };
            (expected, command.replace("\\n", "\n"))
        })
        .collect()
}

#[test]
fn every_command_of_the_corpus_gets_its_decision() {
    let GateBench { engine, root, .. } = &GateBench::new(&["sub"]);
    let corpus = corpus();
    assert!(corpus.len() >= 300, "{} commands", corpus.len());
    let mut wrong = Vec::new();
    let mut loosened = 0;
    for (expected, command) in &corpus {
        let answer = judge(engine, "agent", root, None, command, Transport::Cli).unwrap();
        let got = answer.decision.outcome;
        if got != *expected {
            if got < *expected {
                loosened += 1;
            }
            let classes: Vec<&str> = answer.facts.classes.iter().map(String::as_str).collect();
            wrong.push(format!(
                "{expected:?} expected, {got:?} given: {command:?} [{}]",
                classes.join(", ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong ({loosened} looser than expected):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn empty_long_and_nul_commands_are_refused_as_input() {
    let engine =
        Engine::load(&PolicyBundle::builtin(), &Registry::builtin().unwrap(), &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path()).unwrap();
    for bad in [
        "",
        "   \n\t",
        "ls\0rm",
        &"a".repeat(portcullis::facts::MAX_COMMAND_BYTES + 1),
    ] {
        assert!(
            judge(&engine, "nobody", &root, None, bad, Transport::Cli).is_err(),
            "{bad:?}"
        );
    }
}
