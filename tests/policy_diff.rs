//! `portcullis policy diff OLD NEW`: exit 0 when NEW permits nothing OLD
//! does not, 4 with a counterexample `check` confirms when it does, 2 when
//! the sets cannot be compared.

use std::fs;
use std::process::Command;

use serde_json::Value;

use crate::util::{Run, Tree, portcullis, solver_or_skip};

/// `policy diff OLD NEW` as a person reads it.
fn diff_table(old: &Tree, new: &Tree) -> Run {
    portcullis(&[
        "policy",
        "diff",
        old.dir.path().to_str().unwrap(),
        new.dir.path().to_str().unwrap(),
    ])
}

fn diff(old: &Tree, new: &Tree) -> Run {
    portcullis(&[
        "--format",
        "json",
        "policy",
        "diff",
        old.dir.path().to_str().unwrap(),
        new.dir.path().to_str().unwrap(),
    ])
}

fn append(tree: &Tree, file: &str, text: &str) {
    let path = tree.policies().join(file);
    let mut current = fs::read_to_string(&path).unwrap();
    current.push_str(text);
    fs::write(path, current).unwrap();
}

/// The default tree with `extra` appended to its allowlist.
fn tree_with(extra: &[&str]) -> Tree {
    let tree = Tree::new();
    for text in extra {
        append(&tree, "20_allowlist.cedar", text);
    }
    tree
}

fn wider(json: &Value) -> Vec<(String, String)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["wider"] == true)
        .map(|f| {
            (
                f["action"].as_str().unwrap().to_owned(),
                f["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Runs a counterexample's `check` command line; its exit code.
fn run_check(argv: &Value) -> i32 {
    let words: Vec<&str> = argv
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(words[0], "portcullis");
    let root = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(&words[1..])
        .current_dir(root.path())
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .output()
        .unwrap();
    output.status.code().unwrap()
}

const ALLOW_READ: &str = r#"
@id("allow.read_file")
@reason("reading is part of the job")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource == Portcullis::Tool::"builtin/read_file"
);
"#;

const ALLOW_WRITE: &str = r#"
@id("allow.write_file")
@reason("writing, with a human's approval")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource == Portcullis::Tool::"builtin/write_file"
);
"#;

#[test]
fn the_same_set_is_no_wider() {
    if !solver_or_skip() {
        return;
    }
    let (old, new) = (Tree::new(), Tree::new());
    let run = diff(&old, &new);
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["wider"], false);
    assert!(wider(&json).is_empty());
    let actions: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["action"].as_str().unwrap())
        .collect();
    for action in [
        "Portcullis::Action::\"builtin/write_file\"",
        "Portcullis::Action::\"call_tool\"",
        "Portcullis::Action::\"discover_tool\"",
        "Portcullis::Action::\"run_command\"",
    ] {
        assert_eq!(
            actions.iter().filter(|a| **a == action).count(),
            2,
            "{action}: one row per pass"
        );
    }
    assert!(!json["bounds"].as_array().unwrap().is_empty());
}

#[test]
fn a_widening_has_a_counterexample_check_confirms_on_both_sides() {
    if !solver_or_skip() {
        return;
    }
    let (old, new) = (Tree::new(), Tree::new());
    append(&new, "20_allowlist.cedar", ALLOW_READ);
    let run = diff(&old, &new);
    assert_eq!(run.code, 4, "{run:?}");
    let json = run.json();
    assert_eq!(json["wider"], true);
    let mut found = wider(&json);
    found.sort();
    assert_eq!(
        found,
        [
            (
                "Portcullis::Action::\"builtin/read_file\"".into(),
                "allow".into()
            ),
            (
                "Portcullis::Action::\"builtin/read_file\"".into(),
                "ask".into()
            ),
            (
                "Portcullis::Action::\"discover_tool\"".into(),
                "allow".into()
            ),
            ("Portcullis::Action::\"discover_tool\"".into(), "ask".into()),
        ]
        .map(|(a, o): (String, String)| (a, o))
    );
    for finding in json["findings"].as_array().unwrap() {
        if finding["wider"] != true {
            continue;
        }
        let example = &finding["counterexample"];
        assert_eq!(example["tool"], "builtin/read_file", "{example}");
        assert_eq!(example["old"], "deny", "{example}");
        assert_eq!(example["new"], "allow", "{example}");
        assert_eq!(example["checkable"], true, "{example}");
        // Allowed by NEW (exit 0), denied by OLD (exit 2).
        assert_eq!(run_check(&example["check"]), 0, "{example}");
        assert_eq!(run_check(&example["check_old"]), 2, "{example}");
    }

    // The table names the action and prints a command to reproduce it.
    let human = diff_table(&old, &new);
    assert_eq!(human.code, 4, "{human:?}");
    assert!(
        human.stdout.contains(
            "WIDER (allow) Portcullis::Action::\"builtin/read_file\": OLD deny, NEW allow"
        ),
        "{human:?}"
    );
    assert!(
        human.stdout.contains("reproduce: portcullis check"),
        "{human:?}"
    );
    assert!(human.stdout.contains("NEW is WIDER than OLD"), "{human:?}");
}

