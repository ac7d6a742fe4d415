//! The trees a command reads every file of (`grep -r`, `rg`, `find -exec`),
//! looked through for the secrets it would read: `grep -r TOKEN ~` reads
//! `~/.ssh` as surely as `cat ~/.ssh/id_rsa` does. The look is bounded; a
//! tree too large to look through is not proven free of secrets.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;

/// Most entries looked at for one command, over all its trees.
pub const MAX_WALK_ENTRIES: usize = 20_000;

/// Looks through `folders` as the program would walk them: everything, or
/// (for walks that are not `everything`, as ripgrep's) without hidden files
/// and what ignore files exclude. Symbolic links are followed, and a link
/// is judged by what it points at as well as by its own name: `grep -R`,
/// `find -L` and `rg -L` follow them, and judging every walk as if it did
/// is only stricter. `globs` narrow what is read as ripgrep's
/// `-g` does (`GLOB` only what matches, `!GLOB` not that); one that does
/// not compile narrows nothing. `classes_of` adds the classes the rules
/// give an entry's path (with `folders_only`, a listing's, only a
/// folder's); `budget` is what is left of `MAX_WALK_ENTRIES`.
pub fn reach(
    folders: &[PathBuf],
    everything: bool,
    folders_only: bool,
    globs: &[String],
    classes_of: &mut dyn FnMut(&str),
    budget: &mut usize,
) -> Reach {
    let mut reached = Reach {
        whole: true,
        hardlinked: None,
    };
    let Some((first, rest)) = folders.split_first() else {
        return reached;
    };
    let mut builder = WalkBuilder::new(first);
    for folder in rest {
        builder.add(folder);
    }
    builder.standard_filters(!everything).follow_links(true);
    if !globs.is_empty() {
        let mut narrowed = OverrideBuilder::new(first);
        for glob in globs {
            // A glob that will not compile reads more, never less.
            let _ = narrowed.add(glob);
        }
        if let Ok(narrowed) = narrowed.build() {
            builder.overrides(narrowed);
        }
    }
    for entry in builder.build() {
        // An entry that cannot be read is not read by the program either.
        let Ok(entry) = entry else { continue };
        if *budget == 0 {
            reached.whole = false;
            return reached;
        }
        *budget -= 1;
        if folders_only && !entry.path().is_dir() {
            continue;
        }
        classes_of(&entry.path().to_string_lossy());
        if entry.path_is_symlink()
            && let Ok(target) = std::fs::canonicalize(entry.path())
        {
            classes_of(&target.to_string_lossy());
        }
        // A file with another name may be that name's secret, and the
        // other name may lie outside every tree looked through.
        if reached.hardlinked.is_none()
            && !folders_only
            && entry.file_type().is_some_and(|kind| kind.is_file())
            && entry.metadata().is_ok_and(|meta| meta.nlink() > 1)
        {
            reached.hardlinked = Some(entry.path().to_path_buf());
        }
    }
    reached
}

