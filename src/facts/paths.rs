//! Where a path really points, judged against the workspace root.
//!
//! A path is resolved the way the kernel would walk it: one component at a
//! time, following every symlink (file or folder, chains included), so that
//! `..` after a symlink goes to the parent of the link's target, not of the
//! link. The part of a path that does not exist yet (the file a write will
//! create, the folders above it) is resolved lexically below its deepest
//! existing ancestor. What comes out is the path a tool will operate on, and
//! the decision is made on that path, never on the text the client sent.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use thiserror::Error;

/// Longest path text accepted, in bytes (Linux PATH_MAX).
pub const MAX_PATH_BYTES: usize = 4096;
/// How many symlinks one resolution may follow before it is called a loop
/// (Linux's MAXSYMLINKS).
const MAX_SYMLINK_HOPS: usize = 40;
/// Names that hold version-control metadata (folders, and the files some
/// systems keep instead): git, Mercurial, Subversion, Jujutsu, Bazaar, CVS,
/// darcs, pijul, Sapling, fossil. Matched ignoring ASCII case.
const VCS_METADATA_NAMES: [&str; 11] = [
    ".git",
    ".hg",
    ".svn",
    ".jj",
    ".bzr",
    "CVS",
    "_darcs",
    ".pijul",
    ".sl",
    ".fslckout",
    "_FOSSIL_",
];

#[derive(Debug, Error)]
pub enum PathError {
    #[error("the path is empty")]
    Empty,
    #[error("the path contains a NUL byte")]
    Nul,
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("`~user` paths are not supported; write the path out")]
    OtherUsersHome,
    #[error("the path starts with `~` but HOME is not set")]
    NoHome,
    #[error("too many levels of symbolic links (a loop?) at {0}")]
    SymlinkLoop(PathBuf),
    #[error("cannot inspect {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl PathError {
    /// Whether the error is about the text the client sent (and so can be
    /// told back), not about what the filesystem holds: a loop or an OS
    /// error names places, possibly outside the root, and tells whether
    /// they exist, so those are never shown to a client.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Self::Empty | Self::Nul | Self::TooLong | Self::OtherUsersHome | Self::NoHome
        )
    }
}

/// The workspace root, canonicalised once, and held open: tools reach what
/// is inside it through this handle, so a rename of a folder above the root
/// or a symlink swapped in on the way cannot take them elsewhere.
#[derive(Debug, Clone)]
pub struct Root {
    canonical: PathBuf,
    handle: Arc<OwnedFd>,
    /// The home folder `~` stands for in what runs here: the process's
    /// `HOME` unless given, so a judgement and the run it allows read the
    /// same `~`.
    home: Option<PathBuf>,
}

impl Root {
    pub fn new(path: &Path) -> Result<Self, PathError> {
        let canonical = path.canonicalize().map_err(|source| PathError::Io {
            path: path.to_owned(),
            source,
        })?;
        let handle = rustix::fs::open(
            &canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| PathError::Io {
            path: path.to_owned(),
            source: errno.into(),
        })?;
        Ok(Self {
            canonical,
            handle: Arc::new(handle),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        })
    }

    /// The same root, with `~` standing for `home` (none: `~` cannot be
    /// expanded).
    #[must_use]
    pub fn with_home(mut self, home: Option<PathBuf>) -> Self {
        self.home = home.filter(|h| !h.as_os_str().is_empty());
        self
    }

    pub fn path(&self) -> &Path {
        &self.canonical
    }

    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The root folder itself, opened when portcullis started.
    pub fn handle(&self) -> BorrowedFd<'_> {
        self.handle.as_fd()
    }
}

