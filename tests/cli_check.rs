use std::fs;
use std::os::unix::fs::symlink;

use crate::util::{Tree, portcullis, portcullis_in};

const ALLOW_BUILTIN_TO_PAIRED: &str = r#"
@id("allow.paired.builtin")
@reason("paired clients may use the built-in workspace tools")
permit (
  principal in Portcullis::Tier::"paired",
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
);
"#;

/// A tree whose allowlist lets paired clients use the built-in tools, and a
/// workspace root beside it.
fn allowing_tree() -> (Tree, tempfile::TempDir) {
    let tree = Tree::new();
    tree.write_policy("20_allowlist.cedar", ALLOW_BUILTIN_TO_PAIRED);
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("notes.txt"), "hello").unwrap();
    (tree, root)
}

fn check(tree: &Tree, root: &tempfile::TempDir, extra: &[&str]) -> crate::util::Run {
    let mut args = vec!["check", "--root", root.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    tree.run(&args)
}

#[test]
fn the_empty_allowlist_denies_with_exit_2() {
    let root = tempfile::tempdir().unwrap();
    let run = portcullis_in(
        root.path(),
        &[
            "check",
            "--tool",
            "builtin/read_file",
            "--args",
            r#"{"path":"a.txt"}"#,
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.starts_with("DENY (not_permitted)"), "{run:?}");
    assert!(
        run.stdout.contains("the allowlist does not include it"),
        "{run:?}"
    );
}

#[test]
fn an_allowed_read_exits_0_and_names_its_permit() {
    let (tree, root) = allowing_tree();
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "read_file",
            "--args",
            r#"{"path":"notes.txt"}"#,
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["decision"], "allow");
    assert_eq!(json["cause"], "permitted");
    assert_eq!(json["policies"][0]["id"], "allow.paired.builtin");
    assert!(
        json["policies"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("20_allowlist.cedar")
    );
    assert_eq!(json["request"]["tool"], "builtin/read_file");
    assert_eq!(json["request"]["paths"][0]["inside_root"], true);
}

#[test]
fn a_write_asks_with_exit_4() {
    let (tree, root) = allowing_tree();
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "builtin/write_file",
            "--args",
            r#"{"path":"new.txt","content":"x"}"#,
        ],
    );
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stdout.starts_with("ASK (approval_required)"), "{run:?}");
    assert!(run.stdout.contains("approval.writes"), "{run:?}");
}

#[test]
fn a_write_escaping_through_a_symlink_is_denied_by_the_hard_constraint() {
    let (tree, root) = allowing_tree();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), root.path().join("docs")).unwrap();
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "builtin/write_file",
            "--args",
            r#"{"path":"docs/x.md","content":"x"}"#,
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    let json = run.json();
    assert_eq!(json["cause"], "forbidden");
    assert_eq!(json["policies"][0]["id"], "hard.no_write_outside_root");
    assert_eq!(json["request"]["facts"]["writes_inside_root"], false);
    assert_eq!(
        json["request"]["paths"][0]["canonical"].as_str().unwrap(),
        outside
            .path()
            .canonicalize()
            .unwrap()
            .join("x.md")
            .to_str()
            .unwrap()
    );
}

#[test]
fn a_write_into_git_is_denied_even_with_the_allowlist() {
    let (tree, root) = allowing_tree();
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "edit_file",
            "--args",
            r#"{"path":".git/config","old_string":"a","new_string":"b"}"#,
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("hard.no_vcs_metadata_write"), "{run:?}");
}

#[test]
fn reading_a_secret_is_denied() {
    let (tree, root) = allowing_tree();
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "read_file",
            "--args",
            r#"{"path":"deploy/server.pem"}"#,
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("paths.no_secrets"), "{run:?}");
    assert!(run.stdout.contains("path_classes=[secrets]"), "{run:?}");
}

