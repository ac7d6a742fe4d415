//! Shadow policies (`policies/shadow/*.cedar`): decided beside the
//! enforced set for every request, recorded where they differ, listed by
//! `audit show --shadow-diff`, and never enforced.

use std::fs;

use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served, Session, portcullis};

const SHADOW_FORBID: &str = r#"
@id("shadow.no_reading_readme")
@reason("trying out: nobody reads the README")
forbid (
  principal,
  action == Portcullis::Action::"builtin/read_file",
  resource
)
when { context.input.path == "README.md" };
"#;

fn call(session: &mut Session, id: u64, tool: &str, arguments: Value) -> Value {
    session.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}})
        .to_string(),
    );
    session.next()
}

fn shadowed(shadow_files: &[(&str, &str)]) -> Served {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let folder = served.tree.policies().join("shadow");
    fs::create_dir_all(&folder).unwrap();
    for (name, text) in shadow_files {
        fs::write(folder.join(name), text).unwrap();
    }
    served
}

#[test]
fn a_shadow_forbid_changes_no_outcome_and_shows_in_the_shadow_diff() {
    let served = shadowed(&[("90_try.cedar", SHADOW_FORBID)]);
    let mut session = Session::start(&served);
    session.initialize();
    let readme = call(&mut session, 1, "read_file", json!({"path": "README.md"}));
    assert_eq!(
        readme["result"]["isError"], false,
        "enforced: allowed {readme}"
    );
    let other = call(&mut session, 2, "list_dir", json!({"path": "."}));
    assert_eq!(other["result"]["isError"], false, "{other}");
    session.finish();

    let decisions: Vec<Value> = served
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "decision")
        .map(|r| r["body"].clone())
        .collect();
    let read = decisions
        .iter()
        .find(|d| d["resource"] == "builtin/read_file" && d["action"] == "call_tool")
        .unwrap();
    assert_eq!(read["decision"], "allow");
    assert_eq!(read["shadow"]["decision"], "deny", "{read}");
    assert_eq!(read["shadow"]["cause"], "forbidden", "{read}");
    assert_eq!(
        read["shadow"]["policies"][0]["id"], "shadow.no_reading_readme",
        "{read}"
    );
    let listed = decisions
        .iter()
        .find(|d| d["resource"] == "builtin/list_dir" && d["action"] == "call_tool")
        .unwrap();
    assert!(
        listed.get("shadow").is_none(),
        "the same decision: {listed}"
    );

    let log = served.audit_log();
    let log = log.to_str().unwrap();
    let human = portcullis(&["audit", "show", log, "--shadow-diff"]);
    assert_eq!(human.code, 0, "{human:?}");
    let rows: Vec<&str> = human.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{human:?}");
    assert!(rows[0].contains("builtin/read_file"), "{human:?}");
    assert!(
        rows[0].contains("shadow: deny (shadow.no_reading_readme)"),
        "{human:?}"
    );
    let json = portcullis(&["audit", "show", log, "--shadow-diff", "--format", "json"]).json();
    assert_eq!(json.as_array().unwrap().len(), 1, "{json}");

    // The log verifies and replays: shadow files are part of the set.
    let replay = portcullis(&["audit", "replay", log, "--format", "json"]);
    assert_eq!(replay.code, 0, "{replay:?}");
    let summary = &replay.json()["summary"];
    assert_eq!(summary["same"], summary["redecided"], "{summary}");
    assert_eq!(
        summary["shadows_not_reproduced"],
        json!([]),
        "the recorded shadow decisions are made again: {summary}"
    );
}

#[test]
fn a_shadow_file_stands_in_for_the_enforced_file_of_its_name() {
    // The shadow allowlist permits nothing: every call the enforced one
    // allows would be refused.
    let served = shadowed(&[("20_allowlist.cedar", "// trying out: an empty allowlist\n")]);
    let mut session = Session::start(&served);
    session.initialize();
    let readme = call(&mut session, 1, "read_file", json!({"path": "README.md"}));
    assert_eq!(readme["result"]["isError"], false, "{readme}");
    session.finish();
    let read = served
        .records()
        .into_iter()
        .map(|r| r["body"].clone())
        .find(|d| d["resource"] == "builtin/read_file" && d["action"] == "call_tool")
        .unwrap();
    assert_eq!(read["decision"], "allow");
    assert_eq!(read["shadow"]["decision"], "deny", "{read}");
    assert_eq!(read["shadow"]["cause"], "not_permitted", "{read}");
}

#[test]
fn a_broken_shadow_policy_is_a_load_error_with_its_file() {
    let served = shadowed(&[(
        "90_try.cedar",
        "forbid (principal, action, resource) when { nonsense };",
    )]);
    let mut args = vec!["policy", "validate"];
    let flags = served.tree.flags();
    args.extend(flags.iter().map(String::as_str));
    let run = portcullis(&args);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("shadow/90_try.cedar"), "{run:?}");
}

#[test]
fn shadow_files_are_part_of_the_set_hash() {
    let plain = Served::new(ALLOW_BUILTIN, "paired");
    let shadowed = shadowed(&[("90_try.cedar", SHADOW_FORBID)]);
    let hash = |served: &Served| {
        let mut args = vec!["policy", "validate", "--format", "json"];
        let flags = served.tree.flags();
        args.extend(flags.iter().map(String::as_str));
        portcullis(&args).json()["policy_set"]["hash"].clone()
    };
    assert_ne!(hash(&plain), hash(&shadowed));
}
