//! Whether a word of a git read may name a revision. `git diff HEAD~3`,
//! `git diff main` and `git grep TOKEN v1.0` print what a commit holds: a
//! file committed once and no longer tracked (a `.env` removed after it
//! was pushed) is printed though nothing in the working tree or the index
//! names it, and the gate reads no objects. So an operand that may name a
//! revision makes the read one of the history's, which is not proven. An
//! operand that cannot (a path, a pattern) leaves the read on the working
//! tree and the index, which the gate does read.
//!
//! A word may name one as `gitrevisions(7)` reads it: by revision syntax
//! (`HEAD~3`, `A..B`, `@{u}`, `:/fix`, `REV:path`), as an object name or a
//! prefix of one, as `git describe` prints one (`v1.0-3-gabc1234`), or as a
//! ref the repository has (`$GIT_DIR/NAME` holding one, `refs/NAME`, `refs/tags/NAME`,
//! `refs/heads/NAME`, `refs/remotes/NAME`, `refs/remotes/NAME/HEAD`, loose
//! or in `packed-refs`). A ref store the gate does not read (`reftable`),
//! or one it cannot, counts as naming every word.

use std::path::{Path, PathBuf};

use super::git_config;
use crate::facts::repository_file;

/// More than the refs the gate reads through in `packed-refs`: a larger
/// file may name any word.
const MAX_PACKED_REFS_BYTES: u64 = 64 << 20;

/// What a repository's refs are read from, read once for every word of a
/// judgement: the common directory, whether refs are in a store the gate
/// does not read, and `packed-refs` (up to 64 MiB).
pub struct Refs {
    git_dir: PathBuf,
    /// `None`: the common directory cannot be found, so any word may name
    /// a ref, as it may in a `reftable` store.
    common: Option<PathBuf>,
    packed: Packed,
}

enum Packed {
    Absent,
    Text(String),
    /// There, but not read (too large, not a regular file): any word may
    /// be in it.
    Unreadable,
}

impl Refs {
    pub fn read(git_dir: &Path) -> Self {
        let common =
            git_config::common_dir(git_dir).filter(|common| !common.join("reftable").exists());
        let packed = match &common {
            None => Packed::Unreadable,
            Some(common) => {
                match repository_file::read_text(&common.join("packed-refs"), MAX_PACKED_REFS_BYTES)
                {
                    Ok(text) => Packed::Text(text),
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => Packed::Absent,
                    Err(_) => Packed::Unreadable,
                }
            }
        };
        Self {
            git_dir: git_dir.to_path_buf(),
            common,
            packed,
        }
    }

    /// Whether `word` may name a revision of the repository.
    pub fn may_name_a_revision(&self, word: &str) -> bool {
        by_its_form(word).unwrap_or_else(|| self.names_a_ref(word))
    }

    /// Whether the repository may have notes (`refs/notes/...`), which
    /// `git log` prints under each commit they annotate: a note is any
    /// blob (`git notes add -C HEAD~1:.env`), a file from history. A
    /// `refs/notes` folder with anything in it counts, as does a ref store
    /// the gate does not read.
    pub fn has_notes(&self) -> bool {
        let Some(common) = &self.common else {
            return true;
        };
        let loose = [self.git_dir.as_path(), common.as_path()]
            .iter()
            .any(|dir| match std::fs::read_dir(dir.join("refs/notes")) {
                Ok(mut entries) => entries.next().is_some(),
                Err(err) => err.kind() != std::io::ErrorKind::NotFound,
            });
        loose
            || match &self.packed {
                Packed::Absent => false,
                Packed::Unreadable => true,
                Packed::Text(packed) => packed.lines().any(|line| {
                    line.split_once(' ')
                        .is_some_and(|(_, name)| name.starts_with("refs/notes/"))
                }),
            }
    }

