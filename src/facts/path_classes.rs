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

impl PathClasses {
    /// Parses the table; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, PathClassError> {
        let table: BTreeMap<String, ClassEntry> =
            toml::from_str(text).map_err(|err| PathClassError::Syntax {
                file: file.to_owned(),
                message: err.to_string().trim_end().to_owned(),
            })?;
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

    /// Adds to `out` the classes `path` falls in.
    pub fn classify_into(&self, path: &Path, out: &mut BTreeSet<String>) {
        for index in self.set.matches(path) {
            if let Some(class) = self.class_of_glob.get(index) {
                out.insert(class.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(table: &str, path: &str) -> BTreeSet<String> {
        let table = PathClasses::parse("t.toml", table).unwrap();
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
        let err = PathClasses::parse("t.toml", "[x]\nglobs = [\"a[\"]").unwrap_err();
        assert!(
            matches!(&err, PathClassError::BadGlob { class, glob, .. } if class == "x" && glob == "a["),
            "{err}"
        );
    }

    #[test]
    fn a_bad_name_is_refused() {
        let err = PathClasses::parse("t.toml", "[Secrets]\nglobs = [\"a\"]").unwrap_err();
        assert!(matches!(err, PathClassError::BadName { .. }));
    }

    #[test]
    fn an_empty_class_is_refused() {
        let err = PathClasses::parse("t.toml", "[x]\nglobs = []").unwrap_err();
        assert!(matches!(err, PathClassError::NoGlobs { .. }));
    }

    #[test]
    fn a_misspelt_key_is_refused_with_the_file_name() {
        let err = PathClasses::parse("t.toml", "[x]\nglob = [\"a\"]").unwrap_err();
        assert!(err.to_string().starts_with("t.toml: "), "{err}");
    }

    #[test]
    fn toml_syntax_errors_are_refused() {
        assert!(PathClasses::parse("t.toml", "[x\nglobs = 1").is_err());
    }
}

#[cfg(test)]
mod default_secrets {
    use super::*;

    fn shipped() -> PathClasses {
        let text = include_str!("../../policies/path_classes.toml");
        PathClasses::parse("path_classes.toml", text).unwrap()
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
}
