use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A finished run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}): {}", self.stdout))
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn portcullis(args: &[&str]) -> Run {
    portcullis_in(Path::new("."), args)
}

pub fn portcullis_in(dir: &Path, args: &[&str]) -> Run {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .current_dir(dir)
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .output()
        .expect("the binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A temporary folder with the default policies written out by `init`.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run = portcullis(&["init", dir.path().to_str().unwrap()]);
        assert_eq!(run.code, 0, "{run:?}");
        Self { dir }
    }

    pub fn policies(&self) -> PathBuf {
        self.dir.path().join("policies")
    }

    pub fn schemas(&self) -> PathBuf {
        self.dir.path().join("schemas")
    }

    pub fn write_policy(&self, name: &str, text: &str) {
        fs::write(self.policies().join(name), text).unwrap();
    }

    /// `--policies DIR --schema DIR` for this tree.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--policies".into(),
            self.policies().display().to_string(),
            "--schema".into(),
            self.schemas().display().to_string(),
        ]
    }

    pub fn run(&self, command: &[&str]) -> Run {
        let flags = self.flags();
        let mut args: Vec<&str> = command.to_vec();
        args.extend(flags.iter().map(String::as_str));
        portcullis(&args)
    }
}
