//! Where a command's words point: the folder it starts in, every folder its
//! `cd`s can take it to, and where a word leads through links from each.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::super::paths::{ResolvedPath, Root, resolve};

/// More folders than this reachable by a command's `cd`s: where a relative
/// word points is taken as unknown rather than looked up in each.
const MAX_PLACES: usize = 16;

/// Where the command's relative paths point.
pub(super) struct Paths<'a> {
    pub(super) cwd: &'a Path,
    pub(super) root: &'a Root,
    /// A `cd` ran first: relative paths point somewhere unknown.
    pub(super) moved: bool,
    /// Some `cd` goes into VCS metadata, or outside the root: a relative
    /// write after it may land there.
    pub(super) moved_into_vcs: bool,
    pub(super) moved_outside: bool,
    /// Every folder the command may be in when it runs a word: where it
    /// starts and every existing folder its `cd`s reach from there, in any
    /// order and any number of times (a loop, `||`, a subshell), canonical.
    /// `None` when a `cd` goes somewhere the text does not say (`cd "$X"`,
    /// `cd -`, `popd`) or to too many places to look in.
    pub(super) places: Option<Vec<PathBuf>>,
}

/// Where a word leads through links, from every place it may be read in.
pub(super) enum Leads {
    /// To these files, each reached through a link; `hardlinked` when a
    /// file it names has more than one name (the other may be a secret's).
    To {
        targets: Vec<String>,
        hardlinked: bool,
    },
    /// From a folder the gate cannot know: it may name any file.
    Unknown,
}

impl<'a> Paths<'a> {
    pub(super) fn new(
        cwd: &'a Path,
        root: &'a Root,
        moved: bool,
        directories: &[Option<String>],
    ) -> Self {
        let mut paths = Self {
            cwd,
            root,
            moved,
            moved_into_vcs: false,
            moved_outside: false,
            places: None,
        };
        paths.note_moves(directories);
        paths.places = places(cwd, root, directories);
        for place in paths.places.iter().flatten().skip(1) {
            match resolve(root, &place.to_string_lossy()) {
                Ok(resolved) => {
                    paths.moved_into_vcs |= resolved.in_vcs_metadata;
                    paths.moved_outside |= !resolved.inside_root;
                }
                Err(_) => paths.moved_outside = true,
            }
        }
        paths
    }

    fn note_moves(&mut self, directories: &[Option<String>]) {
        for directory in directories.iter().flatten() {
            let absolute = if directory.starts_with('/') || directory.starts_with('~') {
                directory.clone()
            } else {
                self.cwd.join(directory).to_string_lossy().into_owned()
            };
            match resolve(self.root, &absolute) {
                Ok(resolved) => {
                    self.moved_into_vcs |= resolved.in_vcs_metadata;
                    self.moved_outside |= !resolved.inside_root;
                }
                Err(_) => self.moved_outside = true,
            }
        }
    }

    /// Resolves a path the command names, as `write_file` would; `None`
    /// when where it points is unknown.
    pub(super) fn resolve(&self, target: &str) -> Option<ResolvedPath> {
        let expanded;
        let target = match tilde_prefix(target) {
            Tilde::None => target,
            Tilde::Home => target,
            Tilde::Cwd(rest) if !self.moved => {
                expanded = format!("{}{rest}", self.cwd.display());
                expanded.as_str()
            }
            Tilde::User(home, rest) => {
                expanded = format!("{}{rest}", home.display());
                expanded.as_str()
            }
            Tilde::Cwd(_) | Tilde::Unknown => return None,
        };
        let relative = !target.starts_with('/') && !target.starts_with('~');
        if relative && self.moved {
            return None;
        }
        let absolute = if relative {
            self.cwd.join(target).to_string_lossy().into_owned()
        } else {
            target.to_owned()
        };
        resolve(self.root, &absolute).ok()
    }

    /// Where `word` leads when it names an existing file through a link
    /// (any component a symbolic link), read from every place the command
    /// may be in: after `cd d`, `cat up/envlink` is looked up in `d` too.
    pub(super) fn leads(&self, word: &str) -> Leads {
        let from_places = |rest: &str| -> Option<Vec<PathBuf>> {
            let places = self.places.as_ref()?;
            Some(places.iter().map(|place| place.join(rest)).collect())
        };
        let joined = match tilde_prefix(word) {
            Tilde::None if word.starts_with('/') => Some(vec![PathBuf::from(word)]),
            Tilde::None => from_places(word),
            Tilde::Home => Some(
                self.root
                    .home()
                    .map(|home| home.join(word.trim_start_matches('~').trim_start_matches('/')))
                    .into_iter()
                    .collect(),
            ),
            Tilde::Cwd(rest) => from_places(rest.trim_start_matches('/')),
            Tilde::User(folder, rest) => Some(vec![folder.join(rest.trim_start_matches('/'))]),
            // `~-` (the folder before), or a user only a directory
            // service knows.
            Tilde::Unknown => None,
        };
        let Some(joined) = joined else {
            return Leads::Unknown;
        };
        let mut targets = Vec::new();
        let mut hardlinked = false;
        for path in &joined {
            let look = look(path);
            targets.extend(look.target);
            hardlinked |= look.hardlinked;
        }
        Leads::To {
            targets,
            hardlinked,
        }
    }

