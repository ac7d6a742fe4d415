//! A fleet: `serve --http --state postgres://…` replicas sharing their
//! clients and their approvals' spent nonces in a real PostgreSQL cluster
//! the test starts (`tests/postgres.rs`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http::{HttpServer, asking_write, client, modern};
use crate::postgres::Postgres;
use crate::util::{ALLOW_BUILTIN, Tree, portcullis};

/// A policy tree, a workspace and an approval key every replica is given.
struct Fleet {
    pg: Postgres,
    tree: Tree,
    root: tempfile::TempDir,
    key: PathBuf,
}

impl Fleet {
    fn start_or_skip() -> Option<Self> {
        let pg = Postgres::start_or_skip()?;
        let tree = Tree::new();
        tree.write_policy("20_allowlist.cedar", ALLOW_BUILTIN);
        let root = tempfile::tempdir().unwrap();
        let key = tree.dir.path().join("approval.key");
        fs::write(&key, [42u8; 64]).unwrap();
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
        Some(Self {
            pg,
            tree,
            root,
            key,
        })
    }

    /// `portcullis token ARGS --state URL` (and the policy flags for create).
    fn token(&self, args: &[&str]) -> crate::util::Run {
        let url = self.pg.url();
        let mut all: Vec<&str> = vec!["token"];
        all.extend(args);
        all.extend(["--state", &url, "--format", "json"]);
        let flags = self.tree.flags();
        if args.first() == Some(&"create") {
            all.extend(flags.iter().map(String::as_str));
        }
        portcullis(&all)
    }

    fn create(&self, name: &str) -> String {
        let run = self.token(&["create", name, "--tier", "paired"]);
        assert_eq!(run.code, 0, "{run:?}");
        run.json()["token"].as_str().unwrap().to_owned()
    }

