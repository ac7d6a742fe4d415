//! The files a policy set is made of, wherever they come from: a team's
//! folders, or the defaults built into the binary.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use thiserror::Error;

use super::defaults;

/// The file of tier entities, inside the policies folder.
pub const TIERS_FILE: &str = "tiers.json";
/// The table of path classes, inside the policies folder.
pub const PATH_CLASSES_FILE: &str = "path_classes.toml";
/// The command class table, inside the policies folder.
pub const COMMANDS_FILE: &str = "commands.toml";
/// The downstream MCP servers portcullis fronts, inside the policies
/// folder; optional.
pub const SERVERS_FILE: &str = "servers.toml";
/// The pinned definitions of the downstream servers' tools, inside the
/// policies folder; optional, written by `portcullis servers pin`.
pub const SERVERS_LOCK_FILE: &str = "servers.lock";
/// The folder of shadow policies, inside the policies folder: evaluated
/// beside the enforced set for every decision, never enforced.
pub const SHADOW_DIR: &str = "shadow";
/// The folder of fixture tests, inside the policies folder.
pub const TESTS_DIR: &str = "tests";
/// The folder of entity files that fixtures refer to, inside the tests folder.
pub const TEST_ENTITIES_DIR: &str = "entities";

#[derive(Debug, Error)]
pub enum BundleError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is missing")]
    Missing { path: PathBuf },
    #[error("{dir} holds no {what} files")]
    Empty { dir: PathBuf, what: &'static str },
    #[error("{path}: {problem}; rename the file")]
    BadName { path: PathBuf, problem: String },
    /// A stored set names a file that no deciding file can be.
    #[error("unexpected file {name}")]
    Unexpected { name: String },
}

/// A stored set without one of the files every set has.
fn missing(name: &str) -> BundleError {
    BundleError::Missing {
        path: Path::new("policies").join(name),
    }
}

/// How a set's files are framed when they are hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Names and lengths as decimal text, newline-separated. Names were not
    /// restricted, so a name holding a newline could forge the framing of
    /// the next file; sets recorded this way still verify and replay, with
    /// names now checked.
    V1,
    /// A count, then every name and every content prefixed by its length
    /// as eight big-endian bytes, after a version tag.
    V2,
}

impl Framing {
    pub const CURRENT: Self = Self::V2;

    pub fn number(self) -> u8 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }

    pub fn from_number(number: u8) -> Option<Self> {
        match number {
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            _ => None,
        }
    }
}

/// Why a logical file name cannot be part of a set: names reach the set
/// hash, snapshots and error messages, so they hold no control characters
/// and no `..`, and stay in the tree's own folders.
pub fn name_problem(logical: &str) -> Option<String> {
    if logical.is_empty() || logical.len() > 255 {
        return Some("a file name must have 1 to 255 bytes".to_owned());
    }
    if logical.chars().any(char::is_control) {
        return Some(
            "a file name may not hold control characters (a newline, a tab, ...)".to_owned(),
        );
    }
    if logical.starts_with('/')
        || logical
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Some("a file name may not be absolute or hold empty, `.` or `..` parts".to_owned());
    }
    None
}

/// Where `portcullis init` writes a copy of the built-in hard constraints,
/// for reading: the loader never reads it (it is not in the policies
/// folder itself).
pub const BUILTIN_COPY: &str = "policies/builtin/hard_constraints.cedar";

/// The logical name of the built-in hard constraints: it names the
/// portcullis version, so the set hash and the audit snapshot tell which
/// binary's constraints a decision was made under.
pub fn builtin_logical() -> String {
    format!(
        "builtin/portcullis-{}/hard_constraints.cedar",
        env!("CARGO_PKG_VERSION")
    )
}

/// The logical name of the built-in tools' definitions (`Registry::
/// builtin_definitions`), versioned like the hard constraints.
pub fn builtin_tools_logical() -> String {
    format!(
        "builtin/portcullis-{}/tools.json",
        env!("CARGO_PKG_VERSION")
    )
}

/// The built-in tools' definitions, made once per process: they are the
/// binary's own, and every bundle holds them.
fn builtin_definitions() -> &'static str {
    static DEFINITIONS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DEFINITIONS.get_or_init(crate::tools::Registry::builtin_definitions)
}