#[test]
fn a_widening_that_only_an_approval_opens_shows_as_ask() {
    if !solver_or_skip() {
        return;
    }
    let (old, new) = (Tree::new(), Tree::new());
    append(&new, "20_allowlist.cedar", ALLOW_WRITE);
    let run = diff(&old, &new);
    assert_eq!(run.code, 4, "{run:?}");
    let json = run.json();
    let write = "Portcullis::Action::\"builtin/write_file\"".to_owned();
    let found = wider(&json);
    assert!(found.contains(&(write.clone(), "ask".into())), "{found:?}");
    assert!(
        !found.contains(&(write.clone(), "allow".into())),
        "approval.writes still stands between a write and an allow: {found:?}"
    );
    let example = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["action"] == write.as_str() && f["outcome"] == "ask")
        .unwrap()["counterexample"]
        .clone();
    assert_eq!(example["new"], "ask", "{example}");
    assert_eq!(example["old"], "deny", "{example}");
    assert_eq!(run_check(&example["check"]), 4, "NEW asks: {example}");
    assert_eq!(run_check(&example["check_old"]), 2, "OLD denies: {example}");
}

#[test]
fn tightening_reordering_and_reformatting_are_no_wider() {
    if !solver_or_skip() {
        return;
    }
    let old = tree_with(&[ALLOW_READ, ALLOW_WRITE]);

    // Tighter: write_file no longer allowed; read_file only for owners.
    let tighter = Tree::new();
    append(
        &tighter,
        "20_allowlist.cedar",
        &ALLOW_READ.replace("principal,", "principal in Portcullis::Tier::\"owner\","),
    );
    let run = diff(&old, &tighter);
    assert_eq!(run.code, 0, "{run:?}");
    // The other way round, the same change is a widening.
    assert_eq!(diff(&tighter, &old).code, 4);

    // The same policies, in another order, another file and another layout.
    let moved = Tree::new();
    fs::write(
        moved.policies().join("25_moved.cedar"),
        format!(
            "{}\n\n\n{}",
            ALLOW_WRITE.replace('\n', " ").replace("  ", " "),
            ALLOW_READ
        ),
    )
    .unwrap();
    let approvals = moved.policies().join("40_approvals.cedar");
    let text = fs::read_to_string(&approvals).unwrap();
    fs::write(&approvals, text.replace("\n  ", "\n        ")).unwrap();
    let run = diff(&old, &moved);
    assert_eq!(run.code, 0, "{run:?}");
    let run = diff(&moved, &old);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn a_permit_the_hard_constraints_forbid_opens_nothing_and_dropping_an_approval_does() {
    if !solver_or_skip() {
        return;
    }
    let old = tree_with(&[ALLOW_WRITE]);
    // A team tries to open writes into .git and outside the root: the
    // built-in forbids still hold, so nothing is wider.
    let new = tree_with(&[ALLOW_WRITE]);
    append(
        &new,
        "20_allowlist.cedar",
        r#"
@id("allow.anything_into_git")
@reason("an attempt the hard constraints refuse")
permit (principal, action in Portcullis::Action::"call_tool", resource)
when { context.writes_vcs_metadata || !context.writes_inside_root };
"#,
    );
    let run = diff(&old, &new);
    assert_eq!(run.code, 0, "{run:?}");

    // Removing the approval policy turns asks into allows.
    let unapproved = tree_with(&[ALLOW_WRITE]);
    let approvals = unapproved.policies().join("40_approvals.cedar");
    let text = fs::read_to_string(&approvals).unwrap();
    let cut = text.find("@id(\"approval.writes\")").unwrap();
    let end = cut + text[cut..].find("};").unwrap() + 2;
    fs::write(&approvals, format!("{}{}", &text[..cut], &text[end..])).unwrap();
    let run = diff(&old, &unapproved);
    assert_eq!(run.code, 4, "{run:?}");
    let found = wider(&run.json());
    assert!(
        found.contains(&(
            "Portcullis::Action::\"builtin/write_file\"".into(),
            "allow".into()
        )),
        "{found:?}"
    );
}

#[test]
fn a_tier_that_gains_a_capability_is_wider_and_one_that_loses_it_is_not() {
    if !solver_or_skip() {
        return;
    }
    let old = tree_with(&[ALLOW_WRITE]);
    let new = tree_with(&[ALLOW_WRITE]);
    let tiers = new.policies().join("tiers.json");
    let mut data: Value = serde_json::from_str(&fs::read_to_string(&tiers).unwrap()).unwrap();
    for tier in data.as_array_mut().unwrap() {
        if tier["uid"]["id"] == "readonly" {
            tier["attrs"]["capabilities"] = serde_json::json!(["read", "write"]);
        }
    }
    fs::write(&tiers, serde_json::to_string_pretty(&data).unwrap()).unwrap();

    let run = diff(&old, &new);
    assert_eq!(run.code, 4, "{run:?}");
    let json = run.json();
    let finding = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["action"] == "Portcullis::Action::\"builtin/write_file\"" && f["wider"] == true)
        .unwrap_or_else(|| panic!("{json}"))
        .clone();
    assert_eq!(finding["opened_by"], "tier readonly", "{finding}");
    assert_eq!(finding["confirmed"], true, "{finding}");
    let example = finding["counterexample"].clone();
    assert_eq!(example["tier"], "readonly", "{example}");
    assert_eq!(run_check(&example["check"]), 4, "{example}");
    assert_eq!(run_check(&example["check_old"]), 2, "{example}");

    // The data file is compared too, and names the change.
    assert_eq!(
        json["data_widenings"],
        serde_json::json!([{
            "file": "policies/tiers.json",
            "entry": "tier `readonly`",
            "change": "gains the capability write",
        }])
    );

    // Taking the capability away again is no widening.
    assert_eq!(diff(&new, &old).code, 0);
}

