//! The oracle (`tests/oracle`) over every command the gate allows: the
//! committed corpus, the fuzz inputs and compositions of the allowed rows;
//! and the oracle itself held to answers given for other commands, so it
//! is seen to fail where it should.

use std::fs;

use portcullis::facts::Transport;
use portcullis::gate::judge;
use portcullis::pdp::Outcome;

use crate::gate_corpus::corpus;
use crate::oracle::{Oracle, disagreements, traced};

#[test]
fn every_command_the_gate_allows_does_in_bash_what_the_gate_judged() {
    let Some(oracle) = Oracle::new() else {
        return;
    };
    let mut failures = Vec::new();
    let mut ran = 0;
    let committed: Vec<String> = corpus().into_iter().map(|(_, command)| command).collect();
    let fuzzed: Vec<String> = serde_json::from_str(
        &fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/gate/fuzz_corpus.json"
        ))
        .unwrap(),
    )
    .unwrap();
    // Compositions of the allowed rows: each with the next, in a list, a
    // conjunction and a pipeline.
    let allowed: Vec<&String> = committed
        .iter()
        .filter(|command| {
            judge(
                &oracle.engine,
                "agent",
                &oracle.root,
                None,
                command,
                Transport::Cli,
            )
            .is_ok_and(|a| a.decision.outcome == Outcome::Allow)
        })
        .collect();
    let composed: Vec<String> = allowed
        .windows(2)
        .enumerate()
        .filter(|(index, _)| index % 4 == 0)
        .map(|(index, pair)| {
            let joint = ["; ", " && ", " | "][index % 3];
            format!("{}{joint}{}", pair[0], pair[1])
        })
        .collect();
    for command in committed.iter().chain(&fuzzed).chain(&composed) {
        if let Some(found) = oracle.check(command) {
            ran += 1;
            failures.extend(found);
        }
    }
    eprintln!("the oracle ran {ran} allowed commands under strace");
    assert!(ran > 300, "only {ran} commands were allowed");
    assert!(
        failures.is_empty(),
        "{} disagreements between the gate and bash:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The oracle fails where bash does what the gate did not judge: it is
/// held here against answers given for other commands.
#[test]
fn the_oracle_finds_what_bash_did_that_the_gate_did_not_judge() {
    let Some(Oracle {
        ws,
        engine,
        root,
        secrets,
        log,
    }) = Oracle::new()
    else {
        return;
    };
    for (ran, judged_as, found) in [
        ("echo $(touch pwn)", "echo hi", "ran `touch pwn`"),
        ("echo x > out.txt", "echo x", "for writing"),
        ("cat .env", "cat README.md", "read the secret"),
        (
            "sort -o sorted.txt names.txt",
            "sort names.txt",
            "which is none of the gate's argv",
        ),
        (
            "exec 3<>/dev/tcp/127.0.0.1/9; true",
            "true",
            "opened a socket",
        ),
        ("mv a.txt moved.txt", "ls", "rename"),
        // A short call, which strace pads before its result.
        ("mkdir d", "ls", "mkdir(\"d\""),
        // A new file in the temp folder is scratch only if it goes again.
        ("mktemp", "echo hi", "left /tmp/tmp."),
    ] {
        let judged = judge(&engine, "agent", &root, None, judged_as, Transport::Cli).unwrap();
        let trace = traced(&ws, ran, &log);
        let found_here = disagreements(ran, &judged.facts, &trace, &secrets);
        assert!(
            found_here.iter().any(|f| f.contains(found)),
            "{ran} judged as {judged_as}: {found_here:?}"
        );
    }
}

/// What a traced command leaves running is stopped with it: a job put in
/// the background (or a `tail -f` past the time) ran on after the test
/// when only strace was killed, `watch -n 0` taking a core for good.
#[test]
fn nothing_a_traced_command_starts_outlives_it() {
    let Some(Oracle { ws, log, .. }) = Oracle::new() else {
        return;
    };
    let marker = format!("{}", 900_000 + std::process::id() % 99_999);
    traced(&ws, &format!("sleep {marker} & sleep {marker} &"), &log);
    let left: Vec<String> = fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| fs::read(entry.ok()?.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.trim() == format!("sleep {marker}"))
        .collect();
    assert!(left.is_empty(), "still running: {left:?}");
}