/// A path argument after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// What the client sent (after `~` expansion), joined onto the root if
    /// relative, with `.` removed but `..` and symlinks untouched.
    pub requested: PathBuf,
    /// Where the path really leads: symlinks followed, `..` applied.
    pub canonical: PathBuf,
    /// Whether `canonical` exists now.
    pub exists: bool,
    pub inside_root: bool,
    /// Some component of `canonical` or `requested` is a VCS metadata folder.
    pub in_vcs_metadata: bool,
    /// A regular file with more than one name: its other names may lie
    /// outside the root or under a secret's name, so it is judged as if it
    /// were outside the root.
    pub hardlinked: bool,
    /// The object the decision was made about: the file or folder at
    /// `canonical` when it exists, else its deepest existing folder. A tool
    /// opens it by handle and refuses to act if it is another object, so a
    /// rename between the decision and the run cannot redirect the call.
    pub anchor: Option<Anchor>,
}

/// An existing object on the path, and how far below it the path goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub id: FileId,
    /// Components of `canonical` below the anchor (0 when it exists).
    pub missing: usize,
}

/// Which object a path named: device and inode, as `stat` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

impl ResolvedPath {
    /// A path the filesystem would not let portcullis resolve (a loop, an
    /// unreadable folder): judged as outside the root, whatever it is.
    pub fn unresolvable(root: &Root, raw: &str) -> Self {
        let requested: PathBuf = root
            .path()
            .join(raw)
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        Self {
            in_vcs_metadata: is_vcs_metadata(&requested),
            canonical: requested.clone(),
            requested,
            exists: false,
            inside_root: false,
            hardlinked: false,
            anchor: None,
        }
    }

    /// The canonical path relative to the root, when inside it.
    pub fn relative<'a>(&'a self, root: &Root) -> Option<&'a Path> {
        self.canonical.strip_prefix(root.path()).ok()
    }
}

/// Resolves `raw`, relative to `root` unless absolute; `~` and `~/x` mean
/// the home folder, as an agent writing them means it.
pub fn resolve(root: &Root, raw: &str) -> Result<ResolvedPath, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.contains('\0') {
        return Err(PathError::Nul);
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    let expanded = expand_home(raw, root.home())?;
    let joined = root.path().join(expanded);
    let requested: PathBuf = joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let (canonical, missing) = walk(&requested)?;
    let exists = missing == 0;
    let existing: PathBuf = {
        let mut existing = canonical.clone();
        for _ in 0..missing {
            existing.pop();
        }
        existing
    };
    // Taken before the facts below, which then describe this object (or one
    // that replaced it, which the run would refuse as another object).
    let anchor_meta = std::fs::symlink_metadata(&existing).ok();
    let anchor = anchor_meta.as_ref().map(|meta| Anchor {
        id: FileId::of(meta),
        missing,
    });
    let inside_root = canonical.starts_with(root.path());
    let in_vcs_metadata = is_vcs_metadata(&canonical)
        || is_vcs_metadata(&requested)
        || in_git_dir_by_content(root, &canonical);
    let hardlinked = exists && anchor_meta.is_some_and(|m| m.is_file() && m.nlink() > 1);
    Ok(ResolvedPath {
        requested,
        canonical,
        exists,
        inside_root: inside_root && !hardlinked,
        in_vcs_metadata,
        hardlinked,
        anchor,
    })
}

fn expand_home(raw: &str, home: Option<&Path>) -> Result<PathBuf, PathError> {
    let Some(rest) = raw.strip_prefix('~') else {
        return Ok(PathBuf::from(raw));
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Err(PathError::OtherUsersHome);
    }
    let home = home.ok_or(PathError::NoHome)?;
    Ok(home.join(rest.trim_start_matches('/')))
}

/// Whether some component of `path` is a VCS metadata folder (`.git`, ...).
pub fn is_vcs_metadata(path: &Path) -> bool {
    path.components().any(|c| match c {
        Component::Normal(name) => is_vcs_name(name),
        _ => false,
    })
}