#[test]
fn every_loosening_of_a_data_file_is_a_widening_named_with_its_file_and_entry() {
    if !solver_or_skip() {
        return;
    }
    let old = Tree::new();
    let new = Tree::new();
    // A comment changes the set hash, and permits nothing more.
    let classes = new.policies().join("path_classes.toml");
    let text = fs::read_to_string(&classes).unwrap();
    fs::write(&classes, format!("{text}\n# a comment is a change too\n")).unwrap();
    let run = diff(&old, &new);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["data_widenings"], serde_json::json!([]));

    // A class the team added and then drops, a harmless use of a program,
    // a variable whose value may now be shown: each is named.
    fs::write(
        old.policies().join("path_classes.toml"),
        format!("{text}\n[drafts]\nglobs = [\"drafts/**\"]\n"),
    )
    .unwrap();
    let commands = new.policies().join("commands.toml");
    let table = fs::read_to_string(&commands).unwrap();
    let table = table.replacen(
        "readable = [\"HOME\"",
        "readable = [\"GITHUB_TOKEN\", \"HOME\"",
        1,
    );
    fs::write(
        &commands,
        format!("{table}\n[[program]]\nprogram = \"frob\"\nclass = \"read_only\"\n"),
    )
    .unwrap();
    let run = diff(&old, &new);
    assert_eq!(run.code, 4, "{run:?}");
    let json = run.json();
    assert_eq!(json["wider"], true);
    let named: Vec<String> = json["data_widenings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            format!(
                "{} | {} | {}",
                w["file"].as_str().unwrap(),
                w["entry"].as_str().unwrap(),
                w["change"].as_str().unwrap()
            )
        })
        .collect();
    for expected in [
        "policies/path_classes.toml | class `drafts` | removed",
        "policies/commands.toml | program `frob` (class `read_only`) | a harmless use",
        "policies/commands.toml | [environment] readable | adds `GITHUB_TOKEN`",
    ] {
        assert!(
            named.iter().any(|n| n.starts_with(expected)),
            "{expected}: {named:?}"
        );
    }
    let human = diff_table(&old, &new);
    assert_eq!(human.code, 4, "{human:?}");
    assert!(
        human
            .stdout
            .contains("WIDER (data) policies/path_classes.toml: class `drafts`: removed"),
        "{human:?}"
    );
}

#[test]
fn sets_that_cannot_be_compared_exit_2() {
    let good = Tree::new();
    let broken = Tree::new();
    broken.write_policy(
        "90_broken.cedar",
        "permit (principal, action, resource) when { nonsense };",
    );
    let run = diff(&good, &broken);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.json()["valid"], false, "{run:?}");

    let missing = portcullis(&["policy", "diff", "builtin", "/nonexistent/policies"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(
        missing.stderr.contains("/nonexistent/policies"),
        "{missing:?}"
    );

    let empty = tempfile::tempdir().unwrap();
    let run = portcullis(&["policy", "diff", "builtin", empty.path().to_str().unwrap()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("NEW"), "{run:?}");
}

#[test]
fn without_a_solver_nothing_is_claimed() {
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["policy", "diff", "builtin", "builtin"])
        .env("CVC5", "/nonexistent/cvc5")
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cvc5"), "{stderr}");
}
