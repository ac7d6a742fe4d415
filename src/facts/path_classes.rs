//! Path classes: named glob sets from `policies/path_classes.toml`, turned
//! into `context.path_classes` so that policies can say "never secrets"
//! without knowing file names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PathClassError {
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: class `{class}`: the name must be a lower-case identifier (a-z, 0-9, _)")]
    BadName { file: String, class: String },
    #[error(
        "{file}: class `{class}`: the built-in glob `{glob}` is missing; the built-in classes are a \
         floor a team's table may add to, never take from (to let a tool read such a file, write a \
         Cedar permit on that class for that tool)"
    )]
    Floor {
        file: String,
        class: String,
        glob: String,
    },
    #[error("{file}: class `{class}` has no globs")]
    NoGlobs { file: String, class: String },
    #[error("{file}: class `{class}`: glob `{glob}`: {message}")]
    BadGlob {
        file: String,
        class: String,
        glob: String,
        message: String,
    },
}

fn read(file: &str, text: &str) -> Result<BTreeMap<String, ClassEntry>, PathClassError> {
    toml::from_str(text).map_err(|err| PathClassError::Syntax {
        file: file.to_owned(),
        message: err.to_string().trim_end().to_owned(),
    })
}

/// What a change to the path classes newly permits, entry by entry: a
/// class removed, or a glob dropped from one, takes paths out of a class a
/// policy may refuse. A table that does not read on one side is one
/// loosening.
pub fn path_class_loosenings(old: &str, new: &str) -> Vec<(String, String)> {
    let (Ok(old), Ok(new)) = (read("old", old), read("new", new)) else {
        return vec![(
            "the table".to_owned(),
            "does not read on one side, so nothing of it can be compared".to_owned(),
        )];
    };
    let mut found = Vec::new();
    for (class, entry) in &old {
        let Some(theirs) = new.get(class) else {
            found.push((
                format!("class `{class}`"),
                format!("removed: no path is `{class}` any more"),
            ));
            continue;
        };
        for glob in entry
            .globs
            .iter()
            .filter(|glob| !theirs.globs.contains(glob))
        {
            found.push((
                format!("class `{class}`"),
                format!("drops `{glob}`: paths it matched may no longer be `{class}`"),
            ));
        }
    }
    found
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassEntry {
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "documentation for the people who edit the table; parsed so a misspelt key is an error"
    )]
    description: Option<String>,
    globs: Vec<String>,
}

/// The compiled table: one glob set, and for each glob the class it names.
#[derive(Debug, Clone)]
pub struct PathClasses {
    set: GlobSet,
    class_of_glob: Vec<String>,
    names: Vec<String>,
}

/// The built-in path classes, as shipped in `policies/path_classes.toml`:
/// every glob of every class in it is a floor a team's table may add to,
/// never take from (a team that needs an agent to read one such file
/// writes an audited Cedar permit on that class for that tool).
pub const BUILTIN_PATH_CLASSES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/policies/path_classes.toml"
));

/// The globs of one built-in class, as shipped (none for a class the
/// built-in table does not define): read once.
pub fn builtin_class_globs(class: &str) -> &'static [String] {
    static TABLE: std::sync::OnceLock<BTreeMap<String, ClassEntry>> = std::sync::OnceLock::new();
    TABLE
        // The built-in table is part of the binary, and a unit test parses
        // it: it cannot fail to read here.
        .get_or_init(|| read("<builtin>", BUILTIN_PATH_CLASSES).unwrap_or_default())
        .get(class)
        .map_or(&[], |entry| entry.globs.as_slice())
}

impl PathClasses {
    /// Parses a team's table; `file` names it in errors. A table that
    /// drops a built-in class or one of its globs is refused.
    pub fn parse(file: &str, text: &str) -> Result<Self, PathClassError> {
        let table = read(file, text)?;
        let builtin = read("<builtin>/policies/path_classes.toml", BUILTIN_PATH_CLASSES)?;
        for (class, entry) in &builtin {
            let theirs = table
                .get(class)
                .map(|e| e.globs.as_slice())
                .unwrap_or_default();
            if let Some(glob) = entry.globs.iter().find(|glob| !theirs.contains(glob)) {
                return Err(PathClassError::Floor {
                    file: file.to_owned(),
                    class: class.clone(),
                    glob: glob.clone(),
                });
            }
        }
        Self::compile(file, table)
    }

