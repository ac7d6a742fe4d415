//! `portcullis policy review`: a candidate that opens one tool to one
//! client shows exactly that client's recorded calls of that tool
//! flipping, and the proof names the tool; the HTML page shows the JSON's
//! numbers, as headless Chromium renders it.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::util::{Run, Served, Session, portcullis, solver_or_skip};

const LIST_ONLY: &str = r#"
@id("allow.list_dir")
@reason("everyone may list folders")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource == Portcullis::Tool::"builtin/list_dir"
);
"#;

const READ_FOR_AGENT: &str = r#"
@id("allow.agent_reads")
@reason("the agent may read files")
permit (
  principal == Portcullis::Client::"agent",
  action in Portcullis::Action::"use_tool",
  resource == Portcullis::Tool::"builtin/read_file"
);
"#;

/// `policy review` of `candidate` against `log`, with `extra` flags.
fn review(candidate: &Path, log: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "policy",
        "review",
        "--candidate",
        candidate.to_str().unwrap(),
        "--audit",
        log.to_str().unwrap(),
    ];
    args.extend(extra);
    portcullis(&args)
}

/// Makes `calls` as the client whose token is `token`.
fn session(served: &Served, token: &str, calls: &[(&str, Value)]) {
    let mut command = served.command();
    command.env("PORTCULLIS_TOKEN", token).stderr(Stdio::null());
    let mut session = Session::start_command(command);
    session.initialize();
    for (id, (tool, arguments)) in calls.iter().enumerate() {
        session.send(
            &json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}})
            .to_string(),
        );
        session.next();
    }
    session.finish();
}