/// One file of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Where the file sits in a portcullis tree (`policies/10_tiers.cedar`,
    /// `schemas/portcullis.cedarschema`): the same whichever folder it was
    /// read from, so the set hash depends on content, not location.
    pub logical: String,
    /// What errors call the file: its path on disk, or `<builtin>/...`.
    pub display: String,
    pub text: String,
}

/// Every file a policy set is made of.
#[derive(Debug, Clone)]
pub struct PolicyBundle {
    /// Policies built into the binary (the hard constraints). A recorded
    /// set from before they were built in has none: its hard constraints
    /// are among its `policies`.
    pub builtin: Vec<SourceFile>,
    /// The built-in tools' definitions, which each tool's Cedar action and
    /// `context.input` type are generated from. A recorded set from before
    /// per-tool actions has none, and is decided with `call_tool` alone.
    pub tools: Option<SourceFile>,
    /// The team's policies.
    pub policies: Vec<SourceFile>,
    /// The team's shadow policies (`policies/shadow/*.cedar`): part of the
    /// set and its hash, so that a record's shadow outcome can be replayed,
    /// but never enforced (`shadow_set`).
    pub shadow: Vec<SourceFile>,
    pub schemas: Vec<SourceFile>,
    pub tiers: SourceFile,
    pub path_classes: SourceFile,
    pub commands: SourceFile,
    /// The downstream servers (`servers.toml`), when the team has any.
    pub servers: Option<SourceFile>,
    /// Their tools' pinned definitions (`servers.lock`), when pinned.
    pub servers_lock: Option<SourceFile>,
    /// Fixture tests (`policies/tests/*.json`); not part of the set hash.
    pub tests: Vec<SourceFile>,
    /// Entity files fixtures refer to (`policies/tests/entities/*.json`).
    pub test_entities: Vec<SourceFile>,
    /// How `hash` frames the files: the current framing, or the one a
    /// recorded set was hashed with.
    pub framing: Framing,
}

impl PolicyBundle {
    /// The defaults built into the binary: what `portcullis init` writes out.
    pub fn builtin() -> Self {
        let file = |logical: &str, text: &str| SourceFile {
            logical: logical.to_owned(),
            display: format!("<builtin>/{logical}"),
            text: text.to_owned(),
        };
        let many = |files: &[(&str, &str)]| -> Vec<SourceFile> {
            files.iter().map(|(l, t)| file(l, t)).collect()
        };
        Self {
            builtin: vec![SourceFile {
                logical: builtin_logical(),
                display: format!(
                    "<builtin>/hard_constraints.cedar (portcullis {})",
                    env!("CARGO_PKG_VERSION")
                ),
                text: defaults::HARD_CONSTRAINTS.to_owned(),
            }],
            tools: Some(SourceFile {
                logical: builtin_tools_logical(),
                display: format!(
                    "<builtin>/tools.json (portcullis {})",
                    env!("CARGO_PKG_VERSION")
                ),
                text: builtin_definitions().to_owned(),
            }),
            policies: many(defaults::POLICIES),
            shadow: Vec::new(),
            schemas: many(defaults::SCHEMAS),
            tiers: file(defaults::TIERS.0, defaults::TIERS.1),
            path_classes: file(defaults::PATH_CLASSES.0, defaults::PATH_CLASSES.1),
            commands: file(defaults::COMMANDS.0, defaults::COMMANDS.1),
            servers: None,
            servers_lock: None,
            tests: many(defaults::TESTS),
            test_entities: many(defaults::TEST_ENTITIES),
            framing: Framing::CURRENT,
        }
    }

