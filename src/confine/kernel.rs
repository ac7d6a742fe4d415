//! Applies a [`Plan`] to this process before it becomes the command:
//! a mount namespace in which everything is read-only but the root (and a
//! private `/tmp`), VCS metadata read-only again inside the root, secrets
//! covered, no network unless allowed, then Landlock (writes only beneath
//! the root, no signals or abstract sockets out of the sandbox, no mount
//! changes), no new privileges and, for root, no capabilities.
//!
//! The mounts cover what Landlock does not (changes of mode, owner, times
//! and extended attributes); Landlock covers what mounts do not (a write
//! through another view of a file, `/proc/PID/root`, a process that could
//! remount). Either alone leaves a gap; together they are the hard
//! constraint's floor.
//!
//! Must run in a single-threaded process: `unshare` of a user namespace
//! refuses a threaded one, and the `confined` subcommand starts no thread.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};
use nix::sched::{CloneFlags, unshare};
use rustix::fs::{CWD, StatVfsMountFlags, statvfs};
use rustix::mount::{
    MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags, mount, mount_bind,
    mount_bind_recursive, mount_change, mount_remount, move_mount, open_tree,
};
use rustix::thread::{
    CapabilitiesSecureBits, CapabilitySet, CapabilitySets, capability_is_in_bounding_set,
    clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    set_capabilities_secure_bits,
};
use thiserror::Error;

use super::Plan;
use super::mountinfo::mount_points;

/// Private, writable scratch folders a confined command gets instead of
/// the machine's own.
const SCRATCH: [&str; 2] = ["/tmp", "/dev/shm"];

/// What kept the plan from being applied: each names the kernel feature
/// or the step that failed. The command has not run.
#[derive(Debug, Error)]
pub enum ConfineError {
    #[error(
        "the kernel offers no Landlock (it needs Linux 5.13 or later with `landlock` in the LSM list)"
    )]
    NoLandlock,
    #[error(
        "no mount namespace could be made ({0}): unprivileged user namespaces must be enabled (kernel.unprivileged_userns_clone, user.max_user_namespaces)"
    )]
    Namespaces(nix::Error),
    #[error("the user namespace's identity cannot be written ({0})")]
    IdentityMap(io::Error),
    #[error("{what} {}: {err}", path.display())]
    Mount {
        what: &'static str,
        path: PathBuf,
        err: io::Error,
    },
    #[error("Landlock refused the rules: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("Landlock could not open {}: {err}", path.display())]
    LandlockPath {
        path: PathBuf,
        err: landlock::PathFdError,
    },
    #[error("the capabilities cannot be dropped ({0})")]
    Capabilities(io::Error),
    #[error("cannot enter {}: {err}", path.display())]
    Cwd { path: PathBuf, err: io::Error },
}

fn mount_error(what: &'static str, path: &Path) -> impl FnOnce(rustix::io::Errno) -> ConfineError {
    let path = path.to_owned();
    move |errno| ConfineError::Mount {
        what,
        path,
        err: errno.into(),
    }
}

/// Confines this process as `plan` says, with Landlock ABI `abi` (the
/// kernel's, as [`super::landlock_abi`] found it).
pub fn apply(plan: &Plan, abi: i32) -> Result<(), ConfineError> {
    if abi < 1 {
        return Err(ConfineError::NoLandlock);
    }
    let privileged = rustix::process::geteuid().is_root();
    enter_namespaces(privileged, plan.network)?;
    mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(mount_error("cannot make private", Path::new("/")))?;
    // The root as it is now, before anything above it turns read-only or
    // a scratch folder covers it.
    let root_tree = open_tree(
        CWD,
        &plan.root,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )
    .map_err(mount_error("cannot take the root", &plan.root))?;
    let scratch = read_only_world(plan)?;
    move_mount(
        &root_tree,
        "",
        CWD,
        &plan.root,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(mount_error("cannot mount the root on", &plan.root))?;
    let writable: Vec<&Path> = plan
        .writable
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.is_dir())
        .collect();
    for folder in &writable {
        bind_writable(folder)?;
    }
    for path in plan.read_only.iter().filter(|p| p.starts_with(&plan.root)) {
        bind_read_only(path)?;
    }
    for path in &plan.hidden {
        hide(path)?;
    }
    std::env::set_current_dir(&plan.cwd).map_err(|err| ConfineError::Cwd {
        path: plan.cwd.clone(),
        err,
    })?;
    let mut granted = scratch;
    granted.extend(writable);
    restrict_writes(plan, &granted, ABI::from(abi))?;
    if privileged {
        drop_capabilities().map_err(|errno| ConfineError::Capabilities(errno.into()))?;
    }
    Ok(())
}

/// Every mount read-only, then private scratch folders (when the plan
/// asks) over the shared temporary ones; returns those folders, which stay
/// writable.
fn read_only_world(plan: &Plan) -> Result<Vec<&'static Path>, ConfineError> {
    let table = fs::read_to_string("/proc/self/mountinfo").map_err(|err| ConfineError::Mount {
        what: "cannot read",
        path: PathBuf::from("/proc/self/mountinfo"),
        err,
    })?;
    for point in mount_points(&table) {
        remount_read_only(&point)?;
    }
    let scratch: Vec<&'static Path> = SCRATCH
        .iter()
        .map(Path::new)
        .filter(|p| plan.private_tmp && p.is_dir())
        .collect();
    for folder in &scratch {
        mount(
            "tmpfs",
            *folder,
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            c"mode=1777",
        )
        .map_err(mount_error(
            "cannot mount a private scratch folder on",
            folder,
        ))?;
    }
    if scratch.iter().any(|s| plan.root.starts_with(s)) {
        fs::create_dir_all(&plan.root).map_err(|err| ConfineError::Mount {
            what: "cannot make the root's mount point",
            path: plan.root.clone(),
            err,
        })?;
    }
    Ok(scratch)
}

