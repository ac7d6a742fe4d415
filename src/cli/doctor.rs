//! `portcullis doctor`: what the features need on this machine, each found
//! or not, and for each that is missing the exact command that fixes it.
//! The proof of the hard constraints needs cvc5; confinement needs
//! Landlock and unprivileged user namespaces; the token store and the
//! audit log must be the owner's alone. Node and Chromium are only for the
//! project's own tests, so their absence is a note, not a failure.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::state_paths::{StoreArgs, audit_path};
use super::{Exit, Format, print_json};
use crate::confine::landlock_abi;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The audit log `serve` writes [default: audit/audit.jsonl beside the
    /// token store].
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
}

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Ok,
    /// A feature of portcullis does not work without it.
    Missing,
    /// Worth fixing, but nothing portcullis does stops for it.
    Note,
}

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    status: Status,
    /// What was found.
    found: String,
    /// What it is needed for.
    needed_for: &'static str,
    /// The command that fixes it, when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

pub fn run(args: &DoctorArgs, format: Format) -> anyhow::Result<Exit> {
    let checks = vec![
        cvc5(),
        landlock(),
        user_namespaces(),
        token_store(args.store.resolve()),
        audit_folder(audit_path(args.audit.as_deref()).ok()),
        node(),
        chromium(),
    ];
    let ready = checks.iter().all(|check| check.status != Status::Missing);
    match format {
        Format::Json => print_json(&json!({"ready": ready, "checks": checks}))?,
        Format::Human => {
            for check in &checks {
                let mark = match check.status {
                    Status::Ok => "ok     ",
                    Status::Missing => "MISSING",
                    Status::Note => "note   ",
                };
                println!("{mark} {:<16} {}", check.name, check.found);
                if let Some(fix) = &check.fix {
                    println!("        {:<16} needed for {}", "", check.needed_for);
                    println!("        {:<16} fix: {fix}", "");
                }
            }
            println!(
                "{}",
                if ready {
                    "ready: every feature has what it needs"
                } else {
                    "not ready: fix what is MISSING above"
                }
            );
        }
    }
    Ok(if ready { Exit::Ok } else { Exit::Failure })
}

/// The first line a program prints for `args`, if it runs and succeeds.
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().next().map(|line| line.trim().to_owned())
}

fn cvc5() -> Check {
    let program = std::env::var("CVC5").unwrap_or_else(|_| "cvc5".into());
    let found = first_line(&program, &["--version"]);
    let runs = found.is_some();
    Check {
        name: "cvc5",
        status: if runs { Status::Ok } else { Status::Missing },
        found: found.unwrap_or_else(|| format!("`{program}` does not run")),
        needed_for: "proving the hard constraints at every load, `policy diff`, `policy review` and tighten-only reload",
        fix: (!runs).then(|| "apt-get install cvc5   (or set CVC5 to its path)".to_owned()),
    }
}

fn landlock() -> Check {
    let abi = landlock_abi();
    Check {
        name: "landlock",
        status: if abi > 0 { Status::Ok } else { Status::Missing },
        found: if abi > 0 {
            format!("ABI {abi}")
        } else {
            "the kernel offers no Landlock".to_owned()
        },
        needed_for: "confining what `exec` runs and every stdio downstream server",
        fix: (abi == 0).then(|| {
            "boot Linux 5.13 or later with `landlock` in its lsm= list (e.g. lsm=landlock,lockdown,yama,integrity,apparmor)".to_owned()
        }),
    }
}

