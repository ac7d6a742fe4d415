//! What a git read reads beyond its words: the configuration of every
//! repository it may read (which may name a program to run) and, for a
//! read that prints tracked content, every file they track. The
//! repositories are where git looks: from every place the command may be
//! in, moved by `-C` and `--git-dir` as git reads them, and every populated
//! submodule of each (`git status` runs git in them, `git grep
//! --recurse-submodules` prints what they track).

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::path::PathBuf;

use super::git_config::{self, DotGit, Repository};
use super::git_index::{self, Index};
use super::git_revisions::{self, Refs};
use super::places::Paths;
use super::table::CommandClasses;
use super::walk;

/// Most repositories (a workspace's and its submodules') one git read is
/// looked through for.
const MAX_REPOSITORIES: usize = 64;

/// The repositories a git read may read: what their configurations say
/// and what their indexes list, each read once.
pub(super) struct Look {
    /// Each repository's folder its tracked paths are relative to, and its
    /// index (`None`: it cannot be read whole).
    indexes: Vec<(PathBuf, Option<Index>)>,
    /// Each repository's git directory, where its refs are.
    git_dirs: Vec<PathBuf>,
    /// Their refs, read when a word is first asked about and kept for the
    /// rest of the judgement.
    refs: OnceCell<Vec<Refs>>,
    /// A configuration names the notes `git log` shows.
    notes_named: bool,
    /// Whether git may run a program a configuration names (so may a place
    /// the gate cannot know, and an index that does not read whole, which
    /// may hide a submodule).
    runs_a_program: bool,
    /// The files the configurations name.
    files: Vec<PathBuf>,
    /// Git may start where the gate cannot know, or read more repositories
    /// than it looks through.
    unknown: bool,
}

/// Looks for the repositories `git ARGS` may read, from every place the
/// command may be in, and reads each one's configuration and index.
pub(super) fn look(args: &[String], paths: &Paths<'_>) -> Look {
    let (mut pending, unknown) = repositories_git_starts_in(args, paths);
    let home = paths.root.home();
    let mut seen = BTreeSet::new();
    let mut look = Look {
        indexes: Vec::new(),
        git_dirs: Vec::new(),
        refs: OnceCell::new(),
        notes_named: false,
        runs_a_program: unknown,
        files: Vec::new(),
        unknown,
    };
    let mut budget = git_index::MAX_INDEX_BYTES;
    while let Some(Repository { git_dir, top }) = pending.pop() {
        if !seen.insert(git_dir.clone()) {
            continue;
        }
        if seen.len() > MAX_REPOSITORIES {
            look.unknown = true;
            look.runs_a_program = true;
            break;
        }
        let configuration = git_config::read(&git_dir, &top, home);
        let index = git_index::tracked(&git_dir, configuration.object_names, &mut budget);
        for submodule in index.iter().flat_map(|index| &index.submodules) {
            let folder = top.join(submodule);
            match git_config::dot_git(&folder) {
                DotGit::Repository(git_dir) => pending.push(Repository {
                    git_dir,
                    top: folder,
                }),
                // Not checked out: git has nothing there to read.
                DotGit::Absent => {}
                DotGit::Unreadable => {
                    look.unknown = true;
                    look.runs_a_program = true;
                }
            }
        }
        look.runs_a_program |= index.is_none() || configuration.runs_a_program;
        look.notes_named |= configuration.names_notes;
        look.files.extend(configuration.files);
        look.indexes.push((top, index));
        look.git_dirs.push(git_dir);
    }
    look
}