#[test]
fn a_readonly_tier_cannot_write() {
    let (tree, root) = allowing_tree();
    let run = check(
        &tree,
        &root,
        &[
            "--tier",
            "readonly",
            "--tool",
            "write_file",
            "--args",
            r#"{"path":"a","content":""}"#,
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("tier.capability_gate"), "{run:?}");
}

#[test]
fn discover_ignores_arguments_and_paths() {
    let (tree, root) = allowing_tree();
    let run = check(
        &tree,
        &root,
        &["--action", "discover", "--tool", "write_file"],
    );
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn an_unknown_tool_is_denied_not_an_error() {
    let (tree, root) = allowing_tree();
    let run = check(&tree, &root, &["--tool", "shell/exec", "--format", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.json()["cause"], "unknown_tool");
}

#[test]
fn arguments_that_are_not_json_fail_with_exit_1() {
    let run = portcullis(&["check", "--tool", "read_file", "--args", "{path:"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("--args is not JSON"), "{run:?}");
    assert!(run.stdout.is_empty());
}

#[test]
fn arguments_off_the_input_schema_fail_with_exit_1() {
    let run = portcullis(&[
        "check",
        "--tool",
        "read_file",
        "--args",
        r#"{"path":"a","bogus":1}"#,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("invalid arguments"), "{run:?}");
    let run = portcullis(&["check", "--tool", "read_file", "--args", r#"{"offset":1}"#]);
    assert_eq!(run.code, 1, "{run:?}");
}

#[test]
fn a_path_with_a_nul_byte_fails_with_exit_1() {
    let run = portcullis(&[
        "check",
        "--tool",
        "read_file",
        "--args",
        r#"{"path":"a\u0000b"}"#,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("NUL"), "{run:?}");
}

#[test]
fn a_symlink_loop_is_judged_as_outside_the_root() {
    let root = tempfile::tempdir().unwrap();
    symlink("loop", root.path().join("loop")).unwrap();
    let run = portcullis_in(
        root.path(),
        &[
            "check",
            "--tool",
            "read_file",
            "--args",
            r#"{"path":"loop"}"#,
        ],
    );
    // The same answer as for any place outside the root, whether or not
    // it exists: no message tells what the filesystem holds.
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("unresolvable"), "{run:?}");
    assert!(run.stdout.contains("paths.no_read_outside_root"), "{run:?}");
}

#[test]
fn an_unknown_tier_fails_with_exit_1_and_lists_the_tiers() {
    let run = portcullis(&[
        "check",
        "--tier",
        "admin",
        "--tool",
        "read_file",
        "--args",
        r#"{"path":"a"}"#,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("owner, paired, readonly"), "{run:?}");
}

#[test]
fn a_missing_root_fails_with_exit_1() {
    let run = portcullis(&[
        "check",
        "--root",
        "/nonexistent/root",
        "--tool",
        "read_file",
        "--args",
        r#"{"path":"a"}"#,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("--root"), "{run:?}");
}

#[test]
fn an_invalid_policy_set_fails_with_exit_3() {
    let (tree, root) = allowing_tree();
    tree.write_policy("25_bad.cedar", "permit (principal, action, resource);");
    let run = check(
        &tree,
        &root,
        &["--tool", "read_file", "--args", r#"{"path":"a"}"#],
    );
    assert_eq!(run.code, 3, "{run:?}");
}

#[test]
fn a_schema_the_facts_do_not_fit_refuses_every_check_with_exit_3() {
    let (tree, root) = allowing_tree();
    let schema = tree.schemas().join("portcullis.cedarschema");
    let text = fs::read_to_string(&schema).unwrap();
    fs::write(
        &schema,
        text.replace(
            "    path_classes: Set<String>,\n  };",
            "    path_classes: Set<String>,\n    session: String,\n  };",
        ),
    )
    .unwrap();
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "read_file",
            "--args",
            r#"{"path":"notes.txt"}"#,
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.json()["problems"][0]["kind"], "context");
}

#[test]
fn gate_exit_codes_follow_check() {
    assert_eq!(portcullis(&["gate", "--command", "git status"]).code, 0);
    assert_eq!(portcullis(&["gate", "--command", "git push"]).code, 4);
    let run = portcullis(&["gate", "--command", "cd x && rm -rf /"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout
            .starts_with("DENY (forbidden, layer 50_commands)"),
        "{run:?}"
    );
    // rm's operands are files it writes (the built-in table's floor): the
    // hard constraint holds whatever the team's policies say of destructive.
    assert!(
        run.stdout.contains("rm -rf /  [destructive, writes_files]"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("hard.no_command_write_outside_root"),
        "{run:?}"
    );
}

#[test]
fn gate_takes_the_command_as_words_after_a_double_dash() {
    let run = portcullis(&["gate", "--format", "json", "--", "bash", "-c", "rm -rf ~"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.json()["commands"][0]["argv"],
        serde_json::json!(["rm", "-rf", "~"])
    );
    // Words are quoted, so a word with a `;` stays one word.
    let run = portcullis(&["gate", "--format", "json", "--", "echo", "a; rm -rf /"]);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn gate_refuses_bad_input_with_exit_1() {
    let run = portcullis(&["gate"]);
    assert_eq!(run.code, 1, "{run:?}");
    let run = portcullis(&["gate", "--command", "  "]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("empty"), "{run:?}");
    let run = portcullis(&["gate", "--command", "ls", "--cwd", "~root/x"]);
    assert_eq!(run.code, 1, "{run:?}");
}

#[test]
fn gate_judges_writes_against_the_root_from_the_cwd() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("sub")).unwrap();
    let base = ["gate", "--root", root.path().to_str().unwrap()];
    let mut inside = base.to_vec();
    inside.extend(["--cwd", "sub", "--command", "echo x > ../out.txt"]);
    // A write inside the root is a write: a human approves it.
    assert_eq!(portcullis(&inside).code, 4);
    let mut outside = base.to_vec();
    outside.extend(["--cwd", "sub", "--command", "echo x > ../../out.txt"]);
    let run = portcullis(&outside);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains("hard.no_command_write_outside_root"),
        "{run:?}"
    );
    // Into VCS metadata, by any write: a hard constraint, named.
    fs::create_dir_all(root.path().join(".git")).unwrap();
    for command in [
        "echo x > .git/config",
        "echo x >> ../.git/hooks/pre-commit",
        "sort -o .git/config names.txt",
        "ls | tee .git/HEAD",
        "cp hook ../.git/hooks/pre-commit",
        "sed -i s/a/b/ ../.git/config",
    ] {
        let mut vcs = base.to_vec();
        vcs.extend(["--cwd", "sub", "--format", "json", "--command", command]);
        let run = portcullis(&vcs);
        assert_eq!(run.code, 2, "{command}: {run:?}");
        let ids: Vec<String> = run.json()["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            ids.contains(&"hard.no_command_vcs_metadata_write".to_owned()),
            "{command}: {ids:?}"
        );
    }
}

#[test]
fn a_team_adds_a_command_class_and_a_policy_without_rust() {
    let tree = crate::util::Tree::new();
    let table = tree.policies().join("commands.toml");
    let mut text = fs::read_to_string(&table).unwrap();
    text.push_str("\n[[rule]]\nclass = \"cloud\"\nprogram = \"aws|gcloud|az\"\n");
    fs::write(&table, text).unwrap();
    tree.write_policy(
        "60_cloud.cedar",
        "@id(\"commands.no_cloud\")\n@reason(\"cloud CLIs are off limits here\")\nforbid (principal, action in Portcullis::Action::\"run_command\", resource)\nwhen { context.classes.contains(\"cloud\") };\n",
    );
    let run = tree.run(&["gate", "--command", "ls && aws s3 ls", "--format", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let json = run.json();
    assert_eq!(json["policies"][0]["id"], "commands.no_cloud");
    assert_eq!(json["commands"][1]["classes"], serde_json::json!(["cloud"]));
    // A bad rule is refused with its file and rule number.
    let mut text = fs::read_to_string(&table).unwrap();
    text.push_str("\n[[rule]]\nclass = \"broken\"\nprogram = \"(\"\n");
    fs::write(&table, text).unwrap();
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("commands.toml") && run.stderr.contains("class `broken`"),
        "{run:?}"
    );
}

#[test]
fn a_team_describes_a_read_only_program_without_rust() {
    let tree = crate::util::Tree::new();
    let table = tree.policies().join("commands.toml");
    let original = fs::read_to_string(&table).unwrap();
    let gate = |command: &str| tree.run(&["gate", "--command", command]).code;
    assert_eq!(gate("fd -H foo"), 4, "not described yet: unknown");
    let mut text = original.clone();
    text.push_str(
        "\n[[program]]\nprogram = \"fd\"\nclass = \"read_only\"\nflags = [\"-H\", \"-i\", \"--hidden\"]\noptions = [\"-e\", \"--extension\"]\n",
    );
    fs::write(&table, text).unwrap();
    assert_eq!(gate("fd -H foo"), 0);
    assert_eq!(gate("fd -Hi -e rs foo"), 0);
    assert_eq!(gate("fd --extension=rs foo"), 0);
    // What the description does not list is not proven.
    assert_eq!(gate("fd -x rm foo"), 4);
    assert_eq!(gate("fd -Hx rm foo"), 4);
    assert_eq!(gate("fd --exec=rm foo"), 4);
    // A deny-list rule cannot make a program read-only.
    let mut text = original;
    text.push_str("\n[[rule]]\nclass = \"read_only\"\nprogram = \"fd\"\nunless_args = \"-x\"\n");
    fs::write(&table, text).unwrap();
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("commands.toml") && run.stderr.contains("may not give `read_only`"),
        "{run:?}"
    );
}

#[test]
fn a_pattern_is_judged_by_what_the_shell_expands_it_to() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let home = dir.path().join("home");
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(root.join(".env"), "K=V").unwrap();
    fs::write(root.join("src/main.rs"), "").unwrap();
    fs::write(root.join("credentials.json"), "{}").unwrap();
    fs::write(home.join(".ssh/id_rsa"), "k").unwrap();
    fs::write(dir.path().join("outside.txt"), "o").unwrap();
    let gate = |command: &str| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args([
                "gate",
                "--root",
                root.to_str().unwrap(),
                "--command",
                command,
            ])
            .env("HOME", &home)
            .env_remove("PORTCULLIS_POLICIES")
            .env_remove("PORTCULLIS_SCHEMA")
            .output()
            .unwrap();
        output.status.code().unwrap()
    };
    for (command, code) in [
        ("cat .e?v", 2),
        ("cat .e[n]v", 2),
        ("cat .e{n,x}v", 2),
        ("head *.json", 2),
        ("cat ~/.ss?/id_r?a", 2),
        ("cat ../*.txt", 4),
        ("cd src && cat *.rs", 4),
        ("wc -l src/*.rs", 0),
        ("ls *.md", 0),
    ] {
        assert_eq!(gate(command), code, "{command}");
    }
}

/// A name that a file system or a server maps onto a secret's (a Kelvin
/// sign for `K`, a full-width letter) is that secret, for the tools as for
/// the gate.
#[test]
fn an_alias_of_a_secret_by_unicode_normalization_is_denied_as_the_secret() {
    let (tree, root) = allowing_tree();
    for alias in ["deploy.\u{212a}EY", ".\u{ff45}nv", "\u{ff0e}env"] {
        fs::write(root.path().join(alias), "secret").unwrap();
        let args = format!("{{\"path\":\"{alias}\"}}");
        let run = check(
            &tree,
            &root,
            &["--tool", "builtin/read_file", "--args", &args],
        );
        assert_eq!(run.code, 2, "{alias}: {run:?}");
        assert!(run.stdout.contains("paths.no_secrets"), "{alias}: {run:?}");
    }
    let run = check(
        &tree,
        &root,
        &[
            "--tool",
            "builtin/read_file",
            "--args",
            r#"{"path":"notes.txt"}"#,
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn usage_errors_exit_64_and_help_lists_every_code() {
    for args in [
        &["gate", "--bogus"][..],
        &["check"],
        &["audit", "show"],
        &["serve", "--http", "not-an-address"],
        &["no-such-command"],
    ] {
        let run = portcullis(args);
        assert_eq!(run.code, 64, "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    }
    let help = portcullis(&["--help"]);
    assert_eq!(help.code, 0, "{help:?}");
    for line in [
        "0   ok",
        "2   check, gate, exec: deny",
        "3   the policy set",
        "4   check, gate, exec: ask",
        "64  usage",
    ] {
        assert!(help.stdout.contains(line), "{line}: {}", help.stdout);
    }
    assert_eq!(portcullis(&["--version"]).code, 0);
}

#[test]
fn a_closed_stdout_ends_a_printing_command_quietly() {
    use std::process::{Command, Stdio};
    for args in [
        &["gate", "--format", "json", "--command", "git status"][..],
        &["policy", "validate"],
        &["schema", "show"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert!(out.status.code().is_some(), "{args:?}: ended by a signal");
    }
}