    /// Whether the repository has a ref `word` names, by the rules git
    /// applies to a short name.
    fn names_a_ref(&self, word: &str) -> bool {
        let Some(common) = &self.common else {
            return true;
        };
        if word.starts_with("worktrees/") || word.starts_with("main-worktree/") {
            return true;
        }
        let dirs = [self.git_dir.as_path(), common.as_path()];
        // `$GIT_DIR/NAME` is git's first rule, for any name (git 2.47 reads
        // `.git/lower` holding an object name as a revision): a file there
        // that holds a ref counts, as `HEAD` and `FETCH_HEAD` do; `config`
        // and `index` do not.
        if dirs.iter().any(|dir| holds_a_ref(&dir.join(word))) {
            return true;
        }
        let mut candidates = Vec::with_capacity(6);
        candidates.extend(
            ["refs/", "refs/tags/", "refs/heads/", "refs/remotes/"]
                .iter()
                .map(|prefix| format!("{prefix}{word}")),
        );
        candidates.push(format!("refs/remotes/{word}/HEAD"));
        let exists = |name: &String| {
            dirs.iter()
                .any(|dir| std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| !m.is_dir()))
        };
        if candidates.iter().any(exists) {
            return true;
        }
        // A full name (`refs/heads/main`) packed is found by the first rule.
        candidates.push(word.to_owned());
        match &self.packed {
            Packed::Absent => false,
            Packed::Unreadable => true,
            Packed::Text(packed) => packed.lines().any(|line| {
                line.split_once(' ')
                    .is_some_and(|(_, name)| candidates.iter().any(|c| c == name))
            }),
        }
    }
}

/// Whether `word` names a revision whatever the repository holds: `Some`
/// when its form alone says (revision syntax, an object name, a `git
/// describe` name, or a character no ref name holds), `None` when only the
/// repository's refs can.
pub fn by_its_form(word: &str) -> Option<bool> {
    if word.is_empty() {
        return Some(false);
    }
    if word.contains(['^', '~', '@', ':', '{']) || word.contains("..") {
        return Some(true);
    }
    if is_object_name(word) || is_described(word) {
        return Some(true);
    }
    // A ref name holds none of these; a pathspec or a pattern may.
    if word.contains(['*', '?', '[', '\\', ' ']) || word.chars().any(char::is_control) {
        return Some(false);
    }
    None
}

