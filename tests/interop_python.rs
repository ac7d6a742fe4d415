//! Interop with the official Python MCP SDK: runs `tests/interop` with
//! pytest, in a virtual environment this test creates (once) under cargo's
//! target folder, from `tests/interop/requirements.txt`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtual environment, made once per test process: tests that need it
/// run in parallel, and two making it at once would each delete the other's.
pub fn venv() -> PathBuf {
    static VENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    VENV.get_or_init(make_venv).clone()
}

fn make_venv() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let requirements = manifest.join("tests/interop/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).unwrap();
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let marker = venv.join("portcullis-requirements.txt");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
        return venv;
    }
    let _ = std::fs::remove_dir_all(&venv);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let status = Command::new(&python)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(status.success(), "{python} -m venv failed");
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "pip install -r {} failed",
        requirements.display()
    );
    std::fs::write(&marker, wanted).unwrap();
    venv
}

/// Runs pytest over `tests/interop` with `args` and `env`, and fails
/// unless it passed with nothing failed, errored or skipped (a skipped test
/// proves nothing); how many tests ran, and what it printed.
pub fn pytest(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> (u64, String) {
    let venv = venv();
    let report = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new(venv.join("bin/pytest"))
        .args(["-q", "-p", "no:cacheprovider"])
        .args(args)
        .arg(format!("--junitxml={}", report.path().display()))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop"))
        .env("PORTCULLIS_BIN", env!("CARGO_BIN_EXE_portcullis"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The runner's exit code says whether anything failed (0: all passed;
    // 5: nothing was collected, which fails too).
    assert_eq!(
        output.status.code(),
        Some(0),
        "pytest failed:\n{stdout}\n{stderr}"
    );
    let report = std::fs::read_to_string(report.path()).unwrap();
    let count = |name: &str| -> u64 {
        let pattern = format!(r#"<testsuite [^>]*\b{name}="(\d+)""#);
        let found = regex::Regex::new(&pattern).unwrap().captures(&report);
        found.unwrap_or_else(|| panic!("no {name} count in the report: {report}"))[1]
            .parse()
            .unwrap()
    };
    assert_eq!(
        (count("failures"), count("errors"), count("skipped")),
        (0, 0, 0),
        "{stdout}"
    );
    (count("tests"), stdout)
}

#[test]
fn the_python_sdk_lists_calls_follows_progress_cancels_and_approves_in_both_eras_over_stdio_and_http()
 {
    // The inbox page's browser test runs on its own (tests/inbox.rs).
    let (tests, stdout) = pytest(&["-k", "not inbox_page"], &[]);
    assert!(tests >= 140, "tests went missing: {stdout}");
}
