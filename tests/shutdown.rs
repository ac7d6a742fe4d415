//! Ending `serve` with a signal, as hosts do (Claude Code sends SIGINT):
//! the call in progress is cancelled and recorded, a shutdown record names
//! the signal, and the log verifies.

use std::process::Command;

use serde_json::json;

use crate::util::{ALLOW_BUILTIN, Served, Session, portcullis};

/// A session with a long search under way (it has reported progress).
fn searching() -> (Served, Session) {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    crate::util::deep_tree(served.root.path(), 40);
    let mut session = Session::start(&served);
    session.initialize();
    session.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search", "arguments": {"pattern": "needle"},
                           "_meta": {"progressToken": "p"}}})
        .to_string(),
    );
    let first = session.next();
    assert_eq!(first["method"], "notifications/progress", "{first}");
    (served, session)
}

fn send_signal(session: &Session, name: &str) {
    let status = Command::new("kill")
        .args(["-s", name, &session.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn sigint_and_sigterm_cancel_the_call_record_it_and_end_the_log_cleanly() {
    for (signal, recorded) in [("INT", "SIGINT"), ("TERM", "SIGTERM")] {
        let (served, mut session) = searching();
        send_signal(&session, signal);
        let status = session.child.wait().unwrap();
        assert!(status.success(), "{signal}: {status}");
        let records = served.records();
        let outcome = records
            .iter()
            .find(|r| r["kind"] == "outcome")
            .unwrap_or_else(|| panic!("{signal}: no outcome record"));
        assert_eq!(outcome["body"]["status"], "cancelled", "{outcome}");
        assert_eq!(
            outcome["body"]["reason"], "the service shut down",
            "{outcome}"
        );
        let last = records
            .iter()
            .rev()
            .find(|r| r["kind"] != "checkpoint")
            .unwrap();
        assert_eq!(last["body"]["event"], "shutdown", "{last}");
        assert_eq!(last["body"]["signal"], recorded, "{last}");
        assert!(last["seq"].as_u64() > outcome["seq"].as_u64());
        let verified = portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
        assert_eq!(verified.code, 0, "{verified:?}");
    }
}

#[test]
fn a_second_signal_exits_at_once_and_leaves_a_log_that_verifies() {
    let (served, mut session) = searching();
    send_signal(&session, "INT");
    send_signal(&session, "INT");
    let status = session.child.wait().unwrap();
    // Whichever came first, the clean end or the forced one, every batch
    // written is whole.
    assert!(status.success() || status.code() == Some(130), "{status}");
    let verified = portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{verified:?}");
}
