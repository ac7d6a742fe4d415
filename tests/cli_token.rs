use std::os::unix::fs::PermissionsExt;

use crate::util::portcullis;

fn store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.json").display().to_string();
    (dir, path)
}

#[test]
fn create_prints_the_token_once_and_list_shows_only_its_fingerprint() {
    let (_dir, store) = store();
    let run = portcullis(&["token", "create", "claude-code", "--store", &store]);
    assert_eq!(run.code, 0, "{run:?}");
    let token = run.stdout.trim().to_owned();
    assert!(token.starts_with("pcl_") && token.len() == 68, "{run:?}");
    assert!(run.stderr.contains("tier paired"), "{run:?}");
    assert_eq!(
        std::fs::metadata(&store).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let list = portcullis(&["token", "list", "--store", &store, "--format", "json"]);
    assert_eq!(list.code, 0, "{list:?}");
    let client = &list.json()["clients"][0];
    assert_eq!(client["name"], "claude-code");
    assert_eq!(client["tier"], "paired");
    assert_eq!(client["fingerprint"].as_str().unwrap().len(), 16);
    assert!(!list.stdout.contains(&token[4..]));
    // For people: a header, then a line per client.
    let human = portcullis(&["token", "list", "--store", &store]);
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{human:?}");
    for column in ["NAME", "TIER", "FINGERPRINT", "CREATED"] {
        assert!(lines[0].contains(column), "{human:?}");
    }
    assert!(lines[1].starts_with("claude-code"), "{human:?}");
    assert!(
        !std::fs::read_to_string(&store)
            .unwrap()
            .contains(&token[4..])
    );
}

#[test]
fn create_refuses_owner_unknown_tiers_bad_names_and_duplicates() {
    let (_dir, store) = store();
    let run = portcullis(&["token", "create", "a", "--tier", "owner", "--store", &store]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("never get the `owner` tier"), "{run:?}");
    let run = portcullis(&["token", "create", "a", "--tier", "admin", "--store", &store]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("admin"), "{run:?}");
    let run = portcullis(&["token", "create", "a/b", "--store", &store]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        portcullis(&["token", "create", "a", "--store", &store]).code,
        0
    );
    let run = portcullis(&["token", "create", "a", "--store", &store]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("already exists"), "{run:?}");
}

#[test]
fn revoke_removes_and_refuses_unknown_names() {
    let (_dir, store) = store();
    assert_eq!(
        portcullis(&["token", "create", "a", "--store", &store]).code,
        0
    );
    let run = portcullis(&["token", "revoke", "a", "--store", &store]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = portcullis(&["token", "revoke", "a", "--store", &store]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("no client named `a`"), "{run:?}");
}

#[test]
fn a_loose_store_is_refused_by_every_command() {
    let (_dir, store) = store();
    assert_eq!(
        portcullis(&["token", "create", "a", "--store", &store]).code,
        0
    );
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = portcullis(&["token", "list", "--store", &store]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("chmod 600"), "{run:?}");
}

#[test]
fn the_demo_shows_each_decision_and_nothing_escapes() {
    let run = portcullis(&["demo", "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["escaped"], false);
    let codes: Vec<&str> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["result"]["reason_code"].as_str().unwrap_or("allowed"))
        .collect();
    assert_eq!(
        codes,
        [
            "allowed",
            "forbidden",
            "not_permitted",
            "approval_unavailable"
        ]
    );
    let human = portcullis(&["demo"]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human
            .stdout
            .contains("DENY (forbidden, hard.no_write_outside_root)"),
        "{human:?}"
    );
}