/// Whether the path lies in a git directory that goes by another name: a
/// bare repository, a submodule's or a worktree's git directory (the
/// target of a `.git` file's `gitdir:`). Git recognises one by its content
/// (a `HEAD` file with `objects/` and `refs/`, or with a `commondir`
/// file), so portcullis does too, for every folder from the path up to the
/// root.
fn in_git_dir_by_content(root: &Root, canonical: &Path) -> bool {
    canonical
        .ancestors()
        .take_while(|folder| folder.starts_with(root.path()))
        .any(is_git_dir)
}

/// Whether git would take `folder` for a git directory, whatever its name.
pub fn is_git_dir(folder: &Path) -> bool {
    let is_file = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    let is_dir = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_dir());
    is_file(&folder.join("HEAD"))
        && ((is_dir(&folder.join("objects")) && is_dir(&folder.join("refs")))
            || is_file(&folder.join("commondir")))
}

/// Whether a file or folder name is one of VCS metadata (`.git`, `.hg`, ...).
pub fn is_vcs_name(name: &OsStr) -> bool {
    name.to_str().is_some_and(|name| {
        VCS_METADATA_NAMES
            .iter()
            .any(|vcs| vcs.eq_ignore_ascii_case(name))
    })
}

/// Walks an absolute path component by component. Returns the resolved path
/// and how many of its last components do not exist (0: it exists).
fn walk(absolute: &Path) -> Result<(PathBuf, usize), PathError> {
    // Components still to walk, last first, so a symlink's target can be
    // pushed in front of the rest.
    let mut pending: Vec<PathBuf> = Vec::new();
    push_components(&mut pending, absolute);
    let mut resolved = PathBuf::from("/");
    // How many trailing components of `resolved` do not exist. Below a
    // missing component nothing can exist, so no symlink can be met there.
    let mut missing = 0usize;
    let mut hops = 0usize;
    while let Some(part) = pending.pop() {
        if part.as_os_str() == "/" {
            resolved = PathBuf::from("/");
            missing = 0;
            continue;
        }
        if part.as_os_str() == ".." {
            resolved.pop();
            missing = missing.saturating_sub(1);
            continue;
        }
        let candidate = resolved.join(&part);
        if missing > 0 {
            resolved = candidate;
            missing += 1;
            continue;
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(PathError::SymlinkLoop(candidate));
                }
                let target = std::fs::read_link(&candidate).map_err(|source| PathError::Io {
                    path: candidate.clone(),
                    source,
                })?;
                // A relative target is relative to the link's folder, which
                // `resolved` already is; an absolute one restarts at `/`.
                push_components(&mut pending, &target);
            }
            Ok(_) => resolved = candidate,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                resolved = candidate;
                missing = 1;
            }
            // A file where a folder was expected: the path cannot exist, and
            // nothing below it can be a symlink.
            Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
                resolved = candidate;
                missing = 1;
            }
            Err(source) => {
                return Err(PathError::Io {
                    path: candidate,
                    source,
                });
            }
        }
    }
    Ok((resolved, missing))
}