/// The repositories `git ARGS` finds from every place the command may be
/// in, and whether it may start where the gate cannot know.
fn repositories_git_starts_in(args: &[String], paths: &Paths<'_>) -> (Vec<Repository>, bool) {
    let starts: Vec<Option<PathBuf>> = match &paths.places {
        Some(places) => places.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let mut unknown = false;
    let mut pending = Vec::new();
    for start in starts {
        let Some(run) = GitRun::read(args, start) else {
            unknown = true;
            continue;
        };
        match (run.git_dir, run.start) {
            (Some(git_dir), Some(top)) => pending.push(Repository { git_dir, top }),
            // Outside a repository git reads none.
            (None, Some(start)) => pending.extend(git_config::repository(&start)),
            (git_dir, None) => {
                unknown = true;
                pending.extend(git_dir.map(|git_dir| Repository {
                    top: git_dir.clone(),
                    git_dir,
                }));
            }
        }
    }
    (pending, unknown)
}

impl Look {
    /// Whether git may run a program a configuration names.
    pub(super) fn runs_a_program(&self) -> bool {
        self.runs_a_program
    }

    /// The files the repositories' configurations make git read.
    pub(super) fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Whether git may read a repository at all: outside one, no history
    /// is there to print.
    pub(super) fn finds_a_repository(&self) -> bool {
        self.unknown || !self.git_dirs.is_empty()
    }

    /// Whether `word` may name a revision of a repository git reads (in
    /// a place the gate cannot know, any word may).
    pub(super) fn may_name_a_revision(&self, word: &str) -> bool {
        if self.unknown {
            return true;
        }
        // The form decides most words without the refs being read.
        match git_revisions::by_its_form(word) {
            Some(names) => names && !self.git_dirs.is_empty(),
            None => self
                .refs()
                .iter()
                .any(|refs| refs.may_name_a_revision(word)),
        }
    }

    /// Whether a repository git reads may have notes for `git log` to
    /// show, each of which may be any blob of its history.
    pub(super) fn may_show_notes(&self) -> bool {
        self.unknown || self.notes_named || self.refs().iter().any(Refs::has_notes)
    }

    fn refs(&self) -> &[Refs] {
        self.refs
            .get_or_init(|| self.git_dirs.iter().map(|dir| Refs::read(dir)).collect())
    }

    /// What printing every tracked file makes of a git read: each tracked
    /// path is judged as a walk's entry is, so a tracked `.env` is a secret
    /// read with no name in the command. An index that cannot be read whole,
    /// more tracked files than a walk's budget, or a place the gate cannot
    /// know leave it unproven.
    pub(super) fn tracked(&self, table: &CommandClasses) -> Tracked {
        let mut unproven = self.unknown;
        let mut classes = BTreeSet::new();
        let mut budget = walk::MAX_WALK_ENTRIES;
        for (top, index) in &self.indexes {
            match index {
                Some(index) if index.paths.len() <= budget => {
                    budget -= index.paths.len();
                    for path in &index.paths {
                        classes.extend(table.classify_word(&top.join(path).to_string_lossy()));
                    }
                }
                _ => unproven = true,
            }
        }
        Tracked { classes, unproven }
    }
}

/// Where `git ARGS` looks for its repository, as git reads its options
/// before the subcommand (`-C`, `--git-dir`).
struct GitRun {
    start: Option<PathBuf>,
    git_dir: Option<PathBuf>,
}

impl GitRun {
    /// `None` when `--git-dir` names a relative folder from a place the
    /// gate cannot know.
    fn read(args: &[String], mut start: Option<PathBuf>) -> Option<Self> {
        let mut git_dir = None;
        let mut words = global_options(args).iter();
        while let Some(word) = words.next() {
            let value = if takes_separate_value(word) {
                words.next().cloned()
            } else {
                word.split_once('=').map(|(_, value)| value.to_owned())
            };
            let relative_to = |start: &Option<PathBuf>| match (start, value.clone()) {
                (_, Some(folder)) if folder.starts_with('/') => Some(PathBuf::from(folder)),
                (Some(from), Some(folder)) => Some(from.join(folder)),
                _ => None,
            };
            if word == "-C" {
                start = relative_to(&start);
            } else if word == "--git-dir" || word.starts_with("--git-dir=") {
                git_dir = Some(relative_to(&start)?);
            }
        }
        Some(Self { start, git_dir })
    }
}

/// The words before git's subcommand: its global options and their
/// values, as git reads them. Two runs with the same global options look
/// in the same repository.
pub(super) fn global_options(args: &[String]) -> &[String] {
    let mut at = 0;
    while let Some(word) = args.get(at) {
        if !word.starts_with('-') {
            break;
        }
        at += if takes_separate_value(word) { 2 } else { 1 };
    }
    &args[..at.min(args.len())]
}

/// A global option of git's whose value is the next word.
fn takes_separate_value(word: &str) -> bool {
    [
        "-C",
        "--git-dir",
        "-c",
        "--work-tree",
        "--namespace",
        "--exec-path",
        "--config-env",
        "--super-prefix",
        "--attr-source",
        "--list-cmds",
    ]
    .contains(&word)
}

/// What a git read's tracked files make of it.
pub(super) struct Tracked {
    /// The classes the rules give the tracked paths it prints.
    pub classes: BTreeSet<String>,
    /// Where it reads could not be looked through.
    pub unproven: bool,
}
