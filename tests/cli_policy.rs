use std::fs;

use crate::util::{Tree, portcullis};

#[test]
fn validate_accepts_the_builtin_set() {
    let run = portcullis(&["policy", "validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .starts_with("ok: 17 policies in 6 files and the built-in hard constraints"),
        "{run:?}"
    );
}

#[test]
fn validate_reports_json_for_machines() {
    let run = portcullis(&["policy", "validate", "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["valid"], true);
    assert_eq!(json["policy_set"]["hash"].as_str().unwrap().len(), 64);
    assert_eq!(
        json["tiers"],
        serde_json::json!(["owner", "paired", "readonly"])
    );
}

#[test]
fn validate_gives_the_same_hash_for_written_out_defaults() {
    let tree = Tree::new();
    let builtin = portcullis(&["policy", "validate", "--format", "json"]).json();
    let written = tree.run(&["policy", "validate", "--format", "json"]).json();
    assert_eq!(builtin["policy_set"]["hash"], written["policy_set"]["hash"]);
}

#[test]
fn validate_refuses_a_typo_with_file_line_column_and_help() {
    let tree = Tree::new();
    tree.write_policy(
        "25_team.cedar",
        "@id(\"team.read\")\n@reason(\"r\")\npermit (principal, action in Portcullis::Action::\"call_tool\", resource)\nwhen { resource.efects.contains(\"read\") };\n",
    );
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 3, "{run:?}");
    let file = tree.policies().join("25_team.cedar");
    assert!(
        run.stderr.contains(&format!("{}:4:8: ", file.display())),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("help: did you mean `effects`?"),
        "{run:?}"
    );
    assert!(run.stdout.is_empty(), "{run:?}");
}

#[test]
fn validate_refuses_a_duplicate_id_naming_both_files() {
    let tree = Tree::new();
    tree.write_policy(
        "25_team.cedar",
        "@id(\"paths.no_secrets\")\n@reason(\"r\")\npermit (principal, action, resource);\n",
    );
    let run = tree.run(&["policy", "validate", "--format", "json"]);
    assert_eq!(run.code, 3, "{run:?}");
    let problem = &run.json()["problems"][0];
    assert_eq!(problem["kind"], "duplicate_id");
    // Files load in name order: the second use, in 30_paths.cedar, is the
    // duplicate, and the message names where the id was first used.
    assert!(
        problem["file"]
            .as_str()
            .unwrap()
            .ends_with("30_paths.cedar"),
        "{problem}"
    );
    assert!(problem["line"].as_u64().is_some(), "{problem}");
    assert!(
        problem["message"]
            .as_str()
            .unwrap()
            .contains("25_team.cedar"),
        "{problem}"
    );
}

#[test]
fn validate_refuses_an_impossible_policy() {
    let tree = Tree::new();
    tree.write_policy(
        "25_team.cedar",
        "@id(\"team.never\")\n@reason(\"r\")\npermit (principal, action in Portcullis::Action::\"call_tool\", resource)\nwhen { false };\n",
    );
    let run = tree.run(&["policy", "validate", "--format", "json"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.json()["problems"][0]["kind"], "validation_warning");
}

/// A write outside the root, as `check` judges it.
fn escape(tree: &Tree) -> crate::util::Run {
    tree.run(&[
        "check",
        "--client",
        "ci-bot",
        "--tool",
        "builtin/write_file",
        "--args",
        r#"{"path":"../escape","content":"x"}"#,
        "--format",
        "json",
    ])
}

fn assert_hard_deny(tree: &Tree, why: &str) {
    let run = escape(tree);
    assert_eq!(run.code, 2, "{why}: {run:?}");
    assert_eq!(
        run.json()["policies"][0]["id"],
        "hard.no_write_outside_root",
        "{why}: {run:?}"
    );
}

#[test]
fn no_edit_of_a_teams_folder_weakens_a_hard_constraint() {
    let builtin = |tree: &Tree| tree.policies().join("builtin/hard_constraints.cedar");
    // The read-only copy: deleting or weakening it changes nothing.
    let tree = Tree::new();
    let copy = fs::read_to_string(builtin(&tree)).unwrap();
    assert!(copy.contains("FOR READING ONLY"), "{copy}");
    fs::write(
        builtin(&tree),
        copy.replace(
            "unless { context.writes_inside_root }",
            "unless { context.writes_inside_root || principal.name == \"ci-bot\" }",
        ),
    )
    .unwrap();
    assert_eq!(tree.run(&["policy", "validate"]).code, 0);
    assert_hard_deny(&tree, "edited copy");
    fs::remove_file(builtin(&tree)).unwrap();
    assert_eq!(tree.run(&["policy", "validate"]).code, 0);
    assert_hard_deny(&tree, "deleted copy");

    // A team file in the `hard.` namespace, in any form: refused, named.
    let weakened = copy.replace(
        "unless { context.writes_inside_root }",
        "unless { context.writes_inside_root || principal.name == \"ci-bot\" }",
    );
    let by_transport = copy.replace(
        "unless { context.writes_inside_root }",
        "unless { context.writes_inside_root || context.transport == \"stdio\" }",
    );
    let never = "@id(\"hard.no_write_outside_root\")\n@reason(\"r\")\nforbid (principal, action, resource)\nwhen { false };\n";
    let renamed_namespace =
        "@id(\"HARD.exception\")\n@reason(\"r\")\npermit (principal, action, resource);\n";
    for (name, text) in [
        ("00_hard_constraints.cedar", copy.as_str()),
        ("05_exception.cedar", weakened.as_str()),
        ("05_transport.cedar", by_transport.as_str()),
        ("05_never.cedar", never),
        ("05_case.cedar", renamed_namespace),
    ] {
        let tree = Tree::new();
        tree.write_policy(name, text);
        let run = tree.run(&["policy", "validate"]);
        assert_eq!(run.code, 3, "{name}: {run:?}");
        assert!(
            run.stderr.contains(name) && run.stderr.contains("`hard.` namespace"),
            "{name}: {run:?}"
        );
        assert_eq!(
            escape(&tree).code,
            3,
            "{name}: a set that does not load decides nothing"
        );
    }

    // Harmless edits: a shadowing permit with every condition, and the
    // constraints restated under other ids. They load; the deny stays.
    let tree = Tree::new();
    tree.write_policy(
        "05_shadow.cedar",
        "@id(\"allow.escape\")\n@reason(\"r\")\npermit (principal, action, resource)\nwhen { !context.writes_inside_root && context.approved && context.approval_channel == \"client_elicitation\" && principal.name == \"ci-bot\" };\n",
    );
    tree.write_policy(
        "06_restated.cedar",
        &copy.replace("@id(\"hard.", "@id(\"team."),
    );
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_hard_deny(&tree, "shadowing permit");
}

#[test]
fn validate_fails_on_a_missing_folder_with_exit_1() {
    let run = portcullis(&["policy", "validate", "--policies", "/nonexistent/policies"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("/nonexistent/policies"), "{run:?}");
}

#[test]
fn validate_fails_on_a_missing_tiers_file() {
    let tree = Tree::new();
    fs::remove_file(tree.policies().join("tiers.json")).unwrap();
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("tiers.json is missing"), "{run:?}");
}

#[test]
fn test_runs_the_shipped_fixtures() {
    let run = portcullis(&["policy", "test"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.trim_end().ends_with("58 passed, 0 failed"),
        "{run:?}"
    );
}

#[test]
fn test_reports_a_failing_fixture_with_why_and_exits_1() {
    let tree = Tree::new();
    // A team widens reads outside the root without updating the fixture.
    let paths = tree.policies().join("30_paths.cedar");
    let text = fs::read_to_string(&paths).unwrap();
    let widened = text.replace(
        "unless { context.reads_inside_root }",
        "unless { context.reads_inside_root || principal.tier == Portcullis::Tier::\"paired\" }",
    );
    assert_ne!(text, widened);
    fs::write(&paths, widened).unwrap();
    let run = tree.run(&["policy", "test"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("FAIL "), "{run:?}");
    assert!(
        run.stdout.contains("a read outside the root is denied"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("expected determining policies [\"paths.no_read_outside_root\"], got []"),
        "{run:?}"
    );
    assert!(
        run.stdout.trim_end().ends_with("57 passed, 1 failed"),
        "{run:?}"
    );
}

#[test]
fn test_without_fixtures_fails() {
    let tree = Tree::new();
    fs::remove_dir_all(tree.policies().join("tests")).unwrap();
    let run = tree.run(&["policy", "test"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("no fixture tests found"), "{run:?}");
}

#[test]
fn test_refuses_an_invalid_set_with_exit_3() {
    let tree = Tree::new();
    tree.write_policy("25_team.cedar", "permit (principal, action, resource);");
    let run = tree.run(&["policy", "test"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("policy has no @id"), "{run:?}");
}

#[test]
fn fmt_check_passes_on_the_shipped_policies() {
    let run = portcullis(&["policy", "fmt", "--check"]);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn fmt_rewrites_an_unformatted_file_and_check_then_passes() {
    let tree = Tree::new();
    let policy = "@id(\"team.a\") @reason(\"r\") permit(principal,action in Portcullis::Action::\"call_tool\",resource) when {resource.read_only};\n";
    tree.write_policy("25_team.cedar", policy);
    let run = tree.run(&["policy", "fmt", "--check"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("not formatted:") && run.stdout.contains("25_team.cedar"),
        "{run:?}"
    );
    assert_eq!(
        fs::read_to_string(tree.policies().join("25_team.cedar")).unwrap(),
        policy
    );

    let run = tree.run(&["policy", "fmt"]);
    assert_eq!(run.code, 0, "{run:?}");
    let formatted = fs::read_to_string(tree.policies().join("25_team.cedar")).unwrap();
    assert!(formatted.contains("permit (\n"), "{formatted}");
    assert_eq!(tree.run(&["policy", "fmt", "--check"]).code, 0);
    assert_eq!(tree.run(&["policy", "validate"]).code, 0);
}

#[test]
fn fmt_refuses_a_file_that_does_not_parse_and_leaves_it() {
    let tree = Tree::new();
    tree.write_policy("25_team.cedar", "permit (");
    let run = tree.run(&["policy", "fmt"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(
        fs::read_to_string(tree.policies().join("25_team.cedar")).unwrap(),
        "permit ("
    );
}

#[test]
fn fmt_will_not_rewrite_the_builtin_policies() {
    let run = portcullis(&["policy", "fmt"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("--policies"), "{run:?}");
}

#[test]
fn a_moved_expectation_says_why_and_accept_rewrites_only_it() {
    let tree = Tree::new();
    let allowlist = fs::read_to_string(tree.policies().join("20_allowlist.cedar")).unwrap();
    tree.write_policy(
        "20_allowlist.cedar",
        &format!(
            "{allowlist}\n@id(\"allow.read_file\")\n@reason(\"paired clients may read files\")\npermit (\n  principal in Portcullis::Tier::\"paired\",\n  action in Portcullis::Action::\"use_tool\",\n  resource == Portcullis::Tool::\"builtin/read_file\"\n);\n"
        ),
    );
    // A case that cannot run (an entity uid that does not parse) is not
    // an expectation to rewrite.
    fs::write(
        tree.policies().join("tests/broken.json"),
        r#"[{"name": "cannot run", "request": {"principal": "not a uid", "action": "Portcullis::Action::\"call_tool\"", "resource": "Portcullis::Tool::\"builtin/read_file\"", "context": {}}, "entities": [], "decision": "deny", "reason": [], "num_errors": 0}]"#,
    )
    .unwrap();
    let before = fs::read_to_string(tree.policies().join("tests/allowlist.json")).unwrap();
    let run = tree.run(&["policy", "test"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("expected deny, got allow"), "{run:?}");
    assert!(
        run.stdout
            .contains("decided by allow.read_file (paired clients may read files) in "),
        "{run:?}"
    );
    assert!(run.stdout.contains("7 failed"), "{run:?}");

    let run = tree.run(&["policy", "test", "--accept"]);
    assert_eq!(run.code, 1, "the case that cannot run still fails: {run:?}");
    assert!(run.stdout.contains("6 expectations rewritten"), "{run:?}");
    assert!(
        run.stdout.contains("FAIL") && run.stdout.contains("cannot run"),
        "{run:?}"
    );
    let after = fs::read_to_string(tree.policies().join("tests/allowlist.json")).unwrap();
    assert_ne!(before, after);
    let cases: serde_json::Value = serde_json::from_str(&after).unwrap();
    let moved = cases
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "the allowlist is empty: paired cannot call read_file")
        .unwrap();
    assert_eq!(moved["decision"], "allow");
    assert_eq!(moved["reason"], serde_json::json!(["allow.read_file"]));
    assert_eq!(
        moved["entities"], "entities/fixtures.json",
        "the rest is kept"
    );

    fs::remove_file(tree.policies().join("tests/broken.json")).unwrap();
    let run = tree.run(&["policy", "test"]);
    assert_eq!(run.code, 0, "{run:?}");
    // The built-in fixtures are not rewritten.
    let run = portcullis(&["policy", "test", "--accept"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("pass --policies DIR"), "{run:?}");
}

/// The official Cedar CLI: `CEDAR_CLI`, the one `.ci/install-cedar-cli`
/// puts under `target/tools/bin`, or `cedar` on PATH.
fn cedar_cli() -> Option<std::path::PathBuf> {
    let installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin/cedar");
    std::env::var_os("CEDAR_CLI")
        .map(std::path::PathBuf::from)
        .or_else(|| installed.exists().then_some(installed))
        .or_else(|| {
            std::process::Command::new("cedar")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
                .then(|| "cedar".into())
        })
}

/// Runs the Cedar CLI's checks on an export: validate, format, and every
/// fixture file; the failures, each with the CLI's words.
fn cedar_checks(cedar: &std::path::Path, export: &std::path::Path) -> Vec<String> {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(cedar)
            .args(args)
            .current_dir(export)
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let set = [
        "--policies",
        "policies.cedar",
        "--schema",
        "schema.cedarschema",
    ];
    let mut failures = Vec::new();
    let (ok, said) = run(&[&["validate"][..], &set, &["--deny-warnings"]].concat());
    if !ok {
        failures.push(format!("validate: {said}"));
    }
    let (ok, said) = run(&["format", "--check", "--policies", "policies.cedar"]);
    if !ok {
        failures.push(format!("format --check: {said}"));
    }
    let mut tests: Vec<_> = fs::read_dir(export.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty());
    for test in tests {
        let test = test.to_str().unwrap();
        let (ok, said) = run(&[&["run-tests"][..], &set, &["--tests", test]].concat());
        if !ok || !said.contains(", 0 failed") {
            failures.push(format!("run-tests {test}: {said}"));
        }
    }
    failures
}

#[test]
fn export_writes_a_bundle_the_official_cedar_cli_validates_and_tests() {
    let tree = Tree::new();
    let out = tree.dir.path().join("export");
    let run = tree.run(&["policy", "export", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("exported 17 policies, the schema, the entities and 58 fixture cases"),
        "{run:?}"
    );
    let policies = fs::read_to_string(out.join("policies.cedar")).unwrap();
    assert!(
        policies.contains("hard_constraints.cedar") && policies.contains("@id(\"hard."),
        "the built-in hard constraints are in the bundle"
    );
    let schema = fs::read_to_string(out.join("schema.cedarschema")).unwrap();
    assert!(schema.contains("builtin/write_file"), "each tool's action");
    let Some(cedar) = cedar_cli() else {
        eprintln!("skipped the Cedar CLI's checks: no `cedar` (.ci/install-cedar-cli installs it)");
        return;
    };
    let failures = cedar_checks(&cedar, &out);
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // A team change that moves a decision fails the CLI's tests on the
    // very case `policy test` fails: the bundle is the set.
    let allowlist = fs::read_to_string(tree.policies().join("20_allowlist.cedar")).unwrap();
    tree.write_policy(
        "20_allowlist.cedar",
        &format!(
            "{allowlist}\n@id(\"allow.read_file\")\n@reason(\"paired clients may read files\")\npermit (\n  principal in Portcullis::Tier::\"paired\",\n  action in Portcullis::Action::\"use_tool\",\n  resource == Portcullis::Tool::\"builtin/read_file\"\n);\n"
        ),
    );
    let run = tree.run(&["policy", "export", "--force", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let failures = cedar_checks(&cedar, &out);
    assert!(
        failures.iter().any(|f| f.contains("allowlist.json")
            && f.contains("the allowlist is empty: paired cannot call read_file ... fail")),
        "{failures:#?}"
    );
    assert!(
        failures.iter().all(|f| f.starts_with("run-tests")),
        "{failures:#?}"
    );
}

#[test]
fn export_refuses_a_folder_in_use_and_a_set_that_does_not_load() {
    let tree = Tree::new();
    let out = tree.dir.path().join("taken");
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("keep.txt"), "mine").unwrap();
    let run = tree.run(&["policy", "export", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("exists and is not empty; pass --force"),
        "{run:?}"
    );
    assert!(!out.join("policies.cedar").exists());

    tree.write_policy(
        "25_bad.cedar",
        "permit (principal, action, resource) when { nope };\n",
    );
    let fresh = tree.dir.path().join("fresh");
    let run = tree.run(&["policy", "export", fresh.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        !fresh.exists(),
        "nothing is written for a set that does not load"
    );
    assert_eq!(fs::read_to_string(out.join("keep.txt")).unwrap(), "mine");
}