    /// Reads a policies folder and a schema folder. Either may be `None`,
    /// meaning the built-in defaults for that part.
    pub fn load(
        policies_dir: Option<&Path>,
        schema_dir: Option<&Path>,
    ) -> Result<Self, BundleError> {
        let mut bundle = Self::builtin();
        if let Some(dir) = policies_dir {
            bundle.policies = read_dir_files(dir, "policies", "cedar")?;
            if bundle.policies.is_empty() {
                return Err(BundleError::Empty {
                    dir: dir.to_owned(),
                    what: ".cedar",
                });
            }
            bundle.shadow = read_dir_files_if_present(
                &dir.join(SHADOW_DIR),
                &format!("policies/{SHADOW_DIR}"),
                "cedar",
            )?;
            bundle.tiers = read_file(dir, "policies", TIERS_FILE)?;
            bundle.path_classes = read_file(dir, "policies", PATH_CLASSES_FILE)?;
            bundle.commands = read_file(dir, "policies", COMMANDS_FILE)?;
            bundle.servers = read_optional_file(dir, "policies", SERVERS_FILE)?;
            bundle.servers_lock = read_optional_file(dir, "policies", SERVERS_LOCK_FILE)?;
            let tests = dir.join(TESTS_DIR);
            bundle.tests = read_dir_files_if_present(&tests, "policies/tests", "json")?;
            bundle.test_entities = read_dir_files_if_present(
                &tests.join(TEST_ENTITIES_DIR),
                "policies/tests/entities",
                "json",
            )?;
        }
        if let Some(dir) = schema_dir {
            bundle.schemas = read_dir_files(dir, "schemas", "cedarschema")?;
            if bundle.schemas.is_empty() {
                return Err(BundleError::Empty {
                    dir: dir.to_owned(),
                    what: ".cedarschema",
                });
            }
        }
        Ok(bundle)
    }

    /// A bundle from deciding files named by their place in the tree
    /// (`policies/x.cedar`, `schemas/x.cedarschema`, `policies/tiers.json`,
    /// `policies/path_classes.toml`), as a policy snapshot stores them,
    /// hashed with the framing they were recorded with.
    pub fn from_files(files: Vec<SourceFile>, framing: Framing) -> Result<Self, BundleError> {
        let mut builtin = Vec::new();
        let mut tools = None;
        let mut policies = Vec::new();
        let mut shadow = Vec::new();
        let mut schemas = Vec::new();
        let mut tiers = None;
        let mut path_classes = None;
        let mut commands = None;
        let mut servers = None;
        let mut servers_lock = None;
        for file in files {
            let logical = file.logical.as_str();
            if let Some(problem) = name_problem(logical) {
                return Err(BundleError::BadName {
                    path: PathBuf::from(logical),
                    problem,
                });
            }
            if logical == format!("policies/{TIERS_FILE}") {
                tiers = Some(file);
            } else if logical == format!("policies/{PATH_CLASSES_FILE}") {
                path_classes = Some(file);
            } else if logical == format!("policies/{COMMANDS_FILE}") {
                commands = Some(file);
            } else if logical == format!("policies/{SERVERS_FILE}") {
                servers = Some(file);
            } else if logical == format!("policies/{SERVERS_LOCK_FILE}") {
                servers_lock = Some(file);
            } else if logical.starts_with("builtin/") && logical.ends_with("/tools.json") {
                tools = Some(file);
            } else if logical.starts_with("builtin/") && logical.ends_with(".cedar") {
                builtin.push(file);
            } else if logical.starts_with(&format!("policies/{SHADOW_DIR}/"))
                && logical.ends_with(".cedar")
            {
                shadow.push(file);
            } else if logical.starts_with("policies/") && logical.ends_with(".cedar") {
                policies.push(file);
            } else if logical.starts_with("schemas/") && logical.ends_with(".cedarschema") {
                schemas.push(file);
            } else {
                return Err(BundleError::Unexpected {
                    name: logical.to_owned(),
                });
            }
        }
        policies.sort_by(|a, b| a.logical.cmp(&b.logical));
        shadow.sort_by(|a, b| a.logical.cmp(&b.logical));
        schemas.sort_by(|a, b| a.logical.cmp(&b.logical));
        Ok(Self {
            builtin,
            tools,
            policies,
            shadow,
            schemas,
            tiers: tiers.ok_or_else(|| missing(TIERS_FILE))?,
            path_classes: path_classes.ok_or_else(|| missing(PATH_CLASSES_FILE))?,
            commands: commands.ok_or_else(|| missing(COMMANDS_FILE))?,
            servers,
            servers_lock,
            tests: Vec::new(),
            test_entities: Vec::new(),
            framing,
        })
    }

