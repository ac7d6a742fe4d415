//! Git reads run programs its configuration names: a pager (`core.pager`,
//! `pager.log`), a file-system monitor (`core.fsmonitor`), diff and filter
//! drivers (`diff.NAME.textconv`, `filter.NAME.smudge`), `!` aliases, and
//! the `post-index-change` hook; and they read the files it names
//! (`blame.ignoreRevsFile`, `mailmap.file`). A project can carry such
//! configuration: a nested repository, a bare repository kept as ordinary
//! files (`cd evil.git && git log -p`), the workspace's own `.git/config`,
//! a linked worktree's main repository. So a git command is read-only only
//! when the configuration it will read (where git reads it: a worktree's in
//! its `commondir`), and every file that configuration includes, names no
//! program; otherwise it is opaque. The files it names are judged as the
//! command's own words. The same reading says how the repository names its
//! objects, which its index's entries follow: each configuration is read
//! once per judgement.

use std::path::{Path, PathBuf};

use crate::facts::repository_file;

/// Most configuration files followed through `include.path`.
const MAX_INCLUDES: usize = 16;
/// More than a configuration file, or a `.git` or `commondir` file, holds.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What git reads of a repository's configuration on a read.
#[derive(Debug, Default)]
pub struct Configuration {
    /// It names a program git may run (or a hook a read runs, or a file
    /// git writes), or it could not be read whole.
    pub runs_a_program: bool,
    /// The files it makes git read beside its own: files it includes, and
    /// files its keys name (`core.excludesFile`, `blame.ignoreRevsFile`,
    /// `mailmap.file`, ...). A secret named there is read.
    pub files: Vec<PathBuf>,
    /// How the repository names its objects, which its index's entries
    /// follow.
    pub object_names: ObjectNames,
    /// It names the notes `git log` shows (`core.notesRef`,
    /// `notes.displayRef`), which may be any ref's, or it could not be read
    /// whole.
    pub names_notes: bool,
}

/// How a repository names its objects (`extensions.objectFormat`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ObjectNames {
    /// SHA-1, the default.
    #[default]
    Sha1,
    /// Another format is named (any mention of the setting counts, so a
    /// form this does not read gives no answer rather than a wrong one),
    /// or the configuration could not be read whole.
    Unknown,
}

impl Configuration {
    fn unproven() -> Self {
        Self {
            runs_a_program: true,
            files: Vec::new(),
            object_names: ObjectNames::Unknown,
            names_notes: true,
        }
    }
}

/// The configuration git reads for the repository `git_dir` whose working
/// tree is `top`, with every file it includes. `home` is what `~/` stands
/// for in a path it names.
pub fn read(git_dir: &Path, top: &Path, home: Option<&Path>) -> Configuration {
    let Some(common) = common_dir(git_dir) else {
        return Configuration::unproven();
    };
    let mut pending = config_files(&common, git_dir);
    let mut hooks = vec![common.join("hooks")];
    let mut configuration = Configuration::default();
    let mut read = 0;
    while let Some(file) = pending.pop() {
        read += 1;
        if read > MAX_INCLUDES {
            return Configuration::unproven();
        }
        let text = match repository_file::read_text(&file, MAX_CONFIG_BYTES) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return Configuration::unproven(),
        };
        let Some(settings) = scan(&text) else {
            return Configuration::unproven();
        };
        let folder = file.parent().unwrap_or(Path::new("/"));
        let named = |paths: Vec<String>, from: &Path| -> Option<Vec<PathBuf>> {
            paths
                .iter()
                .map(|path| expand_home(path, home).map(|path| from.join(path)))
                .collect()
        };
        let (Some(includes), Some(hooks_paths), Some(files)) = (
            named(settings.includes, folder),
            named(settings.hooks_paths, top),
            named(settings.files, top),
        ) else {
            return Configuration::unproven();
        };
        configuration.runs_a_program |= settings.names_a_program;
        configuration.names_notes |= settings.names_notes;
        if settings.names_an_object_format {
            configuration.object_names = ObjectNames::Unknown;
        }
        configuration.files.extend(includes.iter().cloned());
        configuration.files.extend(files);
        pending.extend(includes);
        hooks.extend(hooks_paths);
    }
    // `git status` and `git diff` write the index they refresh, and the
    // `post-index-change` hook runs then: the one hook a read runs.
    configuration.runs_a_program |= hooks
        .iter()
        .any(|folder| std::fs::symlink_metadata(folder.join("post-index-change")).is_ok());
    configuration
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
        Ok(meta) if meta.is_file() => repository_file::read_text(&dot_git, MAX_CONFIG_BYTES)
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
    match repository_file::read_text(&git_dir.join("commondir"), MAX_CONFIG_BYTES) {
        Ok(text) => Some(git_dir.join(text.trim_end_matches(['\n', '\r']))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(git_dir.to_owned()),
        Err(_) => None,
    }
}