/// A log of two clients' traffic under LIST_ONLY, and a candidate folder
/// that also lets `agent` read.
fn recorded() -> (Served, tempfile::TempDir) {
    let served = Served::new(LIST_ONLY, "paired");
    let mut args = vec![
        "token",
        "create",
        "other",
        "--tier",
        "paired",
        "--store",
        served.store.to_str().unwrap(),
        "--format",
        "json",
    ];
    let flags = served.tree.flags();
    args.extend(flags.iter().map(String::as_str));
    let created = portcullis(&args);
    assert_eq!(created.code, 0, "{created:?}");
    let other = created.json()["token"].as_str().unwrap().to_owned();

    let read = ("read_file", json!({"path": "README.md"}));
    let list = ("list_dir", json!({"path": "."}));
    session(
        &served,
        &served.token.clone(),
        &[read.clone(), list.clone(), read.clone()],
    );
    session(&served, &other, &[read.clone(), list]);

    let candidate = tempfile::tempdir().unwrap();
    copy_dir(
        &served.tree.dir.path().join("policies"),
        &candidate.path().join("policies"),
    );
    copy_dir(
        &served.tree.dir.path().join("schemas"),
        &candidate.path().join("schemas"),
    );
    let allowlist = candidate.path().join("policies/20_allowlist.cedar");
    let mut text = fs::read_to_string(&allowlist).unwrap();
    text.push_str(READ_FOR_AGENT);
    fs::write(&allowlist, text).unwrap();
    (served, candidate)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_candidate_that_opens_one_tool_to_one_client_flips_exactly_its_calls() {
    if !solver_or_skip() {
        return;
    }
    let (served, candidate) = recorded();
    let html = candidate.path().join("review.html");
    let log = served.audit_log();
    let run = review(
        candidate.path(),
        &log,
        &["--html", html.to_str().unwrap(), "--format", "json"],
    );
    assert_eq!(run.code, 4, "{run:?}");
    let report = run.json();
    assert_eq!(report["opens"], true);

    // The proof names read_file, and only for the agent.
    let widenings = report["proof"]["widenings"].as_array().unwrap();
    assert!(!widenings.is_empty());
    for widening in widenings {
        let example = &widening["counterexample"];
        assert_eq!(example["tool"], "builtin/read_file", "{widening}");
        assert_eq!(example["client"], "agent", "{widening}");
    }
    assert!(
        widenings
            .iter()
            .any(|w| w["action"] == "Portcullis::Action::\"builtin/read_file\"")
    );

    // The replay: the agent's two denied reads now allowed, nothing else.
    let groups = report["replay"]["groups"].as_array().unwrap();
    assert!(!groups.is_empty());
    for group in groups {
        assert_eq!(group["transition"], "deny->allow", "{group}");
        assert_eq!(group["tool"], "builtin/read_file", "{group}");
        assert_eq!(group["client"], "agent", "{group}");
        assert_eq!(group["proven"], true, "{group}");
    }
    // Each of the agent's two reads was refused where the tool was hidden
    // (its discover decision); the other client's read stays refused.
    let flipped: u64 = groups.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    assert_eq!(flipped, 2, "{groups:?}");
    let changes = report["replay"]["changes"].as_array().unwrap();
    assert_eq!(report["replay"]["changed"], changes.len());
    assert!(changes.iter().all(|c| c["client"] == "agent"));
    let buckets = report["replay"]["over_time"]["series"].as_array().unwrap();
    let bucketed: u64 = buckets
        .iter()
        .map(|b| b["counts"]["deny->allow"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(bucketed as usize, changes.len());

    the_page_shows_the_reports_numbers(&html, &report);

    // The table says the same for people.
    let human = review(candidate.path(), &log, &[]);
    assert_eq!(human.code, 4, "{human:?}");
    assert!(human.stdout.contains("deny->allow"), "{human:?}");
    assert!(human.stdout.contains("builtin/read_file"), "{human:?}");
    assert!(human.stdout.contains("OPENS"), "{human:?}");
}

#[test]
fn the_set_in_force_under_review_opens_nothing() {
    if !solver_or_skip() {
        return;
    }
    let (served, _) = recorded();
    let run = review(
        served.tree.dir.path(),
        &served.audit_log(),
        &["--format", "json"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["opens"], false);
    assert_eq!(report["replay"]["changed"], 0);
    assert_eq!(report["old"]["hash"], report["candidate"]["hash"]);
}

#[test]
fn a_review_that_cannot_be_made_says_why() {
    let missing = portcullis(&[
        "policy",
        "review",
        "--candidate",
        "builtin",
        "--audit",
        "/nonexistent/audit.jsonl",
    ]);
    assert_ne!(missing.code, 0, "{missing:?}");
    assert!(
        missing.stderr.contains("/nonexistent/audit.jsonl"),
        "{missing:?}"
    );
}

/// The numbers of the page, read from the DOM headless Chromium built,
/// equal the JSON report's; and the page renders to a screenshot.
fn the_page_shows_the_reports_numbers(html: &Path, report: &Value) {
    let page = fs::read_to_string(html).unwrap();
    assert!(!page.contains("http://") || page.contains("http://www.w3.org/2000/svg"));
    assert!(!page.contains("<script"), "self-contained, no script");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let dom = if Path::new(&chromium).exists() {
        let profile = tempfile::tempdir().unwrap();
        let shot = profile.path().join("review.png");
        let flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ];
        let url = format!("file://{}", html.display());
        let browse = |extra: &[String]| {
            Command::new(&chromium)
                .args(flags)
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .args(extra)
                .arg(&url)
                .stderr(Stdio::null())
                .output()
                .unwrap()
        };
        let dumped = browse(&["--dump-dom".to_owned()]);
        assert!(dumped.status.success(), "chromium failed");
        let shot_run = browse(&[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,1600".to_owned(),
        ]);
        assert!(shot_run.status.success());
        let png = fs::read(&shot).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "a rendered page"
        );
        String::from_utf8(dumped.stdout).unwrap()
    } else {
        eprintln!(
            "SKIPPED (rendering only): no Chromium at {chromium} (.ci/install-chromium installs Debian's); the page's text is checked as written"
        );
        page
    };
    let text_of = |id: &str| -> String {
        let start = dom
            .find(&format!("id=\"{id}\">"))
            .unwrap_or_else(|| panic!("no #{id} on the page"))
            + id.len()
            + 6;
        dom[start..].split('<').next().unwrap().to_owned()
    };
    let replay = &report["replay"];
    assert_eq!(text_of("changed"), replay["changed"].to_string());
    assert_eq!(text_of("same"), replay["same"].to_string());
    assert_eq!(text_of("redecided"), replay["redecided"].to_string());
    assert_eq!(text_of("records"), replay["records"].to_string());
    assert_eq!(
        text_of("widening-count"),
        report["proof"]["widenings"]
            .as_array()
            .unwrap()
            .len()
            .to_string()
    );
    assert_eq!(
        text_of("candidate-hash"),
        report["candidate"]["hash"].as_str().unwrap()
    );
    let groups = replay["groups"].as_array().unwrap();
    assert_eq!(dom.matches("class=\"group\"").count(), groups.len());
    for group in groups {
        let row = format!(
            "data-transition=\"{}\" data-tool=\"{}\" data-client=\"{}\" data-count=\"{}\"",
            group["transition"].as_str().unwrap().replace('>', "&gt;"),
            group["tool"].as_str().unwrap(),
            group["client"].as_str().unwrap(),
            group["count"]
        );
        assert!(dom.contains(&row), "{row} not on the page");
    }
    let bars: u64 = dom
        .match_indices("class=\"bar\"")
        .map(|(at, _)| {
            let rest = &dom[at..];
            let count = rest.find("data-count=\"").unwrap() + 12;
            rest[count..]
                .split('"')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(
        bars,
        replay["changed"].as_u64().unwrap(),
        "the chart counts every change"
    );
}
