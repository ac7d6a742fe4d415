//! The default policy set, built into the binary so that portcullis runs
//! with nothing on disk. `portcullis init` writes these files out.

macro_rules! file {
    ($logical:literal) => {
        (
            $logical,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $logical)),
        )
    };
}

pub const POLICIES: &[(&str, &str)] = &[
    file!("policies/10_tiers.cedar"),
    file!("policies/20_allowlist.cedar"),
    file!("policies/30_paths.cedar"),
    file!("policies/40_approvals.cedar"),
    file!("policies/50_commands.cedar"),
    file!("policies/60_harness.cedar"),
];

/// The hard constraints, always loaded: a team's folder cannot hold them.
pub const HARD_CONSTRAINTS: &str = include_str!("hard_constraints.cedar");

pub const SCHEMAS: &[(&str, &str)] = &[file!("schemas/portcullis.cedarschema")];

pub const TIERS: (&str, &str) = file!("policies/tiers.json");

pub const PATH_CLASSES: (&str, &str) = (
    "policies/path_classes.toml",
    crate::facts::BUILTIN_PATH_CLASSES,
);

/// The command table is the gate's floor too (`facts::command::floor`):
/// one copy of the text serves both.
pub const COMMANDS: (&str, &str) = (
    "policies/commands.toml",
    crate::facts::BUILTIN_COMMAND_TABLE,
);

pub const TESTS: &[(&str, &str)] = &[
    file!("policies/tests/hard_constraints.json"),
    file!("policies/tests/tiers.json"),
    file!("policies/tests/allowlist.json"),
    file!("policies/tests/paths.json"),
    file!("policies/tests/approvals.json"),
    file!("policies/tests/commands.json"),
    file!("policies/tests/harness.json"),
    file!("policies/tests/downstream.json"),
];

pub const TEST_ENTITIES: &[(&str, &str)] = &[file!("policies/tests/entities/fixtures.json")];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every file in policies/, schemas/ and policies/tests/ is embedded:
    /// a file added on disk but forgotten here would be silently missing
    /// from the binary's defaults.
    #[test]
    fn every_shipped_file_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut on_disk = BTreeSet::new();
        for dir in [
            "policies",
            "schemas",
            "policies/tests",
            "policies/tests/entities",
        ] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.is_file() {
                    on_disk.insert(format!(
                        "{dir}/{}",
                        path.file_name().unwrap().to_str().unwrap()
                    ));
                }
            }
        }
        let embedded: BTreeSet<String> = POLICIES
            .iter()
            .chain(SCHEMAS)
            .chain([&TIERS, &PATH_CLASSES, &COMMANDS])
            .chain(TESTS)
            .chain(TEST_ENTITIES)
            .map(|(logical, _)| (*logical).to_owned())
            .collect();
        assert_eq!(on_disk, embedded);
    }
}