    /// Replica `n`: its own log and checkpoint key, the shared state.
    fn replica_command(&self, n: usize) -> Command {
        let own = self.tree.dir.path().join(format!("replica-{n}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .arg("serve")
            .arg("--root")
            .arg(self.root.path())
            .arg("--store")
            .arg(own.join("state/tokens.json"))
            .arg("--audit")
            .arg(own.join("audit/audit.jsonl"))
            .args(["--state", &self.pg.url()])
            .arg("--approval-key")
            .arg(&self.key)
            .args(self.tree.flags())
            .env_remove("PORTCULLIS_TOKEN")
            .env_remove("PORTCULLIS_APPROVAL_KEY")
            .env("PORTCULLIS_LOG", "warn");
        command
    }

    fn replica(&self, n: usize) -> HttpServer {
        HttpServer::spawn(self.replica_command(n))
    }

    fn records(&self, n: usize) -> Vec<Value> {
        let log = self
            .tree
            .dir
            .path()
            .join(format!("replica-{n}/audit/audit.jsonl"));
        fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// The HTTP status of a 2026-07-28 `tools/list` with `token`.
async fn status(http: &reqwest::Client, url: &str, token: &str) -> u16 {
    modern(http, url, token, 1, "tools/list", json!({}))
        .await
        .status
}

/// Waits until `url` answers `token` with `wanted`; how long it took.
async fn until_status(http: &reqwest::Client, url: &str, token: &str, wanted: u16) -> Duration {
    let start = Instant::now();
    loop {
        if status(http, url, token).await == wanted {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{url} never answered {wanted}"
        );
        tokio::task::yield_now().await;
    }
}

#[test]
fn tokens_live_in_the_shared_table_as_hashes_and_every_mistake_is_told() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    let token = fleet.create("alice");
    let listed = fleet.token(&["list"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(listed.json()["clients"][0]["name"], "alice");
    assert_eq!(listed.json()["clients"][0]["tier"], "paired");
    let table = fleet.pg.sql("SELECT * FROM portcullis_clients");
    assert!(table.contains("alice"), "{table}");
    assert!(
        !table.contains(&token[4..]),
        "the table holds the token: {table}"
    );

    let again = fleet.token(&["create", "alice", "--tier", "paired"]);
    assert_ne!(again.code, 0);
    assert!(again.stderr.contains("already exists"), "{again:?}");
    let owner = fleet.token(&["create", "root", "--tier", "owner"]);
    assert_ne!(owner.code, 0);
    let nobody = fleet.token(&["revoke", "bob"]);
    assert_ne!(nobody.code, 0);
    assert!(
        nobody.stderr.contains("no client named `bob`"),
        "{nobody:?}"
    );

    let revoked = fleet.token(&["revoke", "alice"]);
    assert_eq!(revoked.code, 0, "{revoked:?}");
    assert_eq!(fleet.token(&["list"]).json()["clients"], json!([]));

    let bad = portcullis(&[
        "token",
        "list",
        "--state",
        "postgres://u:s3cret@127.0.0.1:notaport/p",
    ]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("not a PostgreSQL connection string"),
        "{bad:?}"
    );
    assert!(!bad.stderr.contains("s3cret"), "{bad:?}");
    let closed = TcpPort::closed();
    let unreachable = portcullis(&[
        "token",
        "list",
        "--state",
        &format!("postgres://u:s3cret@127.0.0.1:{closed}/p"),
    ]);
    assert_ne!(unreachable.code, 0);
    assert!(
        unreachable.stderr.contains("cannot be reached"),
        "{unreachable:?}"
    );
    assert!(!unreachable.stderr.contains("s3cret"), "{unreachable:?}");
}

/// A loopback port nothing listens on.
struct TcpPort;

impl TcpPort {
    fn closed() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_serve_clients_made_after_they_start_and_refuse_a_revoked_one_within_a_second() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    let alice = fleet.create("alice");
    let (a, b) = (fleet.replica(1), fleet.replica(2));
    let http = client();
    for replica in [&a, &b] {
        assert_eq!(status(&http, &replica.url(), &alice).await, 200);
    }
    // A client created while they run: served by both, without a restart.
    let bob = fleet.create("bob");
    for replica in [&a, &b] {
        until_status(&http, &replica.url(), &bob, 200).await;
    }
    for n in [1, 2] {
        let changed: Vec<Value> = fleet
            .records(n)
            .into_iter()
            .filter(|r| r["body"]["event"] == "clients_changed")
            .collect();
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0]["body"]["added"][0]["name"], "bob");
    }

    let revoked = fleet.token(&["revoke", "alice"]);
    assert_eq!(revoked.code, 0, "{revoked:?}");
    for replica in [&a, &b] {
        let took = until_status(&http, &replica.url(), &alice, 401).await;
        assert!(took < Duration::from_secs(1), "refused only after {took:?}");
    }
    assert_eq!(status(&http, &b.url(), &bob).await, 200);
    a.stop();
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_through_one_replica_is_answered_through_another_exactly_once() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    let alice = fleet.create("alice");
    let (a, b) = (fleet.replica(1), fleet.replica(2));
    let http = client();
    let asked = asking_write(&http, &a.url(), &alice, 1, None).await;
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let state = asked["requestState"].as_str().unwrap().to_owned();

    let answered = asking_write(&http, &b.url(), &alice, 2, Some(&state)).await;
    assert_eq!(answered["isError"], false, "{answered}");
    let written = fleet.root.path().join("approved.txt");
    assert_eq!(fs::read_to_string(&written).unwrap(), "x");
    fs::remove_file(&written).unwrap();

    // The same state again, through either: asked again, nothing written.
    for (n, replica) in [(1, &a), (2, &b)] {
        let replayed = asking_write(&http, &replica.url(), &alice, 3, Some(&state)).await;
        assert_eq!(replayed["resultType"], "input_required", "{replayed}");
        assert!(!written.exists());
        let refused: Vec<Value> = fleet
            .records(n)
            .into_iter()
            .filter(|r| r["body"]["event"] == "state_refused")
            .collect();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0]["body"]["detail"]["why"], "replayed");
    }
    a.stop();
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgres_is_down_every_request_is_refused_and_served_again_when_it_is_back() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    let alice = fleet.create("alice");
    let a = fleet.replica(1);
    let http = client();
    assert_eq!(status(&http, &a.url(), &alice).await, 200);
    fleet.pg.pg_ctl_stop();
    until_status(&http, &a.url(), &alice, 401).await;
    fleet.pg.pg_ctl_start();
    until_status(&http, &a.url(), &alice, 200).await;
    a.stop();
}

#[test]
fn a_fleet_needs_one_approval_key_and_a_single_server_needs_none() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    fleet.create("alice");
    let url = fleet.pg.url();
    let root = fleet.root.path().display().to_string();
    let key = fleet.key.display().to_string();
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--root", &root, "--http", "127.0.0.1:0"];
        args.extend(extra);
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .args(&args)
            .env_remove("PORTCULLIS_APPROVAL_KEY")
            .env_remove("PORTCULLIS_STATE");
        crate::util::run_with_stdin(command, b"")
    };
    let keyless = serve(&["--state", &url]);
    assert_ne!(keyless.code, 0);
    assert!(
        keyless.stderr.contains("needs the same approval key"),
        "{keyless:?}"
    );
    let alone = serve(&["--approval-key", &key]);
    assert_ne!(alone.code, 0);
    assert!(alone.stderr.contains("give --state too"), "{alone:?}");
    let short = fleet.tree.dir.path().join("short.key");
    fs::write(&short, "abcd").unwrap();
    fs::set_permissions(&short, fs::Permissions::from_mode(0o600)).unwrap();
    let malformed = serve(&["--state", &url, "--approval-key", short.to_str().unwrap()]);
    assert_ne!(malformed.code, 0);
    assert!(malformed.stderr.contains("not 64 bytes"), "{malformed:?}");
}