/// A sysctl's value, if the file exists.
fn sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn user_namespaces() -> Check {
    let most = sysctl("/proc/sys/user/max_user_namespaces");
    let unprivileged = sysctl("/proc/sys/kernel/unprivileged_userns_clone");
    let apparmor = sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    let fix = if most == Some(0) {
        Some("sysctl -w user.max_user_namespaces=15000")
    } else if unprivileged == Some(0) {
        Some("sysctl -w kernel.unprivileged_userns_clone=1")
    } else if apparmor == Some(1) {
        Some("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
    } else if most.is_none() {
        Some("enable CONFIG_USER_NS in the kernel")
    } else {
        None
    };
    Check {
        name: "user namespaces",
        status: if fix.is_none() {
            Status::Ok
        } else {
            Status::Missing
        },
        found: match (fix, most) {
            (None, Some(most)) => format!("unprivileged, up to {most}"),
            _ => "unprivileged user namespaces are not available".to_owned(),
        },
        needed_for: "the private /tmp and read-only mounts of what `exec` runs",
        fix: fix.map(str::to_owned),
    }
}

/// The mode bits of `path`, if it exists.
fn mode(path: &Path) -> Option<u32> {
    std::fs::metadata(path)
        .ok()
        .map(|meta| meta.permissions().mode() & 0o777)
}

fn token_store(path: Option<PathBuf>) -> Check {
    let needed_for = "serving: every client's token hash lives there";
    let Some(path) = path else {
        return Check {
            name: "token store",
            status: Status::Missing,
            found:
                "no path: neither --store, PORTCULLIS_TOKEN_STORE, XDG_STATE_HOME nor HOME is set"
                    .to_owned(),
            needed_for,
            fix: Some("export HOME=/path/to/home   (or pass --store FILE)".to_owned()),
        };
    };
    let shown = path.display().to_string();
    match mode(&path) {
        None => Check {
            name: "token store",
            status: Status::Note,
            found: format!("{shown} does not exist yet"),
            needed_for,
            fix: Some("portcullis token create NAME".to_owned()),
        },
        Some(bits) if bits & 0o077 != 0 => Check {
            name: "token store",
            status: Status::Missing,
            found: format!("{shown} is mode {bits:o}: others can read or write it"),
            needed_for,
            fix: Some(format!("chmod 600 {shown}")),
        },
        Some(bits) => Check {
            name: "token store",
            status: Status::Ok,
            found: format!("{shown} (mode {bits:o})"),
            needed_for,
            fix: None,
        },
    }
}

fn audit_folder(log: Option<PathBuf>) -> Check {
    let needed_for = "the audit log: only portcullis may write it";
    let Some(folder) = log.as_deref().and_then(Path::parent).map(Path::to_owned) else {
        return Check {
            name: "audit folder",
            status: Status::Missing,
            found: "no path: neither --audit, PORTCULLIS_AUDIT, XDG_STATE_HOME nor HOME is set"
                .to_owned(),
            needed_for,
            fix: Some("export PORTCULLIS_AUDIT=/path/to/audit.jsonl".to_owned()),
        };
    };
    let shown = folder.display().to_string();
    match mode(&folder) {
        None => Check {
            name: "audit folder",
            status: Status::Note,
            found: format!("{shown} does not exist yet (serve makes it)"),
            needed_for,
            fix: Some(format!("mkdir -m 700 -p {shown}")),
        },
        Some(bits) if bits & 0o022 != 0 => Check {
            name: "audit folder",
            status: Status::Missing,
            found: format!("{shown} is mode {bits:o}: others can write in it"),
            needed_for,
            fix: Some(format!("chmod 700 {shown}")),
        },
        Some(bits) => {
            let loose_log = log
                .as_deref()
                .and_then(mode)
                .filter(|bits| bits & 0o077 != 0);
            match loose_log {
                Some(log_bits) => Check {
                    name: "audit folder",
                    status: Status::Missing,
                    found: format!("the log in {shown} is mode {log_bits:o}"),
                    needed_for,
                    fix: log.map(|log| format!("chmod 600 {}", log.display())),
                },
                None => Check {
                    name: "audit folder",
                    status: Status::Ok,
                    found: format!("{shown} (mode {bits:o})"),
                    needed_for,
                    fix: None,
                },
            }
        }
    }
}

fn node() -> Check {
    let found = first_line("node", &["--version"]);
    let major = found.as_deref().and_then(|v| {
        v.trim_start_matches('v')
            .split('.')
            .next()?
            .parse::<u32>()
            .ok()
    });
    let fine = major.is_some_and(|major| major >= 20);
    Check {
        name: "node",
        status: if fine { Status::Ok } else { Status::Note },
        found: found.unwrap_or_else(|| "`node` does not run".to_owned()),
        needed_for: "the interop tests with real clients and servers from npm (not for serving)",
        fix: (!fine).then(|| "apt-get install nodejs npm   (Node 20 or later)".to_owned()),
    }
}

fn chromium() -> Check {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|program| first_line(program, &["--version"]));
    Check {
        name: "chromium",
        status: if found.is_some() {
            Status::Ok
        } else {
            Status::Note
        },
        found: found
            .clone()
            .unwrap_or_else(|| "no Chromium runs".to_owned()),
        needed_for: "rendering `policy review --html` in its test (not for serving)",
        fix: found
            .is_none()
            .then(|| "apt-get install chromium".to_owned()),
    }
}