fn push_components(pending: &mut Vec<PathBuf>, path: &Path) {
    let parts: Vec<PathBuf> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(PathBuf::from("/")),
            Component::CurDir => None,
            Component::ParentDir => Some(PathBuf::from("..")),
            Component::Normal(name) => Some(PathBuf::from(name)),
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: Root,
        outside: PathBuf,
    }

    /// A root `ws/` with `src/main.rs` and `.git/config`, beside a folder
    /// `outside/` holding `secret.txt`.
    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::create_dir_all(ws.join(".git")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
        fs::write(ws.join(".git/config"), "[core]").unwrap();
        fs::write(outside.join("secret.txt"), "s").unwrap();
        let root = Root::new(&ws).unwrap();
        let outside = outside.canonicalize().unwrap();
        Fixture {
            _dir: dir,
            root,
            outside,
        }
    }

    fn ws(f: &Fixture) -> &Path {
        f.root.path()
    }

    #[test]
    fn vcs_metadata_under_other_names_and_by_content_is_vcs_metadata() {
        let f = fixture();
        for name in [
            "CVS",
            "cvs",
            "_darcs",
            ".pijul",
            ".sl",
            ".fslckout",
            "_FOSSIL_",
            ".GIT",
        ] {
            let p = resolve(&f.root, &format!("sub/{name}/x")).unwrap();
            assert!(p.in_vcs_metadata, "{name}");
        }
        // A bare repository, and a worktree's git directory, by content.
        let bare = ws(&f).join("mirror");
        fs::create_dir_all(bare.join("objects")).unwrap();
        fs::create_dir_all(bare.join("refs")).unwrap();
        fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(
            resolve(&f.root, "mirror/hooks/pre-commit")
                .unwrap()
                .in_vcs_metadata
        );
        assert!(resolve(&f.root, "mirror/config").unwrap().in_vcs_metadata);
        let linked = ws(&f).join("real");
        fs::create_dir_all(&linked).unwrap();
        fs::write(linked.join("HEAD"), "ref: refs/heads/x\n").unwrap();
        fs::write(linked.join("commondir"), "../mirror\n").unwrap();
        fs::create_dir_all(ws(&f).join("wt")).unwrap();
        fs::write(ws(&f).join("wt/.git"), "gitdir: ../real\n").unwrap();
        assert!(
            resolve(&f.root, "real/hooks/post-checkout")
                .unwrap()
                .in_vcs_metadata
        );
        assert!(resolve(&f.root, "wt/.git").unwrap().in_vcs_metadata);
        // A folder with a HEAD file alone is not a repository.
        fs::create_dir_all(ws(&f).join("notes")).unwrap();
        fs::write(ws(&f).join("notes/HEAD"), "x").unwrap();
        assert!(!resolve(&f.root, "notes/HEAD").unwrap().in_vcs_metadata);
        assert!(!resolve(&f.root, "src/main.rs").unwrap().in_vcs_metadata);
    }

    #[test]
    fn a_hardlinked_file_is_judged_as_outside_the_root() {
        let f = fixture();
        fs::hard_link(f.outside.join("secret.txt"), ws(&f).join("x")).unwrap();
        let p = resolve(&f.root, "x").unwrap();
        assert!(p.hardlinked && !p.inside_root && p.exists);
        // Both names of a link made inside the root count.
        fs::write(ws(&f).join(".env"), "K=V").unwrap();
        fs::hard_link(ws(&f).join(".env"), ws(&f).join("y")).unwrap();
        assert!(resolve(&f.root, "y").unwrap().hardlinked);
        assert!(resolve(&f.root, ".env").unwrap().hardlinked);
        assert!(!resolve(&f.root, "src/main.rs").unwrap().hardlinked);
    }

    #[test]
    fn a_plain_relative_file_is_inside() {
        let f = fixture();
        let p = resolve(&f.root, "src/main.rs").unwrap();
        assert_eq!(p.canonical, ws(&f).join("src/main.rs"));
        assert!(p.exists && p.inside_root && !p.in_vcs_metadata);
    }

    #[test]
    fn a_target_that_does_not_exist_yet_resolves_below_its_deepest_ancestor() {
        let f = fixture();
        let p = resolve(&f.root, "src/new/deeper/file.rs").unwrap();
        assert_eq!(p.canonical, ws(&f).join("src/new/deeper/file.rs"));
        assert!(!p.exists && p.inside_root);
    }

    #[test]
    fn dot_dot_that_escapes_is_outside() {
        let f = fixture();
        let p = resolve(&f.root, "src/../../outside/secret.txt").unwrap();
        assert_eq!(p.canonical, f.outside.join("secret.txt"));
        assert!(!p.inside_root);
    }

    #[test]
    fn dot_dot_through_a_missing_folder_is_applied_lexically() {
        let f = fixture();
        let p = resolve(&f.root, "nothere/../../outside/x").unwrap();
        assert_eq!(p.canonical, f.outside.join("x"));
        assert!(!p.inside_root);
        let p = resolve(&f.root, "nothere/../src/main.rs").unwrap();
        assert!(p.exists && p.inside_root);
    }

    #[test]
    fn dot_dot_that_stays_inside_is_inside() {
        let f = fixture();
        let p = resolve(&f.root, "src/../src/./main.rs").unwrap();
        assert_eq!(p.canonical, ws(&f).join("src/main.rs"));
        assert!(p.inside_root);
    }

    #[test]
    fn a_file_symlink_pointing_out_is_outside() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), ws(&f).join("innocent.txt")).unwrap();
        let p = resolve(&f.root, "innocent.txt").unwrap();
        assert_eq!(p.canonical, f.outside.join("secret.txt"));
        assert!(!p.inside_root);
    }

    #[test]
    fn a_folder_symlink_pointing_out_is_outside_also_for_new_files() {
        let f = fixture();
        symlink(&f.outside, ws(&f).join("docs")).unwrap();
        let p = resolve(&f.root, "docs/new.txt").unwrap();
        assert_eq!(p.canonical, f.outside.join("new.txt"));
        assert!(!p.inside_root && !p.exists);
    }

    #[test]
    fn a_relative_symlink_pointing_out_is_outside() {
        let f = fixture();
        symlink("../outside", ws(&f).join("rel")).unwrap();
        let p = resolve(&f.root, "rel/secret.txt").unwrap();
        assert_eq!(p.canonical, f.outside.join("secret.txt"));
        assert!(!p.inside_root);
    }

    #[test]
    fn dot_dot_after_a_symlink_goes_to_the_targets_parent() {
        let f = fixture();
        // ws/link -> outside/sub ; ws/link/.. is outside/, not ws/.
        fs::create_dir(f.outside.join("sub")).unwrap();
        symlink(f.outside.join("sub"), ws(&f).join("link")).unwrap();
        let p = resolve(&f.root, "link/../secret.txt").unwrap();
        assert_eq!(p.canonical, f.outside.join("secret.txt"));
        assert!(!p.inside_root);
    }

    #[test]
    fn a_chain_of_symlinks_is_followed_to_its_end() {
        let f = fixture();
        symlink("b", ws(&f).join("a")).unwrap();
        symlink("c", ws(&f).join("b")).unwrap();
        symlink(f.outside.join("secret.txt"), ws(&f).join("c")).unwrap();
        let p = resolve(&f.root, "a").unwrap();
        assert_eq!(p.canonical, f.outside.join("secret.txt"));
        assert!(!p.inside_root);
    }

    #[test]
    fn a_chain_that_stays_inside_is_inside() {
        let f = fixture();
        symlink("src", ws(&f).join("code")).unwrap();
        symlink("code/main.rs", ws(&f).join("entry")).unwrap();
        let p = resolve(&f.root, "entry").unwrap();
        assert_eq!(p.canonical, ws(&f).join("src/main.rs"));
        assert!(p.inside_root && p.exists);
    }

    #[test]
    fn a_dangling_symlink_resolves_to_where_a_write_would_land() {
        let f = fixture();
        symlink(f.outside.join("created-by-write"), ws(&f).join("dangling")).unwrap();
        let p = resolve(&f.root, "dangling").unwrap();
        assert_eq!(p.canonical, f.outside.join("created-by-write"));
        assert!(!p.inside_root && !p.exists);
    }

    #[test]
    fn a_symlink_loop_is_an_error() {
        let f = fixture();
        symlink("loop2", ws(&f).join("loop1")).unwrap();
        symlink("loop1", ws(&f).join("loop2")).unwrap();
        assert!(matches!(
            resolve(&f.root, "loop1/x"),
            Err(PathError::SymlinkLoop(_))
        ));
        symlink("self", ws(&f).join("self")).unwrap();
        assert!(matches!(
            resolve(&f.root, "self"),
            Err(PathError::SymlinkLoop(_))
        ));
    }

    #[test]
    fn an_absolute_path_inside_the_root_is_inside() {
        let f = fixture();
        let abs = ws(&f).join("src/main.rs");
        let p = resolve(&f.root, abs.to_str().unwrap()).unwrap();
        assert!(p.inside_root);
    }

    #[test]
    fn an_absolute_path_elsewhere_is_outside() {
        let f = fixture();
        let p = resolve(&f.root, "/etc/passwd").unwrap();
        assert!(!p.inside_root);
    }

    #[test]
    fn a_sibling_whose_name_extends_the_roots_is_outside() {
        let f = fixture();
        let sibling = format!("{}kit/x", ws(&f).display());
        let p = resolve(&f.root, &sibling).unwrap();
        assert!(!p.inside_root);
    }

    #[test]
    fn the_root_itself_is_inside() {
        let f = fixture();
        let p = resolve(&f.root, ".").unwrap();
        assert_eq!(p.canonical, ws(&f));
        assert!(p.inside_root);
    }

    #[test]
    fn tilde_means_home_and_is_judged_there() {
        let f = fixture();
        let home = std::env::var("HOME").unwrap();
        let p = resolve(&f.root, "~/.ssh/id_rsa").unwrap();
        assert!(p.requested.starts_with(&home));
        assert!(!p.inside_root);
        let p = resolve(&f.root, "~").unwrap();
        assert!(!p.inside_root);
    }

    #[test]
    fn another_users_home_is_refused() {
        let f = fixture();
        assert!(matches!(
            resolve(&f.root, "~root/.ssh"),
            Err(PathError::OtherUsersHome)
        ));
    }

    #[test]
    fn a_tilde_inside_a_name_is_just_a_character() {
        let f = fixture();
        let p = resolve(&f.root, "src/~backup").unwrap();
        assert_eq!(p.canonical, ws(&f).join("src/~backup"));
        assert!(p.inside_root);
    }

    #[test]
    fn an_empty_path_is_refused() {
        let f = fixture();
        assert!(matches!(resolve(&f.root, ""), Err(PathError::Empty)));
    }

    #[test]
    fn a_nul_byte_is_refused() {
        let f = fixture();
        assert!(matches!(
            resolve(&f.root, "src/main.rs\0.txt"),
            Err(PathError::Nul)
        ));
    }

    #[test]
    fn a_very_long_path_is_refused() {
        let f = fixture();
        let long = "a/".repeat(MAX_PATH_BYTES);
        assert!(matches!(resolve(&f.root, &long), Err(PathError::TooLong)));
        // Just under the limit is fine, even though it does not exist.
        let fits = "a/".repeat(MAX_PATH_BYTES / 2 - 1);
        assert!(resolve(&f.root, &fits).unwrap().inside_root);
    }

    #[test]
    fn paths_into_git_are_vcs_metadata() {
        let f = fixture();
        for raw in [
            ".git/config",
            ".git",
            ".git/hooks/pre-commit",
            "sub/.git/HEAD",
            ".GIT/config",
            ".hg/hgrc",
        ] {
            let p = resolve(&f.root, raw).unwrap();
            assert!(p.in_vcs_metadata, "{raw}");
            assert!(p.inside_root, "{raw}");
        }
        assert!(
            !resolve(&f.root, ".github/workflows/ci.yml")
                .unwrap()
                .in_vcs_metadata
        );
        assert!(!resolve(&f.root, ".gitignore").unwrap().in_vcs_metadata);
    }

    #[test]
    fn a_symlink_into_git_is_vcs_metadata() {
        let f = fixture();
        symlink(".git/config", ws(&f).join("harmless")).unwrap();
        let p = resolve(&f.root, "harmless").unwrap();
        assert!(p.in_vcs_metadata);
    }

    #[test]
    fn a_file_used_as_a_folder_does_not_exist() {
        let f = fixture();
        let p = resolve(&f.root, "src/main.rs/child").unwrap();
        assert!(!p.exists && p.inside_root);
    }
}