    /// Parses a table recorded in an audit snapshot, as it was accepted
    /// when it was recorded: replay decides from the recorded facts.
    pub fn parse_recorded(file: &str, text: &str) -> Result<Self, PathClassError> {
        Self::compile(file, read(file, text)?)
    }

    fn compile(file: &str, table: BTreeMap<String, ClassEntry>) -> Result<Self, PathClassError> {
        let mut builder = GlobSetBuilder::new();
        let mut class_of_glob = Vec::new();
        for (class, entry) in &table {
            let valid_name = class.starts_with(|c: char| c.is_ascii_lowercase())
                && class
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !valid_name {
                return Err(PathClassError::BadName {
                    file: file.to_owned(),
                    class: class.clone(),
                });
            }
            if entry.globs.is_empty() {
                return Err(PathClassError::NoGlobs {
                    file: file.to_owned(),
                    class: class.clone(),
                });
            }
            for glob in &entry.globs {
                let compiled = GlobBuilder::new(glob)
                    .literal_separator(true)
                    .case_insensitive(true)
                    .build()
                    .map_err(|err| PathClassError::BadGlob {
                        file: file.to_owned(),
                        class: class.clone(),
                        glob: glob.clone(),
                        message: err.kind().to_string(),
                    })?;
                builder.add(compiled);
                class_of_glob.push(class.clone());
            }
        }
        let set = builder.build().map_err(|err| PathClassError::Syntax {
            file: file.to_owned(),
            message: err.to_string(),
        })?;
        Ok(Self {
            set,
            class_of_glob,
            names: table.into_keys().collect(),
        })
    }

    /// The class names the table defines, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Adds to `out` the classes `path` falls in, by its bytes and by its
    /// compatibility-normalized, case-folded name: `deploy.\u{212a}EY`
    /// (a Kelvin sign) is the `deploy.KEY` a server or a file system may
    /// map it to, so it is a secret as that is.
    pub fn classify_into(&self, path: &Path, out: &mut BTreeSet<String>) {
        self.match_into(path, out);
        if let Some(text) = path.to_str().filter(|t| !t.is_ascii()) {
            let folded = folded(text);
            if folded != text {
                self.match_into(Path::new(&folded), out);
            }
        }
    }

    fn match_into(&self, path: &Path, out: &mut BTreeSet<String>) {
        for index in self.set.matches(path) {
            if let Some(class) = self.class_of_glob.get(index) {
                out.insert(class.clone());
            }
        }
    }
}

