//! A PostgreSQL cluster of a test's own: made with `initdb` in a folder of
//! its own, started with `pg_ctl` on an unused loopback port, stopped (fast)
//! when the test ends. PostgreSQL refuses to run as root: as root, the
//! cluster belongs to the `postgres` user Debian's package makes.
//!
//! Without PostgreSQL a test skips, saying so, unless
//! `PORTCULLIS_REQUIRE_POSTGRES` is set (`.ci/run` sets it, having
//! installed it), when it fails.

use std::path::PathBuf;
use std::process::{Command, Output};

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    as_postgres: bool,
    /// Whether the server syncs its WAL: off for the tests (a process killed
    /// loses nothing either way; only the machine's crash would), on for the
    /// benchmarks, whose figures must be what a team's server pays.
    fsync: bool,
}

/// The folder of `initdb` and `pg_ctl`: Debian keeps them out of `PATH`.
fn binaries() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

impl Postgres {
    /// A fresh cluster, or `None` (with a message) where there is no
    /// PostgreSQL and none is required.
    pub fn start_or_skip() -> Option<Self> {
        Self::start_with_or_skip(false)
    }

    /// A fresh cluster that syncs its WAL, as a team's server does.
    pub fn start_durable_or_skip() -> Option<Self> {
        Self::start_with_or_skip(true)
    }

    fn start_with_or_skip(fsync: bool) -> Option<Self> {
        let Some(bin) = binaries() else {
            assert!(
                std::env::var_os("PORTCULLIS_REQUIRE_POSTGRES").is_none(),
                "PostgreSQL is required (PORTCULLIS_REQUIRE_POSTGRES) but /usr/lib/postgresql/*/bin/initdb is missing"
            );
            eprintln!("SKIPPED: PostgreSQL is not installed (apt-get install postgresql)");
            return None;
        };
        let as_postgres = rustix::process::geteuid().is_root();
        let dir = tempfile::Builder::new()
            .prefix("portcullis-pg")
            .tempdir()
            .unwrap();
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success());
        }
        let cluster = Self {
            dir,
            bin,
            port: crate::ports::unused_port(),
            as_postgres,
            fsync,
        };
        let data = cluster.data();
        let made = cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "portcullis",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        assert!(made.status.success(), "initdb: {made:?}");
        cluster.pg_ctl_start();
        Some(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        // The server's own output goes to its log file, not to the pipes a
        // test waits on.
        command
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    /// Starts the server and waits until it accepts connections.
    pub fn pg_ctl_start(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync={} -c max_connections=200",
            self.port,
            self.dir.path().display(),
            if self.fsync { "on" } else { "off" }
        );
        let log = self.dir.path().join("server.log").display().to_string();
        let started = self.run(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-t",
                "120",
                "-D",
                &self.data(),
                "-l",
                &log,
                "-o",
                &options,
            ],
        );
        assert!(
            started.status.success(),
            "pg_ctl start: {started:?}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stops the server, ending every connection at once.
    pub fn pg_ctl_stop(&self) {
        let stopped = self.run("pg_ctl", &["stop", "-w", "-m", "fast", "-D", &self.data()]);
        assert!(stopped.status.success(), "pg_ctl stop: {stopped:?}");
    }

    /// The connection string `--state` takes.
    pub fn url(&self) -> String {
        format!("postgres://portcullis@127.0.0.1:{}/postgres", self.port)
    }

    pub fn psql(&self) -> PathBuf {
        self.bin.join("psql")
    }

    /// Runs SQL through `psql`, returning what it printed (unaligned, no
    /// headers).
    pub fn sql(&self, statement: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement])
            .arg(self.url())
            .output()
            .unwrap();
        assert!(out.status.success(), "psql: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &["stop", "-w", "-m", "immediate", "-D", &self.data()],
        );
    }
}