/// The configuration files of the repository `git_dir` whose common
/// directory is `common`, as git reads them.
fn config_files(common: &Path, git_dir: &Path) -> Vec<PathBuf> {
    vec![common.join("config"), git_dir.join("config.worktree")]
}

/// What one configuration file says.
#[derive(Default)]
struct Settings {
    names_a_program: bool,
    names_an_object_format: bool,
    names_notes: bool,
    /// The files it includes, the folders it says hooks are in
    /// (`core.hooksPath`), and the files its keys name.
    includes: Vec<String>,
    hooks_paths: Vec<String>,
    files: Vec<String>,
}

/// Reads one configuration file whole (a file naming a program may name
/// files too), `None` for a header git would refuse: not read, so not
/// trusted.
fn scan(text: &str) -> Option<Settings> {
    let mut section = String::new();
    let mut settings = Settings::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let mut rest = line;
        if let Some(header) = line.strip_prefix('[') {
            let (inside, after) = header.split_once(']')?;
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
        settings.names_a_program |= runs_a_program(&section, &key, value);
        settings.names_an_object_format |= key.contains("objectformat");
        settings.names_notes |= matches!(
            (section.as_str(), key.as_str()),
            ("core", "notesref") | ("notes", "displayref")
        );
        if key == "path" && (section == "include" || section.starts_with("includeif.")) {
            settings.includes.push(value.to_owned());
        }
        if section == "core" && key == "hookspath" {
            settings.hooks_paths.push(value.to_owned());
        }
        if names_a_file(&section, &key) {
            settings.files.push(value.to_owned());
        }
    }
    Some(settings)
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

/// A key whose value is a file a git read reads.
fn names_a_file(section: &str, key: &str) -> bool {
    let name = section.split_once('.').map_or(section, |(name, _)| name);
    matches!(
        (name, key),
        ("core", "excludesfile" | "attributesfile")
            | ("blame", "ignorerevsfile")
            | ("mailmap", "file")
            | ("diff", "orderfile")
            | ("gpg", "allowedsignersfile")
    )
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
        // `git help` shows a page with the viewer or browser these name.
        ("man" | "browser", "cmd" | "path") if !sub.is_empty() => true,
        // A trace target is a file (or socket) every git command writes.
        ("trace2", "normaltarget" | "perftarget" | "eventtarget") => !off,
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
        repository(start).is_some_and(|found| read(&found.git_dir, &found.top, None).runs_a_program)
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
            "[browser \"b\"]\n\tcmd = ./open\n",
            "[man \"v\"]\n\tcmd = ./view\n",
            "[trace2]\n\teventTarget = /tmp/trace\n",
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

    /// The notes `git log` shows may be any ref's when a configuration
    /// names them, in the repository's file or one it includes.
    #[test]
    fn a_configuration_naming_the_notes_shown_is_found() {
        let names_notes =
            |dir: &tempfile::TempDir| read(&dir.path().join(".git"), dir.path(), None).names_notes;
        for config in [
            "[core]\n\tnotesRef = refs/kept\n",
            "[notes]\n\tdisplayRef = refs/kept/*\n",
            "[NOTES] DISPLAYREF = x\n",
        ] {
            assert!(names_notes(&repo(config)), "{config}");
        }
        let included = repo("[include]\n\tpath = extra.cfg\n");
        std::fs::write(
            included.path().join(".git/extra.cfg"),
            "[core]\n\tnotesRef = refs/kept\n",
        )
        .unwrap();
        assert!(names_notes(&included), "included");
        assert!(!names_notes(&repo(
            "[core]\n\tbare = false\n[notes]\n\trewriteMode = concatenate\n"
        )));
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
        let at_home = repo("[core]\n\thooksPath = ~/hooks\n");
        let home = tempfile::tempdir().unwrap();
        let read_at_home = || {
            read(
                &at_home.path().join(".git"),
                at_home.path(),
                Some(home.path()),
            )
        };
        assert!(!read_at_home().runs_a_program);
        std::fs::create_dir_all(home.path().join("hooks")).unwrap();
        std::fs::write(home.path().join("hooks/post-index-change"), "#!/bin/sh\n").unwrap();
        assert!(read_at_home().runs_a_program, "`~/` is the home's");
    }

    /// The index's entries follow the object names: held to git, which
    /// writes the setting in a repository it makes with SHA-256 names.
    #[test]
    fn a_repository_naming_objects_otherwise_says_so() {
        let git_init = |args: &[&str]| {
            let dir = tempfile::tempdir().unwrap();
            let made = std::process::Command::new("git")
                .args(["init", "-q"])
                .args(args)
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(made.success());
            read(&dir.path().join(".git"), dir.path(), None)
        };
        assert_eq!(git_init(&[]).object_names, ObjectNames::Sha1);
        assert_eq!(
            git_init(&["--object-format=sha256"]).object_names,
            ObjectNames::Unknown
        );
        let worktree = repo("[core]\n\tbare = false\n");
        std::fs::write(
            worktree.path().join(".git/config.worktree"),
            "[extensions] objectFormat = sha256\n",
        )
        .unwrap();
        let read = read(&worktree.path().join(".git"), worktree.path(), None);
        assert_eq!(read.object_names, ObjectNames::Unknown);
        assert!(!read.runs_a_program);
        let unreadable = repo("[core\n");
        let read = read_home_less(&unreadable);
        assert_eq!(read.object_names, ObjectNames::Unknown);
        assert!(read.runs_a_program);
    }

    /// Keys that name a file git reads, and included files, are files the
    /// read reads: a secret named there is read.
    #[test]
    fn files_the_configuration_names_are_read() {
        let dir =
            repo("[blame]\n\tignoreRevsFile = .git-blame-ignore-revs\n[include]\n\tpath = more\n");
        std::fs::write(
            dir.path().join(".git/more"),
            "[core]\n\texcludesFile = ~/.env\n[mailmap]\n\tfile = m\n",
        )
        .unwrap();
        let home = Path::new("/home/u");
        let read = read(&dir.path().join(".git"), dir.path(), Some(home));
        assert!(!read.runs_a_program);
        let mut files = read.files;
        files.sort();
        let mut expected = vec![
            dir.path().join(".git-blame-ignore-revs"),
            dir.path().join(".git/more"),
            home.join(".env"),
            dir.path().join("m"),
        ];
        expected.sort();
        assert_eq!(files, expected);
        let nowhere = read_home_less(&dir);
        assert!(nowhere.runs_a_program, "`~/` with no home to know");
        // A file that names a program is still read whole: the files it
        // names are read too.
        let both = repo("[core]\n\tpager = ./p\n[blame]\n\tignoreRevsFile = .env\n");
        let read = read_home_less(&both);
        assert!(read.runs_a_program);
        assert_eq!(read.files, [both.path().join(".env")]);
    }

    fn read_home_less(dir: &tempfile::TempDir) -> Configuration {
        read(&dir.path().join(".git"), dir.path(), None)
    }

    /// A linked worktree's git directory names its main repository's in
    /// `commondir`, whose configuration git reads, with `config.worktree`.
    #[test]
    fn a_linked_worktree_reads_its_main_repository_s_configuration() {
        let main = repo("[core]\n\tbare = false\n");
        let worktree = main.path().join(".git/worktrees/wt");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join("commondir"), "../..\n").unwrap();
        assert!(!read(&worktree, main.path(), None).runs_a_program);
        std::fs::write(worktree.join("config.worktree"), "[core]\n\tpager = ./p\n").unwrap();
        assert!(read(&worktree, main.path(), None).runs_a_program);
        std::fs::remove_file(worktree.join("config.worktree")).unwrap();
        std::fs::write(
            main.path().join(".git/config"),
            "[core]\n\tfsmonitor = ./watch\n",
        )
        .unwrap();
        assert!(read(&worktree, main.path(), None).runs_a_program);
    }
}
