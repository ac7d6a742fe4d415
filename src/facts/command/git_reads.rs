//! What a git read reads beyond its words: the configuration of the
//! repository it finds (which may name a program to run) and, for a read
//! that prints tracked content, every file the repository tracks. Both
//! start from where git looks for its repository: every place the command
//! may be in, moved by `-C` and `--git-dir` as git reads them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::places::Paths;
use super::table::CommandClasses;
use super::{git_config, git_index, walk};

/// Whether `git ARGS` reads a configuration that names a program: the
/// repository is found from `-C` folders and `--git-dir`, as git finds it.
/// A place the gate cannot know (after a `cd`) counts as naming one.
pub(super) fn git_runs_programs(args: &[String], paths: &Paths<'_>) -> bool {
    // Where it may run: every place the command may be in (a `cd` may come
    // before or after it, once or in a loop).
    match &paths.places {
        Some(places) => places
            .iter()
            .any(|start| git_runs_programs_from(args, Some(start.clone()), paths.root.home())),
        None => git_runs_programs_from(args, None, paths.root.home()),
    }
}

fn git_runs_programs_from(args: &[String], start: Option<PathBuf>, home: Option<&Path>) -> bool {
    let Some(run) = GitRun::read(args, start) else {
        return true;
    };
    match run.start {
        Some(start) => git_config::names_a_program(&start, run.git_dir.as_deref(), home),
        None => run
            .git_dir
            .is_none_or(|dir| git_config::names_a_program(&dir, Some(&dir), home)),
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

/// A git read that prints tracked content (the table's `tracked_reads`:
/// `git grep`, `git show`, `git log -p`) reads every file the repository
/// tracks: each tracked path is judged as a walk's entry is, so a tracked
/// `.env` is a secret read with no name in the command. The repository is
/// found from every place the command may be in, and each one found is
/// read once; an index that cannot be read whole, more tracked files than
/// a walk's budget, or a place the gate cannot know leave the command
/// unproven.
pub(super) fn tracked_reads(args: &[String], paths: &Paths<'_>, table: &CommandClasses) -> Tracked {
    let starts: Vec<Option<PathBuf>> = match &paths.places {
        Some(places) => places.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let mut unproven = false;
    let mut repositories = BTreeMap::new();
    for start in starts {
        let Some(run) = GitRun::read(args, start) else {
            unproven = true;
            continue;
        };
        let repository = match (run.git_dir, run.start) {
            (Some(git_dir), Some(top)) => Some(git_config::Repository { git_dir, top }),
            (None, Some(start)) => git_config::repository(&start),
            (_, None) => {
                unproven = true;
                continue;
            }
        };
        // Outside a repository git finds none and prints nothing tracked.
        if let Some(repository) = repository {
            repositories.insert(repository.git_dir, repository.top);
        }
    }
    let mut classes = BTreeSet::new();
    for (git_dir, top) in repositories {
        match git_index::tracked(&git_dir) {
            Some(tracked) if tracked.len() <= walk::MAX_WALK_ENTRIES => {
                for path in tracked {
                    classes.extend(table.classify_word(&top.join(path).to_string_lossy()));
                }
            }
            _ => unproven = true,
        }
    }
    Tracked { classes, unproven }
}

/// What a git read's tracked files make of it.
pub(super) struct Tracked {
    /// The classes the rules give the tracked paths it prints.
    pub classes: BTreeSet<String>,
    /// Where it reads could not be looked through.
    pub unproven: bool,
}