    /// Every file that decides: built-in and team policies, schema, tiers,
    /// path classes, command table, downstream servers and their pins (not
    /// the fixture tests), in a fixed order.
    pub fn deciding_files(&self) -> impl Iterator<Item = &SourceFile> {
        self.builtin
            .iter()
            .chain(self.tools.iter())
            .chain(self.team_deciding_files())
    }

    /// The set the shadow policies make: each shadow file stands in for
    /// the enforced file of the same name, the others are added. `None`
    /// without shadow policies.
    pub fn shadow_set(&self) -> Option<Self> {
        if self.shadow.is_empty() {
            return None;
        }
        let mut set = self.clone();
        set.shadow = Vec::new();
        for file in &self.shadow {
            let name = file.logical.rsplit('/').next().unwrap_or_default();
            let enforced = format!("policies/{name}");
            match set.policies.iter_mut().find(|p| p.logical == enforced) {
                Some(replaced) => *replaced = file.clone(),
                None => set.policies.push(file.clone()),
            }
        }
        Some(set)
    }

    /// Every policy, built-in ones first.
    pub fn all_policies(&self) -> impl Iterator<Item = &SourceFile> {
        self.builtin.iter().chain(self.policies.iter())
    }

    fn team_deciding_files(&self) -> impl Iterator<Item = &SourceFile> {
        self.policies
            .iter()
            .chain(self.shadow.iter())
            .chain(self.schemas.iter())
            .chain([&self.tiers, &self.path_classes, &self.commands])
            .chain(self.servers.iter())
            .chain(self.servers_lock.iter())
    }

    /// The files a team's tree holds, tests included: what `portcullis
    /// init` writes out (besides the read-only copy of the built-ins).
    pub fn team_files(&self) -> impl Iterator<Item = &SourceFile> {
        self.team_deciding_files()
            .chain(self.tests.iter())
            .chain(self.test_entities.iter())
    }

    /// SHA-256 over every deciding file, sorted by logical name, framed
    /// so that no two different sets share a preimage (`Framing`).
    pub fn hash(&self) -> String {
        let mut files: Vec<&SourceFile> = self.deciding_files().collect();
        files.sort_by(|a, b| a.logical.cmp(&b.logical));
        let mut hasher = Sha256::new();
        match self.framing {
            Framing::V1 => {
                hasher.update(b"portcullis policy set v1\n");
                for file in files {
                    hasher.update(file.logical.as_bytes());
                    hasher.update(b"\n");
                    hasher.update(file.text.len().to_string().as_bytes());
                    hasher.update(b"\n");
                    hasher.update(file.text.as_bytes());
                }
            }
            Framing::V2 => {
                let framed = |hasher: &mut Sha256, bytes: &[u8]| {
                    hasher.update((bytes.len() as u64).to_be_bytes());
                    hasher.update(bytes);
                };
                hasher.update(b"portcullis policy set v2\n");
                hasher.update((files.len() as u64).to_be_bytes());
                for file in files {
                    framed(&mut hasher, file.logical.as_bytes());
                    framed(&mut hasher, file.text.as_bytes());
                }
            }
        }
        hex::encode(hasher.finalize())
    }
}

fn read_file(dir: &Path, logical_dir: &str, name: &str) -> Result<SourceFile, BundleError> {
    let path = dir.join(name);
    let text = fs::read_to_string(&path).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            BundleError::Missing { path: path.clone() }
        } else {
            BundleError::Io {
                path: path.clone(),
                source,
            }
        }
    })?;
    Ok(SourceFile {
        logical: format!("{logical_dir}/{name}"),
        display: path.display().to_string(),
        text,
    })
}