/// A mount namespace (in a user namespace of its own unless this process
/// is root already) and, without network, a network namespace with no
/// interface up. Inside the user namespace the user keeps their own ids,
/// so the command they start has no capabilities.
fn enter_namespaces(privileged: bool, network: bool) -> Result<(), ConfineError> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = CloneFlags::CLONE_NEWNS;
    if !privileged {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    if !network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(ConfineError::Namespaces)?;
    if !privileged {
        match fs::write("/proc/self/setgroups", "deny") {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                return Err(ConfineError::IdentityMap(err));
            }
            _ => {}
        }
        fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))
            .and_then(|()| fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")))
            .map_err(ConfineError::IdentityMap)?;
    }
    Ok(())
}

/// The flags a bind remount must keep: in a user namespace the kernel
/// refuses one that would clear a flag the mount had.
fn kept_flags(path: &Path) -> MountFlags {
    let Ok(stat) = statvfs(path) else {
        return MountFlags::empty();
    };
    let mut flags = MountFlags::empty();
    for (has, keep) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if stat.f_flag.contains(has) {
            flags |= keep;
        }
    }
    flags
}

/// Remounts one mount point read-only. A mount point this process cannot
/// reach (covered, or refused to it) is one it cannot write through
/// either; the kernel's own virtual file systems are left as they are
/// (`/proc` and `/sys` have their own permissions, and `/dev`'s devices
/// are written whatever the mount says).
fn remount_read_only(point: &Path) -> Result<(), ConfineError> {
    let result = mount_remount(
        point,
        MountFlags::BIND | MountFlags::RDONLY | kept_flags(point),
        "",
    );
    match result {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::ACCESS) => Ok(()),
        Err(_)
            if ["/proc", "/sys", "/dev"]
                .iter()
                .any(|v| point.starts_with(v)) =>
        {
            Ok(())
        }
        Err(errno) => Err(mount_error("cannot make read-only", point)(errno)),
    }
}

/// A folder outside the root the plan lets the process write: its own
/// mount, writable again.
fn bind_writable(folder: &Path) -> Result<(), ConfineError> {
    mount_bind_recursive(folder, folder).map_err(mount_error("cannot bind", folder))?;
    mount_remount(folder, MountFlags::BIND | kept_flags(folder), "")
        .map_err(mount_error("cannot make writable", folder))
}

fn bind_read_only(path: &Path) -> Result<(), ConfineError> {
    if path.is_dir() {
        mount_bind_recursive(path, path)
    } else {
        mount_bind(path, path)
    }
    .map_err(mount_error("cannot bind", path))?;
    mount_remount(
        path,
        MountFlags::BIND | MountFlags::RDONLY | kept_flags(path),
        "",
    )
    .map_err(mount_error("cannot make read-only", path))
}

/// Covers a secret: an empty, read-only folder over a folder, the null
/// device over a file.
fn hide(path: &Path) -> Result<(), ConfineError> {
    let result = if path.is_dir() {
        mount(
            "tmpfs",
            path,
            "tmpfs",
            MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            c"size=4k,mode=000",
        )
    } else {
        mount_bind("/dev/null", path)
    };
    match result {
        // Gone, or under a private scratch folder now: nothing to cover.
        Err(rustix::io::Errno::NOENT) => Ok(()),
        other => other.map_err(mount_error("cannot cover the secret", path)),
    }
}

/// Landlock: every write access the ABI knows is handled, and granted only
/// beneath the root and the folders `granted` (scratch, or what a server's
/// entry names); devices may be written (the null device, terminals),
/// never created. With ABI 6, signals and
/// abstract sockets cannot reach outside the sandbox.
fn restrict_writes(plan: &Plan, granted: &[&Path], abi: ABI) -> Result<(), ConfineError> {
    let write = AccessFs::from_write(abi);
    let devices = write & (AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev);
    let mut ruleset = Ruleset::default().handle_access(write)?;
    let scopes: BitFlags<Scope> = Scope::from_all(abi);
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes)?;
    }
    let mut created = ruleset.create()?;
    let mut grants: Vec<(&Path, BitFlags<AccessFs>)> = vec![(&plan.root, write)];
    grants.extend(granted.iter().map(|s| (*s, write)));
    grants.push((Path::new("/dev"), devices));
    for (path, access) in grants {
        let fd = PathFd::new(path).map_err(|err| ConfineError::LandlockPath {
            path: path.to_owned(),
            err,
        })?;
        created = created.add_rule(PathBeneath::new(fd, access))?;
    }
    let status = created.restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(ConfineError::NoLandlock);
    }
    Ok(())
}

/// Root keeps no capability across the command's `execve`: the bounding
/// set is emptied and the secure bits stop root from regaining any.
fn drop_capabilities() -> rustix::io::Result<()> {
    set_capabilities_secure_bits(
        CapabilitiesSecureBits::NO_ROOT
            | CapabilitiesSecureBits::NO_ROOT_LOCKED
            | CapabilitiesSecureBits::NO_SETUID_FIXUP
            | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED,
    )?;
    for bit in 0..64 {
        let capability = CapabilitySet::from_bits_retain(1 << bit);
        if capability_is_in_bounding_set(capability).unwrap_or(false) {
            remove_capability_from_bounding_set(capability)?;
        }
    }
    clear_ambient_capability_set()?;
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
}
