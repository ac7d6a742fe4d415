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

/// Whether git, started in `start` (or with the repository `git_dir`),
/// reads a configuration that names a program. An unreadable or
/// unresolvable place counts as naming one; `home` is what an include's
/// `~/` stands for.
pub fn names_a_program(start: &Path, git_dir: Option<&Path>, home: Option<&Path>) -> bool {
    let Some(git_dir) = git_dir
        .map(Path::to_owned)
        .or_else(|| repository(start).map(|found| found.git_dir))
    else {
        // No repository: git reads only the user's and the system's own
        // configuration, which the project does not carry.
        return false;
    };
    let mut pending = vec![git_dir.join("config")];
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
        match scan(&text) {
            Scan::Program => return true,
            Scan::Includes(paths) => {
                let folder = file.parent().unwrap_or(Path::new("/"));
                for path in paths {
                    pending.push(match path.strip_prefix("~/") {
                        Some(rest) => match home {
                            Some(home) => home.join(rest),
                            None => return true,
                        },
                        None => folder.join(path),
                    });
                }
            }
        }
    }
    false
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
        let dot_git = folder.join(".git");
        // One look at `.git` for both questions: this runs for every
        // folder up to `/` at each `git` the gate judges.
        let found = std::fs::metadata(&dot_git).ok();
        let git_dir = if found.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            Some(dot_git)
        } else if found.is_some_and(|meta| meta.is_file()) {
            let text = std::fs::read_to_string(&dot_git).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            Some(folder.join(target))
        } else {
            let bare = folder.join("HEAD").is_file()
                && folder.join("objects").is_dir()
                && folder.join("refs").is_dir();
            bare.then(|| folder.to_owned())
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

enum Scan {
    Program,
    Includes(Vec<String>),
}

/// Reads one configuration file: whether it names a program, and the
/// files it includes.
fn scan(text: &str) -> Scan {
    let mut section = String::new();
    let mut includes = Vec::new();
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
    }
    Scan::Includes(includes)
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
            assert!(names_a_program(dir.path(), None, None), "{config}");
            std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
            assert!(
                names_a_program(&dir.path().join("sub/deeper"), None, None),
                "{config}"
            );
        }
    }

    #[test]
    fn ordinary_configuration_names_none() {
        let dir = repo(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n[pager]\n\tbranch = false\n[core]\n\tfsmonitor = false\n",
        );
        assert!(!names_a_program(dir.path(), None, None));
        let none = tempfile::tempdir().unwrap();
        assert!(!names_a_program(none.path(), None, None), "no repository");
    }

    #[test]
    fn includes_bare_repositories_and_gitdir_files_are_followed() {
        let dir = repo("[include]\n\tpath = extra.cfg\n");
        std::fs::write(dir.path().join(".git/extra.cfg"), "[core]\n\tpager = ./p\n").unwrap();
        assert!(names_a_program(dir.path(), None, None));
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
        assert!(names_a_program(bare.path(), None, None));
        let worktree = tempfile::tempdir().unwrap();
        std::fs::write(
            worktree.path().join(".git"),
            format!("gitdir: {}\n", bare.path().display()),
        )
        .unwrap();
        assert!(names_a_program(worktree.path(), None, None));
    }
}
