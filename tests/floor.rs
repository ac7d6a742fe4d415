//! The floor under the facts the hard constraints rest on (issue 34): each
//! edit a hostile or careless team member made to weaken them, tried
//! offline with `policy validate`, `check` and `gate`. The same edits
//! against a running `serve --reload tighten-only` are in `reload.rs`.

use std::fs;

use serde_json::json;

use crate::util::{Tree, portcullis};

/// A tree whose allowlist lets every client use every tool, so that only
/// the hard constraints stand between a request and an allow.
fn permissive() -> Tree {
    let tree = Tree::new();
    tree.write_policy(
        "21_allow_all.cedar",
        "@id(\"allow.everything\")\n@reason(\"a team that allows what it can\")\npermit (principal, action, resource);\n",
    );
    tree
}

fn edit(path: std::path::PathBuf, from: &str, to: &str) {
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{} holds {from:?}", path.display());
    fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// A pinned downstream server `srv` with the tools given (name, input
/// properties), declared by `servers_toml`.
fn with_server(tree: &Tree, servers_toml: &str, tools: &[(&str, serde_json::Value)]) {
    tree.write_policy("servers.toml", servers_toml);
    let mut lock = portcullis::servers::ServersLock::new();
    for (name, properties) in tools {
        let definition =
            json!({"name": name, "inputSchema": {"type": "object", "properties": properties}});
        lock.servers.entry("srv".into()).or_default().insert(
            (*name).into(),
            portcullis::servers::Pin::of(portcullis::servers::pinned_definition(&definition)),
        );
    }
    tree.write_policy("servers.lock", &lock.to_text());
}

fn check(
    tree: &Tree,
    root: &std::path::Path,
    tool: &str,
    args: serde_json::Value,
) -> crate::util::Run {
    let args = args.to_string();
    tree.run(&[
        "check",
        "--client",
        "agent",
        "--tier",
        "owner",
        "--tool",
        tool,
        "--args",
        &args,
        "--root",
        root.to_str().unwrap(),
    ])
}

#[test]
fn a_schema_that_takes_an_action_out_of_its_group_does_not_load() {
    let tree = permissive();
    let schema = tree.schemas().join("portcullis.cedarschema");
    edit(
        schema.clone(),
        "action discover_tool in [\"use_tool\"]",
        "action discover_tool",
    );
    edit(
        schema.clone(),
        "action call_tool in [\"use_tool\"]",
        "action call_tool",
    );
    edit(
        schema,
        "  action use_tool;",
        "  action use_tool;\n  action legacy_probe in [\"use_tool\"];",
    );
    with_server(
        &tree,
        "[servers.srv]\ncommand = \"srv-mcp\"\n[servers.srv.tools.spawn]\neffects = [\"process\"]\n",
        &[("spawn", json!({}))],
    );
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("portcullis.cedarschema")
            && run.stderr.contains("action `call_tool`: it is in []")
            && run.stderr.contains("action `discover_tool`"),
        "{run:?}"
    );
    let root = tempfile::tempdir().unwrap();
    let run = check(&tree, root.path(), "srv/spawn", json!({}));
    assert_eq!(
        run.code, 3,
        "the process tool is not allowed: the set does not load: {run:?}"
    );
}

#[test]
fn a_command_table_that_drops_what_programs_write_does_not_load() {
    let tree = permissive();
    let table = tree.policies().join("commands.toml");
    edit(
        table.clone(),
        "program = [\"tee\"]\nclass = \"writes_files\"",
        "program = [\"tee\"]\nclass = \"read_only\"",
    );
    edit(
        table,
        "output_operands = \"all\"\n\n[[program]]\nprogram = [\"cp\"",
        "\n[[program]]\nprogram = [\"cp\"",
    );
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("commands.toml: built-in program") && run.stderr.contains("`tee`"),
        "{run:?}"
    );
    let run = tree.run(&["gate", "--command", "tee .git/config"]);
    assert_eq!(run.code, 3, "{run:?}");
}

#[test]
fn what_a_team_adds_to_the_command_table_cannot_take_a_write_out_of_view() {
    // Loads: the built-in entries are kept. The team adds a read-only
    // `tee`, `cp`, `rm` and `mv`, and global options that would swallow
    // their operands; the built-in table still sees every write.
    let tree = permissive();
    let table = tree.policies().join("commands.toml");
    let text = fs::read_to_string(&table).unwrap();
    fs::write(
        &table,
        format!(
            "{text}\n[[program]]\nprogram = [\"tee\", \"cp\", \"rm\", \"mv\"]\nclass = \"read_only\"\nfree_words = true\n\n\
             [globals.tee]\noptions = [\"-a\"]\n[globals.rm]\noptions = [\"-rf\"]\n"
        ),
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join(".git")).unwrap();
    fs::write(root.path().join(".git/config"), "[core]\n").unwrap();
    fs::write(root.path().join("README.md"), "readme\n").unwrap();
    let root_flag = root.path().to_str().unwrap();
    for (command, hard) in [
        (
            "tee -a ../x < README.md",
            "hard.no_command_write_outside_root",
        ),
        ("cp README.md ../x", "hard.no_command_write_outside_root"),
        ("rm -rf ../outside", "hard.no_command_write_outside_root"),
        ("rm -rf .git", "hard.no_command_vcs_metadata_write"),
        ("tee .git/config", "hard.no_command_vcs_metadata_write"),
        ("mv .git/config x", "hard.no_command_vcs_metadata_write"),
    ] {
        let run = tree.run(&["gate", "--root", root_flag, "--command", command]);
        assert_eq!(run.code, 2, "{command}: {run:?}");
        assert!(run.stdout.contains(hard), "{command}: {run:?}");
    }
}

