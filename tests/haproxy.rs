//! HAProxy of a test's (or bench's) own in front of a fleet's replicas:
//! round-robin, and a legacy session stuck to the replica whose answer
//! named it (a stick table learns `Mcp-Session-Id`), as the README's
//! fleet section configures it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Balancer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    _dir: tempfile::TempDir,
}

/// Whether HAProxy runs here (it answers `-v`, not `--version`).
pub fn installed() -> bool {
    Command::new("haproxy")
        .arg("-v")
        .output()
        .is_ok_and(|out| out.status.success())
}

impl Balancer {
    /// In front of the replicas at `backends` (`http://HOST:PORT`, with or
    /// without `/mcp`), listening once this returns.
    pub fn start(backends: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::ports::unused_port();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(n, url)| {
                let host = url.trim_start_matches("http://").trim_end_matches("/mcp");
                format!("  server r{n} {host}\n")
            })
            .collect();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "global\n  maxconn 4096\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 300s\n  timeout server 300s\nfrontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\nbackend replicas\n  balance roundrobin\n  stick-table type string len 128 size 100k expire 1h\n  stick match req.hdr(mcp-session-id)\n  stick store-response res.hdr(mcp-session-id)\n{servers}"
            ),
        )
        .unwrap();
        let child = Command::new("haproxy")
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "HAProxy never listened"
            );
            std::thread::yield_now();
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            _dir: dir,
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
