//! What a git read reads beyond its words: the configuration of the
//! repository it finds (which may name a program to run) and, for a read
//! that prints tracked content, every file the repository tracks. Both
//! start from where git looks for its repository: every place the command
//! may be in, moved by `-C` and `--git-dir` as git reads them.

use std::collections::BTreeSet;
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
/// before the subcommand (`-C`, `--git-dir`), and the words from the
/// subcommand on.
struct GitRun<'a> {
    start: Option<PathBuf>,
    git_dir: Option<PathBuf>,
    subcommand: &'a [String],
}

impl<'a> GitRun<'a> {
    /// `None` when `--git-dir` names a relative folder from a place the
    /// gate cannot know.
    fn read(args: &'a [String], mut start: Option<PathBuf>) -> Option<Self> {
        let mut git_dir = None;
        let mut at = 0;
        while let Some(word) = args.get(at) {
            if !word.starts_with('-') {
                break;
            }
            at += 1;
            let mut value = |inline: Option<&str>| {
                inline.map(str::to_owned).or_else(|| {
                    let next = args.get(at).cloned();
                    at += 1;
                    next
                })
            };
            if word == "-C" {
                let folder = value(None);
                start = match (start, folder) {
                    (_, Some(folder)) if folder.starts_with('/') => Some(PathBuf::from(folder)),
                    (Some(from), Some(folder)) => Some(from.join(folder)),
                    _ => None,
                };
            } else if let Some(rest) = word.strip_prefix("--git-dir") {
                let folder = value(rest.strip_prefix('='));
                git_dir = match (&start, folder) {
                    (_, Some(folder)) if folder.starts_with('/') => Some(PathBuf::from(folder)),
                    (Some(from), Some(folder)) => Some(from.join(folder)),
                    _ => return None,
                };
            } else if [
                "-c",
                "--work-tree",
                "--namespace",
                "--exec-path",
                "--config-env",
            ]
            .contains(&word.as_str())
            {
                at += 1;
            }
        }
        Some(Self {
            start,
            git_dir,
            subcommand: args.get(at..).unwrap_or_default(),
        })
    }

    /// Whether it prints what the repository tracks: a search of the
    /// tracked files, a patch, a blob, an archive. `git log` prints commit
    /// messages unless asked for patches.
    fn prints_tracked_content(&self) -> bool {
        let Some((name, options)) = self.subcommand.split_first() else {
            return false;
        };
        let patch = || {
            options.iter().any(|word| {
                [
                    "-p",
                    "-u",
                    "-c",
                    "-m",
                    "--cc",
                    "--dd",
                    "--full-diff",
                    "--remerge-diff",
                ]
                .contains(&word.as_str())
                    || [
                        "--patch",
                        "--word-diff",
                        "--color-words",
                        "-L",
                        "-U",
                        "--unified",
                    ]
                    .iter()
                    .any(|prefix| word.starts_with(prefix))
            })
        };
        match name.as_str() {
            "grep" => !options.iter().any(|word| word == "--no-index"),
            "show" | "diff" | "diff-tree" | "diff-index" | "diff-files" | "cat-file" | "blame"
            | "annotate" | "archive" | "range-diff" | "format-patch" => true,
            "stash" => options.first().is_some_and(|word| word == "show"),
            "log" | "whatchanged" | "reflog" | "shortlog" => patch(),
            _ => false,
        }
    }
}

/// A git read that prints tracked content (`git grep`, `git show`, `git
/// log -p`) reads every file the repository tracks: each tracked path is
/// judged as a walk's entry is, so a tracked `.env` is a secret read with
/// no name in the command. From every place the command may be in; an
/// index that cannot be read whole, more tracked files than a walk's
/// budget, or a place the gate cannot know leave the command unproven.
pub(super) fn tracked_reads(args: &[String], paths: &Paths<'_>, table: &CommandClasses) -> Tracked {
    let starts: Vec<Option<PathBuf>> = match &paths.places {
        Some(places) => places.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let mut unproven = false;
    let mut classes = BTreeSet::new();
    for start in starts {
        let Some(run) = GitRun::read(args, start) else {
            unproven = true;
            continue;
        };
        if !run.prints_tracked_content() {
            continue;
        }
        let repository = match (run.git_dir, run.start) {
            (Some(git_dir), Some(top)) => Some(git_config::Repository { git_dir, top }),
            (None, Some(start)) => git_config::repository(&start),
            (_, None) => {
                unproven = true;
                continue;
            }
        };
        // Outside a repository git finds none and prints nothing tracked.
        let Some(repository) = repository else {
            continue;
        };
        match git_index::tracked(&repository.git_dir) {
            Some(tracked) if tracked.len() <= walk::MAX_WALK_ENTRIES => {
                for path in tracked {
                    let path = repository.top.join(path);
                    classes.extend(table.classify_word(&path.to_string_lossy()));
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