    pub(super) fn inside_root(&self, folder: &str) -> bool {
        self.resolve(folder)
            .is_some_and(|r| r.inside_root && !r.in_vcs_metadata)
    }
}

/// The folders a command may be in: `cwd`, then every existing folder a
/// `cd` target leads to from any folder found so far, until no new one
/// appears (a loop may run a `cd` any number of times). `None` for a
/// target the text does not give, a `~` with no known home, or more than
/// [`MAX_PLACES`] folders.
fn places(cwd: &Path, root: &Root, directories: &[Option<String>]) -> Option<Vec<PathBuf>> {
    let mut places = vec![cwd.to_path_buf()];
    let mut next = 0;
    while let Some(from) = places.get(next).cloned() {
        next += 1;
        for directory in directories {
            let directory = directory.as_deref()?;
            let target = match tilde_prefix(directory) {
                Tilde::None => from.join(directory),
                Tilde::Home => root
                    .home()?
                    .join(directory.trim_start_matches('~').trim_start_matches('/')),
                Tilde::Cwd(rest) => from.join(rest.trim_start_matches('/')),
                Tilde::User(home, rest) => home.join(rest.trim_start_matches('/')),
                Tilde::Unknown => return None,
            };
            // A folder that does not exist: that `cd` fails and the shell
            // stays where it was.
            let Ok(canonical) = std::fs::canonicalize(&target) else {
                continue;
            };
            if canonical.is_dir() && !places.contains(&canonical) {
                if places.len() >= MAX_PLACES {
                    return None;
                }
                places.push(canonical);
            }
        }
    }
    Some(places)
}

/// What one look at a path tells beyond its name.
#[derive(Default)]
struct Look {
    /// The canonical path it leads to, when it resolves elsewhere than it
    /// reads.
    target: Option<String>,
    /// A regular file with more than one name.
    hardlinked: bool,
}

/// Looks at `path`. Most words name nothing, and one look says so:
/// `realpath` fails wherever the path's last component cannot be looked at
/// (a component or a link's target missing), and it would read a link at
/// every component first, the root's own included.
fn look(path: &Path) -> Look {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Look::default();
    };
    let Ok(canonical) = std::fs::canonicalize(path) else {
        return Look::default();
    };
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let linked = canonical != lexical;
    // Through a link, the file is the target's: looked at once more.
    let file = if meta.file_type().is_symlink() {
        std::fs::metadata(&canonical).ok()
    } else {
        Some(meta)
    };
    Look {
        target: linked.then(|| canonical.to_string_lossy().into_owned()),
        hardlinked: file.is_some_and(|meta| meta.is_file() && meta.nlink() > 1),
    }
}

/// What a word's leading `~` stands for, as bash expands it.
pub(super) enum Tilde<'a> {
    None,
    /// `~` or `~/...`: the home folder (`facts::resolve` expands it).
    Home,
    /// `~+` or `~+/...`: the current folder, then the rest.
    Cwd(&'a str),
    /// `~user` or `~user/...`: that user's home folder, then the rest.
    User(std::path::PathBuf, &'a str),
    /// `~-` (the previous folder), or a user the system does not list.
    Unknown,
}

pub(super) fn tilde_prefix(word: &str) -> Tilde<'_> {
    let Some(after) = word.strip_prefix('~') else {
        return Tilde::None;
    };
    let (name, rest) = after.find('/').map_or((after, ""), |at| after.split_at(at));
    match name {
        "" => Tilde::Home,
        "+" => Tilde::Cwd(rest),
        _ => match home_of(name) {
            Some(home) => Tilde::User(home, rest),
            None => Tilde::Unknown,
        },
    }
}

