//! A fleet's `policy apply`: replicas serving `--reload tighten-only` refuse
//! a wider set until an operator's signed approval is in the shared state,
//! then load it at once; a row signed by another key, and a replica given
//! no operator key, let nothing through.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fleet::Fleet;
use crate::http::{HttpServer, client};
use crate::reload::{comes_to, reads};
use crate::util::{ALLOW_BUILTIN, Run, portcullis};

/// `policy apply` of the fleet's tree into its shared state, with `extra`.
fn apply(fleet: &Fleet, extra: &[&str]) -> Run {
    let url = fleet.pg.url();
    let flags = fleet.tree.flags();
    let mut args = vec!["policy", "apply", "--state", url.as_str()];
    args.extend(flags.iter().map(String::as_str));
    args.extend(extra);
    portcullis(&args)
}

/// Waits until replica `n` has recorded `count` reloads (refused or not);
/// the reload records, oldest first.
fn reloads(fleet: &Fleet, n: usize, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let found: Vec<Value> = fleet
            .records(n)
            .into_iter()
            .filter(|r| {
                let event = &r["body"]["event"];
                event == "policy_reload" || event == "policy_reload_refused"
            })
            .collect();
        if found.len() >= count {
            return found;
        }
        assert!(Instant::now() < deadline, "replica {n}: {found:?}");
        std::thread::yield_now();
    }
}

/// An operator key pair made in `dir`: its public half's path.
fn operator(dir: &std::path::Path) -> String {
    fs::create_dir_all(dir).unwrap();
    portcullis::audit::load_or_create_signer(dir).unwrap();
    dir.join(portcullis::audit::PUBLIC_KEY_FILE)
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_operators_signed_apply_in_the_shared_state_lets_a_wider_set_through() {
    if !crate::util::solver_or_skip() {
        return;
    }
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    fleet
        .tree
        .write_policy("20_allowlist.cedar", "// nothing allowed\n");
    let alice = fleet.with_readme_and_alice();
    let keys = fleet.tree.dir.path().join("operator");
    let public = operator(&keys);
    let start = |n: usize, trusted: bool| {
        let mut command = fleet.replica_command(n);
        command.args(["--reload", "tighten-only"]);
        if trusted {
            command.args(["--apply-key", &public]);
        }
        HttpServer::spawn(command)
    };
    let (one, two, untrusting) = (start(1, true), start(2, true), start(3, false));
    let http = client();
    assert!(!reads(&http, &one.url(), &alice).await, "nothing at start");

    // The wider set, written to the folder every replica loads: refused by each.
    let staged = fleet.tree.dir.path().join("allowlist.staged");
    fs::write(&staged, ALLOW_BUILTIN).unwrap();
    fs::rename(&staged, fleet.tree.policies().join("20_allowlist.cedar")).unwrap();
    for n in 1..=3 {
        let events = tokio::task::block_in_place(|| reloads(&fleet, n, 1));
        assert_eq!(events[0]["body"]["event"], "policy_reload_refused", "{n}");
    }

    // Without an operator key there is nothing every replica trusts.
    let unsigned = apply(&fleet, &[]);
    assert_eq!(unsigned.code, 1, "{unsigned:?}");
    assert!(unsigned.stderr.contains("--apply-keys"), "{unsigned:?}");

    // Signed by a key no replica was given: a row, but no approval.
    let stranger = operator(&fleet.tree.dir.path().join("stranger"));
    let strange_keys = std::path::Path::new(&stranger).parent().unwrap();
    let forged = apply(&fleet, &["--apply-keys", strange_keys.to_str().unwrap()]);
    assert_eq!(forged.code, 0, "{forged:?}");
    for n in 1..=3 {
        let events = tokio::task::block_in_place(|| reloads(&fleet, n, 2));
        assert_eq!(events[1]["body"]["event"], "policy_reload_refused", "{n}");
        assert_eq!(events[1]["body"]["trigger"], "policy apply", "{n}");
    }
    assert!(!reads(&http, &two.url(), &alice).await);

    // Signed with the operator key: replicas 1 and 2 load it at once;
    // replica 3, given no operator key, still refuses.
    let applied = apply(
        &fleet,
        &["--apply-keys", keys.to_str().unwrap(), "--format", "json"],
    );
    assert_eq!(applied.code, 0, "{applied:?}");
    let hash = applied.json()["policy_set"].as_str().unwrap().to_owned();
    for n in 1..=2 {
        let events = tokio::task::block_in_place(|| reloads(&fleet, n, 3));
        assert_eq!(
            events[2]["body"]["event"], "policy_reload",
            "{n}: {:?}",
            events[2]
        );
        assert_eq!(events[2]["body"]["applied"], true, "{n}");
        assert_eq!(events[2]["body"]["new"], hash.as_str(), "{n}");
    }
    assert!(comes_to(&http, &one.url(), &alice, true).await);
    assert!(comes_to(&http, &two.url(), &alice, true).await);
    let events = tokio::task::block_in_place(|| reloads(&fleet, 3, 3));
    assert_eq!(events[2]["body"]["event"], "policy_reload_refused");
    assert!(!reads(&http, &untrusting.url(), &alice).await);
    one.stop();
    two.stop();
    untrusting.stop();
    let verified = fleet.audit(&["verify"]);
    assert_eq!(verified.code, 0, "{verified:?}");
}

/// A fleet's apply that cannot reach the database fails, names where,
/// and never shows the password; the operator key is made all the same.
#[test]
fn an_apply_to_a_database_that_cannot_be_reached_fails_and_says_so() {
    let port = crate::ports::unused_port();
    apply_is_refused_unreached(&format!("postgres://u:s3cret@127.0.0.1:{port}/p"));
}

/// A port that takes the connection and never answers (a wedged server,
/// a balancer with nothing behind it): the apply gives up within the URL's
/// `connect_timeout` instead of waiting for ever, and says so.
#[test]
fn an_apply_to_a_server_that_never_answers_gives_up_and_says_so() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    apply_is_refused_unreached(&format!(
        "postgres://u:s3cret@127.0.0.1:{port}/p?connect_timeout=2"
    ));
}

/// `policy apply --state url` fails, says the database cannot be reached,
/// prints nothing on stdout and never shows the password `s3cret`.
fn apply_is_refused_unreached(url: &str) {
    let tree = crate::util::Tree::new();
    tree.write_policy("20_allowlist.cedar", ALLOW_BUILTIN);
    let keys = tree.dir.path().join("operator");
    let flags = tree.flags();
    let mut args = vec!["policy", "apply", "--state", url];
    args.extend(flags.iter().map(String::as_str));
    args.extend(["--apply-keys", keys.to_str().unwrap()]);
    let run = portcullis(&args);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot be reached"), "{run:?}");
    assert!(!run.stderr.contains("s3cret"), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
}
