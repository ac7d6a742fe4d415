//! Git reads run programs its configuration names: a pager (`core.pager`,
//! `pager.log`), a file-system monitor (`core.fsmonitor`), diff and filter
//! drivers (`diff.NAME.textconv`, `filter.NAME.smudge`), `!` aliases. A
//! project can carry such configuration: a nested repository, a bare
//! repository kept as ordinary files (`cd evil.git && git log -p`), the
//! workspace's own `.git/config`. So a git command is read-only only when
//! the repository's configuration it will read, and every file that
//! configuration includes, names no program; otherwise it is opaque.

use std::path::{Path, PathBuf};

/// Most configuration files followed through `include.path`.
const MAX_INCLUDES: usize = 16;

/// Whether git, reading the repository `git_dir` whose working tree is
/// `top`, runs a program its configuration names, or a hook a read runs.
/// An unreadable file counts as naming one; `home` is what an include's
/// `~/` stands for.
pub fn names_a_program(git_dir: &Path, top: &Path, home: Option<&Path>) -> bool {
    let Some(common) = common_dir(git_dir) else {
        return true;
    };
    let mut pending = vec![common.join("config"), git_dir.join("config.worktree")];
    let mut hooks = vec![common.join("hooks")];
    let mut read = 0;
    while let Some(file) = pending.pop() {
        read += 1;
        if read > MAX_INCLUDES {
            return true;
        }
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return true,
        };
        let Scan::Settings {
            includes,
            hooks_paths,
        } = scan(&text)
        else {
            return true;
        };
        let folder = file.parent().unwrap_or(Path::new("/"));
        for path in includes {
            let Some(path) = expand_home(&path, home) else {
                return true;
            };
            pending.push(folder.join(path));
        }
        for path in hooks_paths {
            let Some(path) = expand_home(&path, home) else {
                return true;
            };
            hooks.push(top.join(path));
        }
    }
    // `git status` and `git diff` write the index they refresh, and the
    // `post-index-change` hook runs then: the one hook a read runs.
    hooks
        .iter()
        .any(|folder| std::fs::symlink_metadata(folder.join("post-index-change")).is_ok())
}

/// `~/x` as the path under `home` (`None` when there is no home to know);
/// any other path as it is.
fn expand_home(path: &str, home: Option<&Path>) -> Option<PathBuf> {
    match path.strip_prefix("~/") {
        Some(rest) => home.map(|home| home.join(rest)),
        None => Some(PathBuf::from(path)),
    }
}

/// A repository git finds: its git directory, and the folder the paths it
/// tracks are relative to.
pub struct Repository {
    pub git_dir: PathBuf,
    pub top: PathBuf,
}

/// The repository git finds from `start`: `.git` (a folder, or a file
/// saying `gitdir: PATH`), or `start` or a folder above it that is itself
/// a repository (a bare one: `HEAD`, `objects/`, `refs/`).
pub fn repository(start: &Path) -> Option<Repository> {
    for folder in start.ancestors() {
        let git_dir = match dot_git(folder) {
            DotGit::Repository(git_dir) => Some(git_dir),
            DotGit::Unreadable => return None,
            DotGit::Absent => {
                let bare = folder.join("HEAD").is_file()
                    && folder.join("objects").is_dir()
                    && folder.join("refs").is_dir();
                bare.then(|| folder.to_owned())
            }
        };
        if let Some(git_dir) = git_dir {
            return Some(Repository {
                git_dir,
                top: folder.to_owned(),
            });
        }
    }
    None
}

/// What a folder's `.git` says.
pub enum DotGit {
    Absent,
    /// A git directory: `.git` itself, or the one its `gitdir:` names.
    Repository(PathBuf),
    /// A `.git` file that names no git directory.
    Unreadable,
}