/// NFKC, lower case, NFKC again (lower-casing can undo a composition):
/// the name every alias of it comes to.
pub(crate) fn folded(text: &str) -> String {
    let nfkc = icu_normalizer::ComposingNormalizerBorrowed::new_nfkc();
    nfkc.normalize(&nfkc.normalize(text).to_lowercase())
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(table: &str, path: &str) -> BTreeSet<String> {
        let table = PathClasses::parse_recorded("t.toml", table).unwrap();
        let mut out = BTreeSet::new();
        table.classify_into(Path::new(path), &mut out);
        out
    }

    const TABLE: &str = r#"
        [secrets]
        globs = ["**/.env", "**/*.pem", "**/id_rsa*", "**/.ssh/**"]
        [docs]
        description = "documentation"
        globs = ["**/*.md"]
    "#;

    #[test]
    fn an_alias_of_a_secret_by_normalization_or_case_is_a_secret() {
        for alias in [
            "/k/\u{ff49}d_rsa.pub",
            "/w/.\u{ff45}nv",
            "/w/\u{ff0e}env",
            "/home/a/.\u{0053}SH/config",
            "/home/a/.ss\u{0127}/x",
        ] {
            let found = classes(TABLE, alias);
            let expected = !alias.contains('\u{0127}');
            assert_eq!(found.contains("secrets"), expected, "{alias:?}: {found:?}");
        }
        assert!(classes(TABLE, "/w/caf\u{e9}.md").contains("docs"));
        // The Kelvin sign a server maps to `K`, against the built-in table.
        let builtin = PathClasses::parse("path_classes.toml", BUILTIN_PATH_CLASSES).unwrap();
        let mut found = BTreeSet::new();
        builtin.classify_into(Path::new("/w/deploy.\u{212a}EY"), &mut found);
        assert!(found.contains("secrets"), "{found:?}");
    }

    #[test]
    fn matches_absolute_and_relative_paths() {
        assert_eq!(
            classes(TABLE, "/home/a/ws/.env"),
            BTreeSet::from(["secrets".into()])
        );
        assert_eq!(classes(TABLE, ".env"), BTreeSet::from(["secrets".into()]));
        assert_eq!(
            classes(TABLE, "/home/a/.ssh/config"),
            BTreeSet::from(["secrets".into()])
        );
        assert_eq!(
            classes(TABLE, "keys/id_rsa.pub"),
            BTreeSet::from(["secrets".into()])
        );
        assert_eq!(classes(TABLE, "README.md"), BTreeSet::from(["docs".into()]));
        assert!(classes(TABLE, "src/main.rs").is_empty());
    }

    #[test]
    fn star_does_not_cross_folders() {
        let table = r#"
            [top]
            globs = ["src/*.rs"]
        "#;
        assert_eq!(classes(table, "src/a.rs").len(), 1);
        assert!(classes(table, "src/deep/a.rs").is_empty());
    }

    #[test]
    fn case_is_ignored() {
        assert_eq!(
            classes(TABLE, "CERT.PEM"),
            BTreeSet::from(["secrets".into()])
        );
    }

    #[test]
    fn a_bad_glob_names_its_class_and_glob() {
        let err = PathClasses::parse_recorded("t.toml", "[x]\nglobs = [\"a[\"]").unwrap_err();
        assert!(
            matches!(&err, PathClassError::BadGlob { class, glob, .. } if class == "x" && glob == "a["),
            "{err}"
        );
    }

    #[test]
    fn a_bad_name_is_refused() {
        let err = PathClasses::parse_recorded("t.toml", "[Secrets]\nglobs = [\"a\"]").unwrap_err();
        assert!(matches!(err, PathClassError::BadName { .. }));
    }

    #[test]
    fn an_empty_class_is_refused() {
        let err = PathClasses::parse_recorded("t.toml", "[x]\nglobs = []").unwrap_err();
        assert!(matches!(err, PathClassError::NoGlobs { .. }));
    }

    #[test]
    fn a_misspelt_key_is_refused_with_the_file_name() {
        let err = PathClasses::parse_recorded("t.toml", "[x]\nglob = [\"a\"]").unwrap_err();
        assert!(err.to_string().starts_with("t.toml: "), "{err}");
    }

    #[test]
    fn toml_syntax_errors_are_refused() {
        assert!(PathClasses::parse_recorded("t.toml", "[x\nglobs = 1").is_err());
    }
}

#[cfg(test)]
mod default_secrets {
    use super::*;

    fn shipped() -> PathClasses {
        PathClasses::parse("path_classes.toml", BUILTIN_PATH_CLASSES).unwrap()
    }

    fn is_secret(table: &PathClasses, path: &str) -> bool {
        let mut out = BTreeSet::new();
        table.classify_into(Path::new(path), &mut out);
        out.contains("secrets")
    }