/// A file a set may do without: `None` when it does not exist.
fn read_optional_file(
    dir: &Path,
    logical_dir: &str,
    name: &str,
) -> Result<Option<SourceFile>, BundleError> {
    match read_file(dir, logical_dir, name) {
        Ok(file) => Ok(Some(file)),
        Err(BundleError::Missing { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// The files of `dir` ending in `.{extension}`, sorted by name.
fn read_dir_files(
    dir: &Path,
    logical_dir: &str,
    extension: &str,
) -> Result<Vec<SourceFile>, BundleError> {
    let io_error = |source| BundleError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == extension) && path.is_file() {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                return Err(BundleError::BadName {
                    path,
                    problem: "the file name is not UTF-8".to_owned(),
                });
            };
            if let Some(problem) = name_problem(&format!("{logical_dir}/{name}")) {
                return Err(BundleError::BadName { path, problem });
            }
            names.push(name.to_owned());
        }
    }
    names.sort();
    names
        .iter()
        .map(|name| read_file(dir, logical_dir, name))
        .collect()
}

fn read_dir_files_if_present(
    dir: &Path,
    logical_dir: &str,
    extension: &str,
) -> Result<Vec<SourceFile>, BundleError> {
    if dir.is_dir() {
        read_dir_files(dir, logical_dir, extension)
    } else {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_tree(dir: &Path, bundle: &PolicyBundle) {
        for file in bundle.team_files() {
            let path = dir.join(&file.logical);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, &file.text).unwrap();
        }
    }

    #[test]
    fn the_hash_depends_on_content_not_location() {
        let builtin = PolicyBundle::builtin();
        let dir = tempfile::tempdir().unwrap();
        write_tree(dir.path(), &builtin);
        let loaded = PolicyBundle::load(
            Some(&dir.path().join("policies")),
            Some(&dir.path().join("schemas")),
        )
        .unwrap();
        assert_eq!(loaded.hash(), builtin.hash());
        assert_eq!(loaded.tests.len(), builtin.tests.len());
        assert!(
            loaded.policies[0]
                .display
                .starts_with(&dir.path().display().to_string())
        );
    }

    fn shadow_file(name: &str, text: &str) -> SourceFile {
        SourceFile {
            logical: format!("policies/{SHADOW_DIR}/{name}"),
            display: format!("policies/{SHADOW_DIR}/{name}"),
            text: text.to_owned(),
        }
    }

    #[test]
    fn shadow_files_load_hash_and_round_trip_through_a_snapshot() {
        let mut bundle = PolicyBundle::builtin();
        let dir = tempfile::tempdir().unwrap();
        bundle.shadow = vec![shadow_file("90_try.cedar", "// nothing yet\n")];
        write_tree(dir.path(), &bundle);
        let loaded = PolicyBundle::load(
            Some(&dir.path().join("policies")),
            Some(&dir.path().join("schemas")),
        )
        .unwrap();
        assert_eq!(loaded.shadow.len(), 1);
        assert_eq!(loaded.hash(), bundle.hash());
        assert_ne!(loaded.hash(), PolicyBundle::builtin().hash());
        let stored: Vec<SourceFile> = loaded.deciding_files().cloned().collect();
        let restored = PolicyBundle::from_files(stored, Framing::CURRENT).unwrap();
        assert_eq!(restored.shadow, loaded.shadow);
        assert_eq!(restored.policies, loaded.policies);
        assert_eq!(restored.hash(), loaded.hash());
    }

    #[test]
    fn a_shadow_file_stands_in_for_its_namesake_and_the_others_are_added() {
        let mut bundle = PolicyBundle::builtin();
        assert!(bundle.shadow_set().is_none());
        let replaced = bundle.policies[1]
            .logical
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned();
        bundle.shadow = vec![
            shadow_file(&replaced, "// replaced\n"),
            shadow_file("99_added.cedar", "// added\n"),
        ];
        let set = bundle.shadow_set().unwrap();
        assert!(set.shadow.is_empty());
        assert_eq!(set.policies.len(), bundle.policies.len() + 1);
        assert_eq!(set.policies[1].text, "// replaced\n");
        assert_eq!(
            set.policies.last().unwrap().logical,
            "policies/shadow/99_added.cedar"
        );
        assert_eq!(
            bundle.policies[1].text,
            PolicyBundle::builtin().policies[1].text
        );
    }

    #[test]
    fn any_change_to_a_deciding_file_changes_the_hash() {
        let builtin = PolicyBundle::builtin();
        let mut changed = builtin.clone();
        changed.tiers.text.push(' ');
        assert_ne!(changed.hash(), builtin.hash());
        let mut renamed = builtin.clone();
        renamed.policies[0].logical.push('x');
        assert_ne!(renamed.hash(), builtin.hash());
    }

    #[test]
    fn tests_do_not_change_the_hash() {
        let builtin = PolicyBundle::builtin();
        let mut changed = builtin.clone();
        changed.tests.clear();
        assert_eq!(changed.hash(), builtin.hash());
    }

    #[test]
    fn files_move_between_policies_and_the_hash_sees_it() {
        // Content moved from one file to another is a different set.
        let mut a = PolicyBundle::builtin();
        let mut b = a.clone();
        a.policies[0].text.push_str("//x");
        b.policies[1].text.push_str("//x");
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn a_name_holding_the_next_files_framing_is_refused_and_v2_separates_them() {
        let file = |logical: &str, text: &str| SourceFile {
            logical: logical.to_owned(),
            display: logical.to_owned(),
            text: text.to_owned(),
        };
        // Two files, and one file whose name carries the framing of the
        // second: the same bytes under v1.
        let mut two = PolicyBundle::builtin();
        two.policies.push(file("policies/zz1.cedar", ""));
        two.policies.push(file("policies/zz2.cedar", "x"));
        let mut one = PolicyBundle::builtin();
        one.policies
            .push(file("policies/zz1.cedar\n0\npolicies/zz2.cedar", "x"));
        two.framing = Framing::V1;
        one.framing = Framing::V1;
        assert_eq!(two.hash(), one.hash(), "the v1 collision");
        two.framing = Framing::V2;
        one.framing = Framing::V2;
        assert_ne!(two.hash(), one.hash());
        // Such a name cannot reach a set: not from a snapshot, not from disk.
        let files: Vec<SourceFile> = one.deciding_files().cloned().collect();
        let err = PolicyBundle::from_files(files, Framing::V1).unwrap_err();
        assert!(err.to_string().contains("control characters"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a\nb.cedar"), "").unwrap();
        let err = PolicyBundle::load(Some(dir.path()), None).unwrap_err();
        assert!(matches!(err, BundleError::BadName { .. }), "{err}");
    }

    #[test]
    fn a_recorded_framing_keeps_its_hash() {
        let current = PolicyBundle::builtin();
        let mut old = current.clone();
        old.framing = Framing::V1;
        assert_ne!(old.hash(), current.hash());
        let files: Vec<SourceFile> = old.deciding_files().cloned().collect();
        let rebuilt = PolicyBundle::from_files(files, Framing::V1).unwrap();
        assert_eq!(rebuilt.hash(), old.hash());
    }

    #[test]
    fn a_missing_folder_is_an_io_error() {
        let err = PolicyBundle::load(Some(Path::new("/nonexistent/policies")), None).unwrap_err();
        assert!(matches!(err, BundleError::Io { .. }));
    }

    #[test]
    fn a_folder_without_policies_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = PolicyBundle::load(Some(dir.path()), None).unwrap_err();
        assert!(matches!(err, BundleError::Empty { .. }));
    }

    #[test]
    fn a_missing_tiers_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.cedar"), "").unwrap();
        let err = PolicyBundle::load(Some(dir.path()), None).unwrap_err();
        assert!(
            matches!(&err, BundleError::Missing { path } if path.ends_with(TIERS_FILE)),
            "{err}"
        );
    }

    #[test]
    fn a_stored_set_with_a_stray_or_a_missing_file_is_refused_by_name() {
        let mut files: Vec<SourceFile> =
            PolicyBundle::builtin().deciding_files().cloned().collect();
        files.push(SourceFile {
            logical: "policies/notes.txt".into(),
            display: "policies/notes.txt".into(),
            text: "x".into(),
        });
        let err = PolicyBundle::from_files(files, Framing::V2).unwrap_err();
        assert!(
            matches!(&err, BundleError::Unexpected { name } if name == "policies/notes.txt"),
            "{err}"
        );
        let files: Vec<SourceFile> = PolicyBundle::builtin()
            .deciding_files()
            .filter(|f| f.logical != format!("policies/{TIERS_FILE}"))
            .cloned()
            .collect();
        let err = PolicyBundle::from_files(files, Framing::V2).unwrap_err();
        assert!(matches!(err, BundleError::Missing { .. }), "{err}");
        assert!(err.to_string().contains("tiers.json"), "{err}");
    }
}