/// The home folder `/etc/passwd` gives `user`; `None` for a user it does
/// not list (one from a directory service stays unknown).
fn home_of(user: &str) -> Option<std::path::PathBuf> {
    let valid = user
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[0] == user).then(|| std::path::PathBuf::from(fields[5]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders(words: &[&str]) -> Vec<Option<String>> {
        words.iter().map(|w| Some((*w).to_owned())).collect()
    }

    /// A root `ws` with `d/`, a link `d/up` back to `ws`, and `-x` and
    /// `d/envlink` leading to `.env`.
    fn workspace() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("d")).unwrap();
        std::fs::write(ws.join(".env"), "TOKEN=1").unwrap();
        std::os::unix::fs::symlink("..", ws.join("d/up")).unwrap();
        std::os::unix::fs::symlink(".env", ws.join("-x")).unwrap();
        std::os::unix::fs::symlink("../.env", ws.join("d/envlink")).unwrap();
        let root = Root::new(&ws).unwrap();
        (dir, root)
    }

    #[test]
    fn a_command_that_stays_has_one_place() {
        let (_dir, root) = workspace();
        let found = places(root.path(), &root, &[]).unwrap();
        assert_eq!(found, vec![root.path().to_path_buf()]);
    }

    #[test]
    fn every_folder_the_cds_reach_in_any_order_or_number_is_a_place() {
        let (_dir, root) = workspace();
        let ws = root.path();
        // `cd d` once, twice (a loop: `d/d` does not exist, so that `cd`
        // fails), and `cd up` from `d` back to the root.
        let found = places(ws, &root, &folders(&["up", "d"])).unwrap();
        assert_eq!(found, vec![ws.to_path_buf(), ws.join("d")]);
        let climbed = places(&ws.join("d"), &root, &folders(&["..", "missing"])).unwrap();
        assert!(climbed.contains(&ws.to_path_buf()));
        assert!(climbed.contains(&PathBuf::from("/")));
    }

    #[test]
    fn a_folder_the_text_does_not_give_leaves_the_places_unknown() {
        let (_dir, root) = workspace();
        assert_eq!(places(root.path(), &root, &[Some("d".into()), None]), None);
        assert_eq!(places(root.path(), &root, &folders(&["~-"])), None);
    }

    #[test]
    fn more_places_than_the_gate_looks_in_are_unknown() {
        let (_dir, root) = workspace();
        let deep = (0..MAX_PLACES).fold(root.path().to_path_buf(), |at, _| at.join("a"));
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(places(root.path(), &root, &folders(&["a"])), None);
        let shallow = places(&deep.join("../../.."), &root, &folders(&["a"])).unwrap();
        assert_eq!(shallow.len(), 4);
    }

    #[test]
    fn a_word_leads_through_a_link_from_every_place_it_may_be_read_in() {
        let (_dir, root) = workspace();
        let ws = root.path();
        let env = ws.join(".env").to_string_lossy().into_owned();
        let stays = Paths::new(ws, &root, false, &[]);
        let to = |leads: Leads| match leads {
            Leads::To { targets, .. } => Some(targets),
            Leads::Unknown => None,
        };
        assert_eq!(to(stays.leads("-x")), Some(vec![env.clone()]));
        assert_eq!(to(stays.leads("d/envlink")), Some(vec![env.clone()]));
        assert_eq!(to(stays.leads(".env")), Some(vec![]));
        assert_eq!(to(stays.leads("envlink")), Some(vec![]));
        let moved = Paths::new(ws, &root, true, &folders(&["d"]));
        assert_eq!(to(moved.leads("envlink")), Some(vec![env.clone()]));
        assert_eq!(to(moved.leads("up/-x")), Some(vec![env.clone()]));
        assert!(!moved.moved_outside && !moved.moved_into_vcs);
        let lost = Paths::new(ws, &root, true, &[None]);
        assert!(to(lost.leads("guide.md")).is_none());
        assert_eq!(
            to(lost.leads(&ws.join("-x").to_string_lossy())),
            Some(vec![env])
        );
    }

    #[test]
    fn a_file_with_another_name_is_told_by_the_same_look() {
        let (dir, root) = workspace();
        let ws = root.path();
        std::fs::write(dir.path().join("id_rsa"), "k").unwrap();
        std::fs::hard_link(dir.path().join("id_rsa"), ws.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink("../notes.txt", ws.join("d/notes")).unwrap();
        let paths = Paths::new(ws, &root, false, &[]);
        let hardlinked = |word: &str| match paths.leads(word) {
            Leads::To { hardlinked, .. } => hardlinked,
            Leads::Unknown => panic!("{word}: the place is known"),
        };
        assert!(hardlinked("notes.txt"));
        assert!(hardlinked("d/notes"), "through a link");
        assert!(!hardlinked(".env"));
        assert!(!hardlinked("d"));
        assert!(!hardlinked("missing"));
    }
}