    #[test]
    fn every_default_secret_is_a_secret_wherever_it_lies() {
        let table = shipped();
        for name in [
            ".env",
            ".env.production",
            ".envrc",
            "server.pem",
            "server.pem.bak",
            "deploy.key",
            "deploy.key.old",
            "cert.p12",
            "cert.pfx",
            "vault.kdbx",
            "id_rsa",
            "id_ed25519.pub",
            ".ssh",
            ".ssh/config",
            ".gnupg",
            ".gnupg/pubring.kbx",
            ".aws",
            ".aws/config",
            ".aws/credentials",
            ".kube/config",
            ".config/gh/hosts.yml",
            ".netrc",
            "_netrc",
            ".pgpass",
            ".git-credentials",
            ".npmrc",
            ".pypirc",
            ".docker/config.json",
            "terraform.tfstate",
            "terraform.tfstate.backup",
            "credentials.json",
            "credentials-prod.json",
            ".vault-token",
            ".htpasswd",
            ".terraformrc",
            "release.jks",
            "app.keystore",
            ".cargo/credentials.toml",
            ".gem/credentials",
            ".config/gcloud/application_default_credentials.json",
            ".azure/accessTokens.json",
            ".password-store/bank.gpg",
            ".local/share/keyrings/login.keyring",
            ".bash_history",
            ".zsh_history",
            ".python_history",
        ] {
            assert!(is_secret(&table, name), "{name}");
            assert!(
                is_secret(&table, &format!("/home/a/ws/sub/{name}")),
                "{name}"
            );
            assert!(
                is_secret(&table, &name.to_ascii_uppercase()),
                "{name} in capitals"
            );
        }
        for system in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/sudoers.d/90-cloud",
            "/etc/ssl/private/server.key",
            "/proc/self/environ",
            "/proc/1/environ",
            "/proc/1/task/7/environ",
            "/run/secrets/db_password",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
        ] {
            assert!(is_secret(&table, system), "{system}");
        }
        for plain in [
            "/etc/passwd",
            "/etc/hosts",
            "/proc/cpuinfo",
            "/proc/self/status",
            "history.md",
            "src/main.rs",
            "README.md",
            "keys.md",
            "environment.rs",
            "sshd.txt",
        ] {
            assert!(!is_secret(&table, plain), "{plain}");
        }
    }

    #[test]
    fn a_team_table_may_add_to_the_builtin_secrets_never_take_from_them() {
        PathClasses::parse("t.toml", BUILTIN_PATH_CLASSES).unwrap();
        let added = format!("{BUILTIN_PATH_CLASSES}\n[drafts]\nglobs = [\"drafts/**\"]\n");
        PathClasses::parse("t.toml", &added).unwrap();
        let dropped = BUILTIN_PATH_CLASSES.replacen("  \"**/.env\",\n", "", 1);
        assert_ne!(dropped, BUILTIN_PATH_CLASSES);
        let err = PathClasses::parse("t.toml", &dropped).unwrap_err();
        assert!(
            matches!(&err, PathClassError::Floor { glob, .. } if glob == "**/.env"),
            "{err}"
        );
        assert!(
            err.to_string().starts_with("t.toml: class `secrets`"),
            "{err}"
        );
        let renamed = BUILTIN_PATH_CLASSES.replacen("[secrets]", "[credentials]", 1);
        assert!(PathClasses::parse("t.toml", &renamed).is_err());
        // A recorded table replays as it was accepted.
        PathClasses::parse_recorded("t.toml", &dropped).unwrap();
    }

    #[test]
    fn a_dropped_glob_or_class_is_a_loosening_an_added_one_is_not() {
        assert!(path_class_loosenings(BUILTIN_PATH_CLASSES, BUILTIN_PATH_CLASSES).is_empty());
        let more = format!("{BUILTIN_PATH_CLASSES}\n[drafts]\nglobs = [\"drafts/**\"]\n");
        assert!(path_class_loosenings(BUILTIN_PATH_CLASSES, &more).is_empty());
        let found = path_class_loosenings(&more, BUILTIN_PATH_CLASSES);
        assert_eq!(
            found,
            [(
                "class `drafts`".to_owned(),
                "removed: no path is `drafts` any more".to_owned()
            )]
        );
        let fewer = more.replace("globs = [\"drafts/**\"]", "globs = [\"other/**\"]");
        let found = path_class_loosenings(&more, &fewer);
        assert!(found[0].1.starts_with("drops `drafts/**`"), "{found:?}");
        assert_eq!(path_class_loosenings(&more, "[x").len(), 1);
    }
}