#[test]
fn a_path_class_table_without_a_builtin_secret_does_not_load() {
    let tree = permissive();
    edit(
        tree.policies().join("path_classes.toml"),
        "  \"**/.env\",\n",
        "",
    );
    let run = tree.run(&["policy", "validate"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr
            .contains("path_classes.toml: class `secrets`: the built-in glob `**/.env` is missing"),
        "{run:?}"
    );
}

#[test]
fn servers_that_would_write_past_their_paths_do_not_load() {
    let write = json!({"path": {"type": "string"}, "content": {"type": "string"}});
    for (toml, named) in [
        (
            "[servers.srv]\ncommand = \"srv-mcp\"\nroot = \"/\"\n[servers.srv.tools.write_text]\neffects = [\"write\"]\npaths = { path = \"write\" }\n",
            "root `/` must be a folder inside the served root",
        ),
        (
            "[servers.srv]\ncommand = \"srv-mcp\"\n[servers.srv.tools.write_text]\neffects = []\npaths = { path = \"write\" }\n",
            "`effects = []` is refused",
        ),
        (
            "[servers.srv]\ncommand = \"srv-mcp\"\n[servers.srv.tools.write_text]\neffects = [\"write\"]\n",
            "the argument `path` may name a file or a place",
        ),
    ] {
        let tree = permissive();
        with_server(&tree, toml, &[("write_text", write.clone())]);
        let run = tree.run(&["policy", "validate"]);
        assert_eq!(run.code, 3, "{toml}: {run:?}");
        assert!(run.stderr.contains(named), "{toml}: {run:?}");
    }
}

#[test]
fn a_tool_no_entry_declares_has_its_places_judged_as_written() {
    let tree = permissive();
    with_server(
        &tree,
        "[servers.srv]\ncommand = \"srv-mcp\"\n",
        &[(
            "write_text",
            json!({"path": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}}),
        )],
    );
    let root = tempfile::tempdir().unwrap();
    for args in [
        json!({"path": "/etc/passwd"}),
        json!({"path": "../x"}),
        json!({"files": ["a.txt", "../x"]}),
    ] {
        let run = check(&tree, root.path(), "srv/write_text", args.clone());
        assert_eq!(run.code, 2, "{args}: {run:?}");
        assert!(
            run.stdout.contains("hard.no_write_outside_root"),
            "{args}: {run:?}"
        );
    }
}

#[test]
fn a_server_root_that_leads_out_through_a_link_is_refused_by_check() {
    let tree = permissive();
    with_server(
        &tree,
        "[servers.srv]\ncommand = \"srv-mcp\"\nroot = \"data\"\n[servers.srv.tools.write_text]\neffects = [\"write\"]\npaths = { path = \"write\" }\n",
        &[("write_text", json!({"path": {"type": "string"}}))],
    );
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("data")).unwrap();
    let run = check(&tree, root.path(), "srv/write_text", json!({"path": "x"}));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("resolves outside the served root"),
        "{run:?}"
    );
}

#[test]
fn a_hand_written_applied_list_lets_nothing_through_policy_apply_needs_the_log() {
    // `policy apply` of a set that does not load records nothing; one that
    // loads appends a signed record (the live refusal of a hand-written
    // list is in reload.rs).
    let tree = permissive();
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("audit/audit.jsonl");
    fs::create_dir_all(log.parent().unwrap()).unwrap();
    let store = state.path().join("tokens.json");
    let run = tree.run(&[
        "--format",
        "json",
        "policy",
        "apply",
        "--audit",
        log.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let answer = run.json();
    let records: Vec<serde_json::Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let applied = &records[usize::try_from(answer["record"].as_u64().unwrap()).unwrap() - 1];
    assert_eq!(applied["body"]["event"], "policy_apply");
    assert_eq!(applied["body"]["policy_set"], answer["policy_set"]);
    assert_eq!(
        records.last().unwrap()["kind"],
        "checkpoint",
        "covered by a signed checkpoint"
    );
    let verified = portcullis(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{verified:?}");
}