/// The git directory `folder/.git` is or names. One look at `.git` for
/// both forms: this runs for every folder up to `/` at each `git` the gate
/// judges.
pub fn dot_git(folder: &Path) -> DotGit {
    let dot_git = folder.join(".git");
    match std::fs::metadata(&dot_git) {
        Ok(meta) if meta.is_dir() => DotGit::Repository(dot_git),
        Ok(meta) if meta.is_file() => std::fs::read_to_string(&dot_git)
            .ok()
            .and_then(|text| {
                let target = text.trim().strip_prefix("gitdir:")?.trim().to_owned();
                Some(DotGit::Repository(folder.join(target)))
            })
            .unwrap_or(DotGit::Unreadable),
        _ => DotGit::Absent,
    }
}

/// The git directory whose configuration and hooks the repository
/// `git_dir` uses: a linked worktree's (`.git/worktrees/NAME`) names its
/// main repository's in a `commondir` file; git reads that one's `config`,
/// with the worktree's own `config.worktree` beside it. `None` when
/// `commondir` cannot be read.
pub fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => Some(git_dir.join(text.trim_end_matches(['\n', '\r']))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(git_dir.to_owned()),
        Err(_) => None,
    }
}

/// The configuration files of the repository `git_dir`, as git reads
/// them (see `common_dir`).
pub fn config_files(git_dir: &Path) -> Option<Vec<PathBuf>> {
    let common = common_dir(git_dir)?;
    Some(vec![common.join("config"), git_dir.join("config.worktree")])
}

enum Scan {
    Program,
    /// It names no program: the files it includes, and the folders it
    /// says hooks are in (`core.hooksPath`).
    Settings {
        includes: Vec<String>,
        hooks_paths: Vec<String>,
    },
}

/// Reads one configuration file: whether it names a program, the files it
/// includes and where it says hooks are.
fn scan(text: &str) -> Scan {
    let mut section = String::new();
    let mut includes = Vec::new();
    let mut hooks_paths = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let mut rest = line;
        if let Some(header) = line.strip_prefix('[') {
            let Some((inside, after)) = header.split_once(']') else {
                // A header git would refuse: not read, so not trusted.
                return Scan::Program;
            };
            section = header_name(inside);
            rest = after.trim();
            if rest.is_empty() {
                continue;
            }
        }
        let (key, value) = match rest.split_once('=') {
            Some((key, value)) => (key.trim().to_ascii_lowercase(), value.trim()),
            None => (rest.trim().to_ascii_lowercase(), "true"),
        };
        let value = value.trim_matches('"');
        if runs_a_program(&section, &key, value) {
            return Scan::Program;
        }
        if key == "path" && (section == "include" || section.starts_with("includeif.")) {
            includes.push(value.to_owned());
        }
        if section == "core" && key == "hookspath" {
            hooks_paths.push(value.to_owned());
        }
    }
    Scan::Settings {
        includes,
        hooks_paths,
    }
}

/// `core`, `diff.NAME`, `includeIf.gitdir:x`: the section, lower-cased,
/// with its subsection as written.
fn header_name(inside: &str) -> String {
    match inside.split_once(char::is_whitespace) {
        Some((name, sub)) => format!(
            "{}.{}",
            name.to_ascii_lowercase(),
            sub.trim().trim_matches('"')
        ),
        None => inside.trim().to_ascii_lowercase(),
    }
}