/// Four hex digits or more: an object name, or a prefix git expands.
fn is_object_name(word: &str) -> bool {
    word.len() >= 4 && word.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `git describe`'s form, `NAME-N-gHEX`, which git reads by its object.
fn is_described(word: &str) -> bool {
    word.rsplit_once("-g")
        .is_some_and(|(_, hex)| is_object_name(hex))
}

/// Whether the file at `path` reads as a ref: an object name, or `ref:`
/// naming another. A folder does not; anything else that cannot be read
/// (a FIFO git would wait on) may.
fn holds_a_ref(path: &Path) -> bool {
    if path.is_dir() {
        return false;
    }
    match repository_file::read_start(path, 64) {
        Ok(start) => {
            start.starts_with(b"ref:")
                || (start.len() >= 40 && start[..40].iter().all(u8::is_ascii_hexdigit))
        }
        Err(err) => err.kind() != std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn may_name_a_revision(word: &str, git_dir: &Path) -> bool {
        Refs::read(git_dir).may_name_a_revision(word)
    }

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs")
    }

    /// A repository with a commit, a branch, a tag, a remote-tracking ref
    /// and a packed ref.
    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["commit", "-q", "--allow-empty", "-m", "one"],
            &["branch", "feature"],
            &["tag", "v1.0"],
            &["update-ref", "refs/remotes/origin/main", "HEAD"],
            &["branch", "packed"],
            &["pack-refs", "--all"],
            &["branch", "loose"],
        ] {
            assert!(git(dir.path(), args).status.success(), "git {args:?}");
        }
        dir
    }

    /// Held to git: every word `git rev-parse --verify` resolves may name a
    /// revision here.
    #[test]
    fn every_word_git_resolves_may_name_a_revision() {
        let dir = repository();
        let git_dir = dir.path().join(".git");
        let head =
            String::from_utf8(git(dir.path(), &["rev-parse", "HEAD"]).stdout).expect("utf-8");
        for word in [
            "HEAD",
            "main",
            "feature",
            "packed",
            "loose",
            "v1.0",
            "origin/main",
            "refs/heads/main",
            "heads/main",
            "tags/v1.0",
            "HEAD~0",
            "main^{tree}",
            "@",
            &head[..7],
            &head[..40],
        ] {
            let resolved = git(dir.path(), &["rev-parse", "--verify", "-q", word]);
            assert!(resolved.status.success(), "git resolves {word}");
            assert!(may_name_a_revision(word, &git_dir), "{word}");
        }
    }

    /// Paths, patterns and the folders refs are kept in name no ref: git
    /// resolves none of them, and neither counts them.
    #[test]
    fn paths_and_patterns_name_none() {
        let dir = repository();
        let git_dir = dir.path().join(".git");
        for word in [
            "src/main.rs",
            "TODO",
            "README.md",
            "*.rs",
            "config",
            "index",
            "mainly",
            "origin",
        ] {
            let resolved = git(dir.path(), &["rev-parse", "--verify", "-q", word]);
            assert!(!resolved.status.success(), "git resolves {word}");
            assert!(!may_name_a_revision(word, &git_dir), "{word}");
        }
    }

    /// Git reads any name as `$GIT_DIR/NAME` first: a file there holding
    /// an object name is a revision, one holding anything else is not.
    #[test]
    fn a_file_in_the_git_directory_holding_a_ref_names_a_revision() {
        let dir = repository();
        let git_dir = dir.path().join(".git");
        let head =
            String::from_utf8(git(dir.path(), &["rev-parse", "HEAD"]).stdout).expect("utf-8");
        std::fs::write(git_dir.join("lower"), &head).expect("file");
        std::fs::write(git_dir.join("other"), "ref: refs/heads/main\n").expect("file");
        std::fs::write(git_dir.join("notes.txt"), "hello\n").expect("file");
        for (word, names) in [("lower", true), ("other", true), ("notes.txt", false)] {
            let resolved = git(dir.path(), &["rev-parse", "--verify", "-q", word]);
            assert_eq!(resolved.status.success(), names, "git resolves {word}");
            assert_eq!(may_name_a_revision(word, &git_dir), names, "{word}");
        }
    }

    /// Held to git: a repository whose `git log` prints a note, loose or
    /// packed, has notes; one without any has none.
    #[test]
    fn notes_loose_or_packed_are_found() {
        let dir = repository();
        let git_dir = dir.path().join(".git");
        let shows_note = || {
            let log = git(dir.path(), &["log", "-1"]);
            String::from_utf8_lossy(&log.stdout).contains("TOKEN=x")
        };
        assert!(!shows_note());
        assert!(!Refs::read(&git_dir).has_notes());
        std::fs::write(dir.path().join("secret"), "TOKEN=x\n").expect("file");
        let blob = git(dir.path(), &["hash-object", "-w", "secret"]);
        let blob = String::from_utf8_lossy(&blob.stdout).trim().to_owned();
        assert!(
            git(dir.path(), &["notes", "add", "-C", &blob])
                .status
                .success()
        );
        assert!(shows_note());
        assert!(Refs::read(&git_dir).has_notes(), "loose");
        assert!(git(dir.path(), &["pack-refs", "--all"]).status.success());
        let loose_left = std::fs::read_dir(git_dir.join("refs/notes"))
            .is_ok_and(|mut entries| entries.next().is_some());
        assert!(!loose_left, "only packed now");
        assert!(shows_note());
        assert!(Refs::read(&git_dir).has_notes(), "packed");
        std::fs::create_dir(git_dir.join("reftable")).expect("folder");
        assert!(Refs::read(&git_dir).has_notes(), "a store not read");
    }

    /// A form the gate does not read counts as naming every word.
    #[test]
    fn a_ref_store_not_read_names_every_word() {
        let dir = repository();
        let git_dir = dir.path().join(".git");
        assert!(!may_name_a_revision("TODO", &git_dir));
        std::fs::create_dir(git_dir.join("reftable")).expect("folder");
        assert!(may_name_a_revision("TODO", &git_dir));
        assert!(may_name_a_revision("v2.0-1-gdeadbee", &git_dir));
    }
}
