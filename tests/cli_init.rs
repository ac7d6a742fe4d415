use std::fs;

use crate::util::{Tree, portcullis};

#[test]
fn init_writes_a_tree_that_validates_and_tests() {
    let tree = Tree::new();
    for file in [
        "builtin/hard_constraints.cedar",
        "20_allowlist.cedar",
        "tiers.json",
        "path_classes.toml",
        "tests/paths.json",
        "tests/entities/fixtures.json",
    ] {
        assert!(tree.policies().join(file).is_file(), "{file}");
    }
    assert!(tree.schemas().join("portcullis.cedarschema").is_file());
    assert_eq!(tree.run(&["policy", "validate"]).code, 0);
    let run = tree.run(&["policy", "test"]);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn init_refuses_to_overwrite_and_changes_nothing() {
    let tree = Tree::new();
    let allowlist = tree.policies().join("20_allowlist.cedar");
    fs::write(&allowlist, "// mine\n").unwrap();
    let run = portcullis(&["init", tree.dir.path().to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("refusing to overwrite"), "{run:?}");
    assert_eq!(fs::read_to_string(&allowlist).unwrap(), "// mine\n");

    let run = portcullis(&["init", "--force", tree.dir.path().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_ne!(fs::read_to_string(&allowlist).unwrap(), "// mine\n");
}

#[test]
fn init_into_a_path_that_is_a_file_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, "x").unwrap();
    let run = portcullis(&["init", file.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.starts_with("error: "), "{run:?}");
}