fn runs_a_program(section: &str, key: &str, value: &str) -> bool {
    let off = matches!(
        value.to_ascii_lowercase().as_str(),
        "" | "false" | "no" | "off" | "0"
    );
    let (name, sub) = section.split_once('.').unwrap_or((section, ""));
    match (name, key) {
        ("core", "pager" | "fsmonitor" | "sshcommand" | "askpass" | "gitproxy") => !off,
        ("diff", "external") => !off,
        ("diff", "textconv" | "command") if !sub.is_empty() => true,
        ("filter", _) if !sub.is_empty() => true,
        ("merge", "driver") => true,
        ("pager", _) => {
            !off && !matches!(
                value.to_ascii_lowercase().as_str(),
                "true" | "yes" | "on" | "1"
            )
        }
        ("alias", _) => value.starts_with('!'),
        ("credential", "helper") => !off,
        ("gpg", "program") => true,
        ("uploadpack", "packobjectshook") => true,
        ("interactive", "difffilter") => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), config).unwrap();
        dir
    }

    /// Whether git started in `start` reads a configuration that names a
    /// program.
    fn runs(start: &Path) -> bool {
        repository(start).is_some_and(|found| names_a_program(&found.git_dir, &found.top, None))
    }

    #[test]
    fn a_configuration_that_names_a_program_is_found() {
        for config in [
            "[core]\n\tpager = less -R\n",
            "[core]\nfsmonitor = ./watch.sh\n",
            "[diff \"img\"]\n\ttextconv = ./conv\n",
            "[filter \"x\"]\n\tsmudge = ./s\n",
            "[pager]\n\tlog = ./p\n",
            "[alias]\n\tl = !./run\n",
            "[core] pager = x\n",
        ] {
            let dir = repo(config);
            assert!(runs(dir.path()), "{config}");
            std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
            assert!(runs(&dir.path().join("sub/deeper")), "{config}");
        }
    }

    #[test]
    fn ordinary_configuration_names_none() {
        let dir = repo(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n[pager]\n\tbranch = false\n[core]\n\tfsmonitor = false\n",
        );
        assert!(!runs(dir.path()));
        let none = tempfile::tempdir().unwrap();
        assert!(!runs(none.path()), "no repository");
    }

    #[test]
    fn includes_bare_repositories_and_gitdir_files_are_followed() {
        let dir = repo("[include]\n\tpath = extra.cfg\n");
        std::fs::write(dir.path().join(".git/extra.cfg"), "[core]\n\tpager = ./p\n").unwrap();
        assert!(runs(dir.path()));
        let bare = tempfile::tempdir().unwrap();
        for folder in ["objects", "refs"] {
            std::fs::create_dir_all(bare.path().join(folder)).unwrap();
        }
        std::fs::write(bare.path().join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            bare.path().join("config"),
            "[diff \"x\"]\n\ttextconv = ./t\n",
        )
        .unwrap();
        assert!(runs(bare.path()));
        let worktree = tempfile::tempdir().unwrap();
        std::fs::write(
            worktree.path().join(".git"),
            format!("gitdir: {}\n", bare.path().display()),
        )
        .unwrap();
        assert!(runs(worktree.path()));
    }

    /// `git status` and `git diff` write the index they refresh, which runs
    /// the `post-index-change` hook: in the git directory's `hooks`, or
    /// where `core.hooksPath` says (relative to the working tree).
    #[test]
    fn a_hook_a_read_runs_counts_as_a_program() {
        let dir = repo("[core]\n\tbare = false\n");
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::write(dir.path().join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(
            dir.path().join(".git/hooks/post-index-change.sample"),
            "#!/bin/sh\n",
        )
        .unwrap();
        assert!(!runs(dir.path()), "hooks a read does not run");
        std::fs::write(
            dir.path().join(".git/hooks/post-index-change"),
            "#!/bin/sh\n",
        )
        .unwrap();
        assert!(runs(dir.path()));
        let moved = repo("[core]\n\thooksPath = tools/hooks\n");
        assert!(!runs(moved.path()));
        std::fs::create_dir_all(moved.path().join("tools/hooks")).unwrap();
        std::fs::write(
            moved.path().join("tools/hooks/post-index-change"),
            "#!/bin/sh\n",
        )
        .unwrap();
        assert!(runs(moved.path()));
    }

    /// A linked worktree's git directory names its main repository's in
    /// `commondir`, whose configuration git reads, with `config.worktree`.
    #[test]
    fn a_linked_worktree_reads_its_main_repository_s_configuration() {
        let main = repo("[core]\n\tbare = false\n");
        let worktree = main.path().join(".git/worktrees/wt");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join("commondir"), "../..\n").unwrap();
        assert!(!names_a_program(&worktree, main.path(), None));
        std::fs::write(worktree.join("config.worktree"), "[core]\n\tpager = ./p\n").unwrap();
        assert!(names_a_program(&worktree, main.path(), None));
        std::fs::remove_file(worktree.join("config.worktree")).unwrap();
        std::fs::write(
            main.path().join(".git/config"),
            "[core]\n\tfsmonitor = ./watch\n",
        )
        .unwrap();
        assert!(names_a_program(&worktree, main.path(), None));
    }
}