/// What a walk found beyond the classes of the paths it reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// The trees were looked through to the end, within the budget.
    pub whole: bool,
    /// The first file it reads that has more than one name.
    pub hardlinked: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The secrets each walk reaches, or `None` when it ran out of budget.
    fn secrets(folder: &std::path::Path, everything: bool, budget: usize) -> Option<Vec<String>> {
        let mut found = Vec::new();
        let mut budget = budget;
        let mut note = |path: &str| {
            if path.ends_with("/.env") || path.ends_with("/id_rsa") {
                found.push(path.rsplit('/').next().unwrap_or("").to_owned());
            }
        };
        let reached = reach(
            &[folder.to_path_buf()],
            everything,
            false,
            &[],
            &mut note,
            &mut budget,
        );
        reached.whole.then_some(found)
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("src/deep/main.rs"), "fn main() {}").unwrap();
        dir
    }

    #[test]
    fn a_secret_anywhere_in_the_tree_is_found() {
        let dir = tree();
        assert_eq!(secrets(dir.path(), true, MAX_WALK_ENTRIES), Some(vec![]));
        std::fs::write(dir.path().join("src/deep/id_rsa"), "k").unwrap();
        assert_eq!(
            secrets(dir.path(), true, MAX_WALK_ENTRIES),
            Some(vec!["id_rsa".into()])
        );
    }

    #[test]
    fn a_visible_walk_skips_hidden_and_ignored_files_as_ripgrep_does() {
        let dir = tree();
        std::fs::write(dir.path().join(".env"), "T=1").unwrap();
        assert_eq!(secrets(dir.path(), false, MAX_WALK_ENTRIES), Some(vec![]));
        assert_eq!(
            secrets(dir.path(), true, MAX_WALK_ENTRIES),
            Some(vec![".env".into()])
        );
        // A secret that is not hidden is read unless an ignore file says so.
        std::fs::write(dir.path().join("src/id_rsa"), "k").unwrap();
        assert_eq!(
            secrets(dir.path(), false, MAX_WALK_ENTRIES),
            Some(vec!["id_rsa".into()])
        );
        std::fs::write(dir.path().join(".ignore"), "id_rsa\n").unwrap();
        assert_eq!(secrets(dir.path(), false, MAX_WALK_ENTRIES), Some(vec![]));
    }

    #[test]
    fn globs_narrow_the_walk_as_grep_include_and_rg_g_do() {
        let dir = tree();
        std::fs::write(dir.path().join("src/.env"), "T=1").unwrap();
        let walk = |globs: &[&str]| {
            let globs: Vec<String> = globs.iter().map(|g| (*g).to_owned()).collect();
            let mut found = 0;
            let mut budget = MAX_WALK_ENTRIES;
            let mut note = |path: &str| found += usize::from(path.ends_with("/.env"));
            reach(
                &[dir.path().to_path_buf()],
                true,
                false,
                &globs,
                &mut note,
                &mut budget,
            );
            found
        };
        assert_eq!(walk(&[]), 1);
        assert_eq!(walk(&["*.rs"]), 0);
        assert_eq!(walk(&["!.env"]), 0);
        assert_eq!(walk(&["!src/"]), 0);
        assert_eq!(walk(&["*.env"]), 1);
    }

    #[test]
    fn a_tree_larger_than_the_budget_is_not_looked_through() {
        let dir = tree();
        assert_eq!(secrets(dir.path(), true, 2), None);
        assert!(secrets(dir.path(), true, 4).is_some());
    }

    #[test]
    fn links_are_followed_and_judged_by_what_they_point_at() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join(".ssh")).unwrap();
        std::fs::write(outside.path().join(".ssh/key"), "k").unwrap();
        std::fs::write(outside.path().join("plain"), "p").unwrap();
        let dir = tree();
        std::os::unix::fs::symlink(outside.path().join(".ssh"), dir.path().join("src/keys"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path().join("plain"), dir.path().join("src/envlink"))
            .unwrap();
        let mut seen = Vec::new();
        let mut budget = MAX_WALK_ENTRIES;
        assert!(
            reach(
                &[dir.path().join("src")],
                false,
                false,
                &[],
                &mut |p| seen.push(p.to_owned()),
                &mut budget
            )
            .whole
        );
        assert!(seen.iter().any(|p| p.ends_with("src/keys/key")), "{seen:?}");
        assert!(
            seen.iter().any(|p| p.ends_with(".ssh")),
            "the link's target: {seen:?}"
        );
        assert!(seen.iter().any(|p| p.ends_with("/plain")), "{seen:?}");
    }

    #[test]
    fn a_file_with_another_name_is_noted_where_its_content_is_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), "k").unwrap();
        let dir = tree();
        let walk = |folders_only: bool| {
            let mut budget = MAX_WALK_ENTRIES;
            reach(
                &[dir.path().to_path_buf()],
                true,
                folders_only,
                &[],
                &mut |_| {},
                &mut budget,
            )
        };
        assert_eq!(walk(false).hardlinked, None);
        std::fs::hard_link(
            outside.path().join("id_rsa"),
            dir.path().join("src/notes.txt"),
        )
        .unwrap();
        assert_eq!(
            walk(false),
            Reach {
                whole: true,
                hardlinked: Some(dir.path().join("src/notes.txt"))
            }
        );
        // A listing reads names, not contents.
        assert_eq!(walk(true).hardlinked, None);
    }
}
