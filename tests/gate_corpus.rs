//! The command gate against its corpus (`tests/gate/corpus.txt`): every
//! command with the decision the default policies must give. Nothing that
//! should be denied or asked may be allowed.

use std::fs;
use std::path::Path;

use portcullis::facts::{Root, Transport};
use portcullis::gate::judge;
use portcullis::pdp::{Engine, Outcome, PolicyBundle};
use portcullis::tools::Registry;

use crate::util::GateBench;

pub(crate) fn corpus() -> Vec<(Outcome, String)> {
    let text = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/gate/corpus.txt"
    ))
    .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (expected, command) = line.split_once('\t').unwrap();
            let expected = match expected {
                "allow" => Outcome::Allow,
                "ask" => Outcome::Ask,
                "deny" => Outcome::Deny,
                other => panic!("bad expectation {other}"),
            };
            (expected, command.replace("\\n", "\n"))
        })
        .collect()
}

#[test]
fn every_command_of_the_corpus_gets_its_decision() {
    let GateBench { engine, root, .. } = &GateBench::new(&["sub"]);
    let corpus = corpus();
    assert!(corpus.len() >= 300, "{} commands", corpus.len());
    let mut wrong = Vec::new();
    let mut loosened = 0;
    for (expected, command) in &corpus {
        let answer = judge(engine, "agent", root, None, command, Transport::Cli).unwrap();
        let got = answer.decision.outcome;
        if got != *expected {
            if got < *expected {
                loosened += 1;
            }
            let classes: Vec<&str> = answer.facts.classes.iter().map(String::as_str).collect();
            wrong.push(format!(
                "{expected:?} expected, {got:?} given: {command:?} [{}]",
                classes.join(", ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong ({loosened} looser than expected):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn empty_long_and_nul_commands_are_refused_as_input() {
    let engine =
        Engine::load(&PolicyBundle::builtin(), &Registry::builtin().unwrap(), &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path()).unwrap();
    for bad in [
        "",
        "   \n\t",
        "ls\0rm",
        &"a".repeat(portcullis::facts::MAX_COMMAND_BYTES + 1),
    ] {
        assert!(
            judge(&engine, "nobody", &root, None, bad, Transport::Cli).is_err(),
            "{bad:?}"
        );
    }
}

/// Whether any named node of the tree is of a kind the gate does not read.
fn unknown_kind(node: tree_sitter::Node<'_>) -> Option<String> {
    if node.is_error()
        || node.is_missing()
        || (node.is_named() && !portcullis::facts::KNOWN_NODE_KINDS.contains(&node.kind()))
    {
        return Some(node.kind().to_owned());
    }
    let mut cursor = node.walk();
    let children: Vec<_> = node.children(&mut cursor).collect();
    children.into_iter().find_map(unknown_kind)
}

/// The inputs the coverage-guided fuzzer (`fuzz/`, 35 minutes) found, kept
/// as regressions of its two properties: judging never panics, and nothing
/// whose tree holds an unknown node kind is allowed.
#[test]
fn the_fuzzers_inputs_keep_their_properties() {
    let text = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/gate/fuzz_corpus.json"
    ))
    .unwrap();
    let inputs: Vec<String> = serde_json::from_str(&text).unwrap();
    assert!(inputs.len() > 1000, "{} inputs", inputs.len());
    let GateBench { engine, root, .. } = &GateBench::new(&["sub"]);
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .unwrap();
    let mut allowed = 0;
    for input in &inputs {
        let Ok(answer) = judge(engine, "agent", root, None, input, Transport::Cli) else {
            continue;
        };
        if answer.decision.outcome != Outcome::Allow {
            continue;
        }
        allowed += 1;
        // Read as the gate reads it: line continuations joined, as bash
        // joins them.
        let joined = portcullis::facts::join_continuations(input).unwrap();
        let tree = parser.parse(joined.as_ref(), None).unwrap();
        assert_eq!(unknown_kind(tree.root_node()), None, "allowed: {input:?}");
        assert!(!answer.facts.opaque, "allowed while opaque: {input:?}");
    }
    assert!(allowed > 0, "some inputs are plain read-only commands");
}

/// A command that reads every file of a tree reads the secrets in it: the
/// tree is looked through, as the program would walk it.
#[test]
fn a_tree_read_whole_is_judged_by_the_secrets_it_holds() {
    let GateBench { engine, root, .. } = &GateBench::new(&["src", "config", "big"]);
    let ws = root.path();
    fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    let decide = |command: &str| {
        judge(engine, "agent", root, None, command, Transport::Cli)
            .unwrap()
            .decision
            .outcome
    };
    let clean = [
        "grep -rn src",
        "grep -r TOKEN .",
        "grep -rn TOKEN",
        "rg TOKEN",
        "find . -name '*.rs' -exec wc -l {} +",
        "diff -r src config",
    ];
    for command in clean {
        assert_eq!(decide(command), Outcome::Allow, "{command}");
    }
    // A listing reaches folder names only: a secret file's name is no
    // secret, a secret folder (`.ssh`) is listed whole.
    for command in ["du -sh .", "find . -name x", "ls -R", "tree"] {
        assert_eq!(decide(command), Outcome::Allow, "{command}");
    }
    fs::create_dir_all(ws.join("big/.ssh")).unwrap();
    for command in ["du -sh .", "find . -name x", "ls -R", "tree", "du"] {
        assert_eq!(decide(command), Outcome::Deny, "{command}");
    }
    assert_eq!(decide("ls -la"), Outcome::Allow);
    fs::remove_dir(ws.join("big/.ssh")).unwrap();
    fs::write(ws.join("config/.env"), "TOKEN=1").unwrap();
    assert_eq!(
        decide("du -sh ."),
        Outcome::Allow,
        "a secret file's name is listed, not read"
    );
    for command in [
        "grep -r TOKEN .",
        "grep -rn TOKEN",
        // `src` is the pattern: grep reads `.`, where a folder `src` is.
        "grep -rn src",
        "grep -rn src | wc -l",
        "grep -R TOKEN config",
        "egrep -ri token .",
        "rg --hidden TOKEN",
        "rg -uu TOKEN config",
        "find . -type f -exec cat {} +",
        "find config -exec grep -H TOKEN {} ;",
        "diff -r src config",
        "tar -czf backup.tgz .",
        "zip -r backup.zip config",
        "scp -r . host:",
        "rsync -a . host:copy",
        "git grep --no-index -n TOKEN",
        "git grep --untracked --no-exclude-standard -n TOKEN",
    ] {
        assert_eq!(decide(command), Outcome::Deny, "{command}");
    }
    // What the walk does not reach stays allowed: another folder, a file,
    // and ripgrep's own walk, which skips hidden files.
    for command in [
        "grep -r TOKEN src",
        "grep TOKEN src/main.rs",
        "rg TOKEN",
        "rg TOKEN config",
        "git grep -n TOKEN",
    ] {
        assert_eq!(decide(command), Outcome::Allow, "{command}");
    }
    // A secret that is not hidden is read by ripgrep too, unless an ignore
    // file leaves it out.
    fs::write(ws.join("config/deploy.pem"), "key").unwrap();
    assert_eq!(decide("rg TOKEN"), Outcome::Deny);
    fs::write(ws.join(".ignore"), "*.pem\n").unwrap();
    assert_eq!(decide("rg TOKEN"), Outcome::Allow);
    // A tree too large to look through is not proven free of secrets.
    for i in 0..20_001 {
        fs::write(ws.join("big").join(i.to_string()), "").unwrap();
    }
    assert_eq!(decide("grep -r TOKEN big"), Outcome::Ask);
    assert_eq!(decide("grep TOKEN src/main.rs"), Outcome::Allow);
}

/// The shell expands a pattern in a redirect's target as in an argument,
/// so `> .gi?/config` writes into `.git` when `.git` is there.
#[test]
fn a_pattern_in_a_redirect_target_is_judged_by_what_it_matches() {
    let GateBench { engine, root, .. } = &GateBench::new(&[".git/info", "out"]);
    let decide = |command: &str| {
        judge(engine, "agent", root, None, command, Transport::Cli)
            .unwrap()
            .decision
    };
    for command in [
        "echo x > .gi?/config",
        "echo x > .g[i]t/HEAD",
        "printf x >> .git*/info/exclude",
        "cat < a > .?it/config",
    ] {
        let decision = decide(command);
        assert_eq!(decision.outcome, Outcome::Deny, "{command}");
        assert!(
            decision
                .policies
                .iter()
                .any(|p| p.id == "hard.no_command_vcs_metadata_write"),
            "{command}: {:?}",
            decision.policies
        );
    }
    assert_eq!(decide("echo x > ou?/log.txt").outcome, Outcome::Ask);
}

/// A link inside the root is judged by what it points at: an operand, and
/// every entry of a tree a command reads whole.
#[test]
fn links_inside_the_root_are_judged_by_what_they_point_at() {
    let GateBench { engine, root, .. } = &GateBench::new(&["docs"]);
    let ws = root.path();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(outside.path().join(".ssh")).unwrap();
    fs::write(outside.path().join(".ssh/id_ed25519"), "-----BEGIN").unwrap();
    fs::write(ws.join(".env"), "TOKEN=1").unwrap();
    fs::write(ws.join("docs/guide.md"), "guide").unwrap();
    let decide = |command: &str| {
        judge(engine, "agent", root, None, command, Transport::Cli)
            .unwrap()
            .decision
            .outcome
    };
    for command in ["cat docs/guide.md", "grep -R BEGIN docs", "ls docs"] {
        assert_eq!(decide(command), Outcome::Allow, "{command}");
    }
    std::os::unix::fs::symlink("../.env", ws.join("docs/envlink")).unwrap();
    std::os::unix::fs::symlink(outside.path().join(".ssh"), ws.join("docs/sshlink")).unwrap();
    for command in [
        "cat docs/envlink",
        "head -n 1 docs/sshlink/id_ed25519",
        "grep -R BEGIN docs",
        "find -L docs -type f -exec cat {} +",
        "rg -L --hidden BEGIN docs",
    ] {
        assert_eq!(decide(command), Outcome::Deny, "{command}");
    }
    assert_eq!(decide("cat docs/guide.md"), Outcome::Allow);
}

/// However the shell comes to a word that names a link, the link is
/// judged by what it points at: a redirect's source, a pattern's match, a
/// word that looks like an option, an option's value, and a word read
/// after any `cd` the command may have made, in any order or a loop.
#[test]
fn every_word_that_reaches_a_link_is_judged_by_what_it_points_at() {
    let GateBench { engine, root, .. } = &GateBench::new(&["docs", "src"]);
    let ws = root.path();
    fs::write(ws.join(".env"), "TOKEN=1").unwrap();
    fs::write(ws.join("docs/guide.md"), "guide").unwrap();
    std::os::unix::fs::symlink("../.env", ws.join("docs/envlink")).unwrap();
    std::os::unix::fs::symlink(".env", ws.join("-x")).unwrap();
    std::os::unix::fs::symlink("..", ws.join("src/up")).unwrap();
    let decide = decider(engine, root);
    all_decided(
        &decide,
        Outcome::Deny,
        &[
            "cat < docs/envlink",
            "wc -l 0< docs/envlink",
            "echo $(<docs/envlink)",
            "cat docs/e*",
            "cat docs/envl?nk",
            "cat -- docs/[e]nvlink",
            "cat -- *",
            "cat -- -x",
            "head -- -x",
            "cat < -x",
            "grep -h . -- -x",
            "sort --files0-from=docs/envlink",
            "cd docs && cat envlink",
            "cd src && cat ../docs/envlink",
            "cd src && cat up/docs/envlink",
            "cd src && cd up && cd docs && cat envlink",
            "for d in 1 2; do cd src/up; done; cat docs/envlink",
            "cd src || cd docs; cat envlink",
            "(cd docs); cat -- ../-x",
        ],
    );
    // Where the gate cannot know the folder, it cannot know the link.
    all_decided(
        &decide,
        Outcome::Ask,
        &[
            "cd \"$X\" && cat guide.md",
            "cd - && cat guide.md",
            "cat ~-/guide.md",
        ],
    );
    all_decided(
        &decide,
        Outcome::Allow,
        &[
            "cat docs/guide.md",
            "cd docs && cat guide.md",
            "cd src && cat ../docs/guide.md",
            "cat docs/g*",
            "ls -la",
            "git status --short",
        ],
    );
}

/// A file with a second name may be a secret by that name, one no tree
/// the command walks holds: read by name or in a walk of contents, it is
/// not proven read-only; listed by name only, it is.
#[test]
fn a_file_with_another_name_is_not_proven_read_only() {
    let GateBench { engine, root, .. } = &GateBench::new(&["docs"]);
    let ws = root.path();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::write(elsewhere.path().join("id_rsa"), "-----BEGIN").unwrap();
    fs::write(ws.join("docs/guide.md"), "guide").unwrap();
    let decide = decider(engine, root);
    all_decided(
        &decide,
        Outcome::Allow,
        &["cat docs/notes.txt", "grep -r BEGIN docs", "ls -R docs"],
    );
    fs::hard_link(elsewhere.path().join("id_rsa"), ws.join("docs/notes.txt")).unwrap();
    all_decided(
        &decide,
        Outcome::Ask,
        &[
            "cat docs/notes.txt",
            "cat < docs/notes.txt",
            "head docs/n*",
            "cd docs && wc -c notes.txt",
            "grep -r BEGIN docs",
            "rg BEGIN",
        ],
    );
    all_decided(
        &decide,
        Outcome::Allow,
        &["ls -R docs", "cat docs/guide.md", "find docs -name '*.txt'"],
    );
}

/// A git read that prints what the repository tracks reads every tracked
/// file: with a `.env` tracked, `git grep` reads it as `grep -r` would,
/// though no word of the command names it. The same commands run where
/// the `.env` is there but not tracked, and an index the gate cannot read
/// whole proves nothing.
#[test]
fn a_git_read_of_tracked_content_reads_a_tracked_secret() {
    let GateBench { engine, root, .. } = &GateBench::new(&["src"]);
    let ws = root.path();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    fs::write(ws.join(".env"), "TOKEN=1").unwrap();
    git(&["add", "src/main.rs"]);
    let decide = decider(engine, root);
    let prints_tracked = [
        "git grep TOKEN",
        "git grep --cached TOKEN",
        "git -C src grep TOKEN",
        "cd src && git grep TOKEN",
        "git diff",
        "git diff -U1 --word-diff",
        "git blame src/main.rs",
    ];
    // These print from history too, which the gate does not read: they
    // ask, unless what is tracked now settles it.
    let prints_history = [
        "git show",
        "git diff --cached",
        "git log -p",
        "git log --patch -n 3",
        "git --no-pager log -p",
        "git log -wp",
        "git log -U1",
        "git log -S TOKEN --oneline",
        "git config --list --blob HEAD:src/main.rs",
    ];
    let names_only = [
        "git status",
        "git log --oneline",
        "git ls-files",
        "git stash list",
    ];
    all_decided(&decide, Outcome::Allow, &prints_tracked);
    all_decided(&decide, Outcome::Ask, &prints_history);
    all_decided(&decide, Outcome::Allow, &names_only);
    git(&["add", ".env"]);
    all_decided(&decide, Outcome::Deny, &prints_tracked);
    all_decided(&decide, Outcome::Deny, &prints_history);
    all_decided(
        &decide,
        Outcome::Deny,
        &["git stash show -p", "git stash list -p"],
    );
    all_decided(&decide, Outcome::Allow, &names_only);
    // A pattern is judged as the shell expands it: a file named `show`
    // makes `sho?` the subcommand.
    fs::write(ws.join("show"), "").unwrap();
    all_decided(&decide, Outcome::Deny, &["git sho? HEAD"]);
    fs::remove_file(ws.join("show")).unwrap();
    git(&["rm", "-q", "--cached", ".env"]);
    // An index the gate cannot read whole may hide a tracked secret, and
    // a submodule whose configuration runs a program.
    git(&["update-index", "--split-index"]);
    all_decided(&decide, Outcome::Ask, &["git grep TOKEN", "git show"]);
    all_decided(&decide, Outcome::Ask, &names_only);
}

/// A `.env` committed once and removed since is in the repository's
/// history, not in its index: `git show` right after the removal prints
/// it, as do `git log -p` and `git diff HEAD~1` (each tried with git
/// first). The gate reads no objects, so every read of history asks; one
/// that names the file is a secret read, and a read of the working tree
/// and the index goes on.
#[test]
fn a_secret_in_history_is_not_proven_absent() {
    let GateBench { engine, root, .. } = &GateBench::new(&["src"]);
    let ws = root.path();
    let git = |args: &[&str]| git_in(ws, args);
    commit_a_secret(ws);
    git(&["tag", "v1.0"]);
    remove_the_secret(ws);
    git(&["branch", "old", "v1.0"]);
    // A tag may name any object, the secret's blob too.
    git(&["tag", "blob", "v1.0:.env"]);
    // What git prints, first: the secret, from history only.
    for args in [
        &["show"][..],
        &["log", "-p"],
        &["diff", "HEAD~1"],
        &["diff", "old"],
        &["grep", "TOKEN", "v1.0"],
        &["for-each-ref", "--format=%(raw)"],
        &["for-each-ref", "--format=%(if)%(raw)%(then)%(raw)%(end)"],
    ] {
        assert!(git(args).contains("s3cret"), "git {args:?}");
    }
    for args in [
        &["diff"][..],
        &["grep", "-c", "fn"],
        &["log", "--oneline"],
        &["for-each-ref"],
        &[
            "for-each-ref",
            "--format=%(refname) %(raw:size) %(contents)",
        ],
        &["for-each-ref", "--format=%%(raw)"],
    ] {
        assert!(!git(args).contains("s3cret"), "git {args:?}");
    }
    let decide = decider(engine, root);
    all_decided(
        &decide,
        Outcome::Ask,
        &[
            "git show",
            "git show --stat",
            "git log -p",
            "git log -p -- src",
            "git diff HEAD~1",
            "git diff HEAD~1 -- src",
            "git diff old",
            "git diff v1.0 HEAD",
            "git diff main..old",
            "git diff 'HEAD@{1}'",
            "git grep TOKEN v1.0",
            "git grep -e TOKEN old",
            "git diff --stat -p HEAD~1",
            "git diff --name-only -U3 old",
            "git stash show -p",
            "git cat-file -p HEAD~1",
            "git diff-tree -p HEAD",
            "git for-each-ref --format='%(raw)'",
            "git for-each-ref --format '%(*raw)' refs/tags",
            "git for-each-ref --format='%(if)%(raw)%(then)x%(end)'",
            "git for-each-ref --format='%(RAW)'",
            "git verify-tag --format='%(raw)' blob",
        ],
    );
    all_decided(
        &decide,
        Outcome::Deny,
        &["git show HEAD~1:.env", "git show v1.0 -- .env"],
    );
    all_decided(
        &decide,
        Outcome::Allow,
        &[
            "git status",
            "git diff",
            "git diff -- src",
            "git diff src/main.rs",
            "git diff --stat",
            "git grep TOKEN",
            "git grep -n TOKEN -- src",
            "git log --oneline",
            "git log --stat old",
            "git blame src/main.rs",
            "git diff --stat HEAD~1",
            "git diff --name-only main...old",
            "git diff --cached --name-status",
            "git for-each-ref",
            "git for-each-ref --format='%(refname:short) %(objectname) %(raw:size)' refs/tags",
            "git for-each-ref --sort=-committerdate --count=5 --format='%(refname:short)%09%(subject)'",
            "git for-each-ref --format='%%(raw)'",
        ],
    );
}

/// A note is any blob: `git notes add -C HEAD~1:.env` attaches a file from
/// history to a commit, and plain `git log` prints it. Where notes may be
/// (a notes ref, loose or packed, or a configuration naming the notes to
/// show), what prints them asks; where none are, it runs.
#[test]
fn a_note_may_be_a_secret_from_history() {
    let GateBench { engine, root, .. } = &GateBench::new(&["src"]);
    let ws = root.path();
    let git = |args: &[&str]| git_in(ws, args);
    commit_a_secret(ws);
    remove_the_secret(ws);
    let decide = decider(engine, root);
    let prints_notes = [
        "git log",
        "git log -1",
        "git log --oneline --notes",
        "git log --format=%N",
        "git log --stat",
        "git whatchanged",
        "git reflog --format=%N",
    ];
    // No notes yet: the same reads run.
    all_decided(&decide, Outcome::Allow, &prints_notes);
    git(&["notes", "add", "-C", "HEAD~1:.env", "HEAD"]);
    for args in [&["log"][..], &["log", "--format=%N"], &["whatchanged"]] {
        assert!(git(args).contains("s3cret"), "git {args:?}");
    }
    all_decided(&decide, Outcome::Ask, &prints_notes);
    // `--no-notes` after every flag that shows them: none are printed.
    let no_notes = [
        &["log", "--no-notes"][..],
        &["log", "--notes", "--no-notes", "--format=%N"],
        &["log", "--notes=commits", "--no-notes"],
    ];
    for args in no_notes {
        assert!(!git(args).contains("s3cret"), "git {args:?}");
    }
    assert!(git(&["log", "--no-notes", "--notes"]).contains("s3cret"));
    all_decided(
        &decide,
        Outcome::Allow,
        &[
            "git log --no-notes",
            "git log --notes --no-notes --format=%N",
            "git log --notes=commits --no-notes",
        ],
    );
    all_decided(
        &decide,
        Outcome::Ask,
        &[
            "git log --no-notes --notes",
            "git log --no-notes --notes=commits",
        ],
    );
    git(&["pack-refs", "--all"]);
    assert!(git(&["log"]).contains("s3cret"), "packed");
    all_decided(&decide, Outcome::Ask, &prints_notes);
    all_decided(
        &decide,
        Outcome::Allow,
        &[
            "git status",
            "git shortlog -s",
            "git diff",
            "git rev-list HEAD",
        ],
    );
    // Moved to another ref that a configuration names.
    git(&["update-ref", "refs/kept", "refs/notes/commits"]);
    git(&["update-ref", "-d", "refs/notes/commits"]);
    assert!(!git(&["log"]).contains("s3cret"));
    all_decided(&decide, Outcome::Allow, &prints_notes);
    git(&["config", "core.notesRef", "refs/kept"]);
    assert!(
        git(&["log"]).contains("s3cret"),
        "named by the configuration"
    );
    all_decided(&decide, Outcome::Ask, &prints_notes);
}

/// Anything may stand where git keeps a file: a FIFO at `.git/config`
/// held `git status`'s judgement for ever. Each is judged at once, and
/// what cannot be read proves nothing (ask). The judgements run on a
/// thread of their own, so that a wait fails the test instead of holding
/// it.
#[test]
fn a_fifo_where_git_keeps_a_file_is_not_waited_on() {
    let (sender, judged) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let GateBench { engine, root, .. } = &GateBench::new(&["src"]);
        let ws = root.path();
        let git = |args: &[&str]| git_in(ws, args);
        git(&["init", "-q"]);
        fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
        git(&["add", "src/main.rs"]);
        git(&["commit", "-q", "-m", "one"]);
        let decide = decider(engine, root);
        let fifo = |name: &str| {
            let path = ws.join(".git").join(name);
            let _ = fs::remove_file(&path);
            let made = std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap();
            assert!(made.success());
            path
        };
        let mut outcomes = vec![("git grep TODO (before)", decide("git grep TODO"))];
        for (file, command) in [
            ("TODO", "git grep TODO"),
            ("packed-refs", "git diff TODO"),
            ("index", "git status"),
            ("commondir", "git log --oneline"),
            ("config", "git status"),
        ] {
            let path = fifo(file);
            outcomes.push((command, decide(command)));
            fs::remove_file(path).unwrap();
        }
        sender.send(outcomes).unwrap();
    });
    let outcomes = judged
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("every judgement returns");
    assert_eq!(outcomes[0].1, Outcome::Allow, "{outcomes:?}");
    for (command, outcome) in &outcomes[1..] {
        assert_eq!(*outcome, Outcome::Ask, "{command}: {outcomes:?}");
    }
}

/// Git reads more repositories than the one it finds: each populated
/// submodule (`git status` runs git in it, `git grep
/// --recurse-submodules` prints what it tracks), and a linked worktree
/// reads its main repository's configuration; a read runs a hook and
/// reads the files a configuration names.
#[test]
fn git_reads_look_through_submodules_and_worktrees() {
    let GateBench { engine, root, .. } = &GateBench::new(&["sub"]);
    let ws = root.path();
    let git = |dir: &Path, args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(ws, &["init", "-q"]);
    git(&ws.join("sub"), &["init", "-q"]);
    fs::write(ws.join("sub/.env"), "TOKEN=1").unwrap();
    git(&ws.join("sub"), &["add", ".env"]);
    git(&ws.join("sub"), &["commit", "-q", "-m", "env"]);
    git(ws, &["add", "sub"]);
    let decide = decider(engine, root);
    all_decided(
        &decide,
        Outcome::Allow,
        &["git status", "git log --oneline"],
    );
    all_decided(
        &decide,
        Outcome::Deny,
        &["git grep --recurse-submodules TOKEN", "git show"],
    );
    fs::write(
        ws.join("sub/.git/config"),
        "[core]\n\tfsmonitor = ./watch.sh\n",
    )
    .unwrap();
    all_decided(&decide, Outcome::Ask, &["git status", "git log --oneline"]);
    fs::write(ws.join("sub/.git/config"), "[core]\n").unwrap();

    let main = tempfile::tempdir().unwrap();
    git(main.path(), &["init", "-q"]);
    git(main.path(), &["commit", "-q", "--allow-empty", "-m", "i"]);
    git(
        main.path(),
        &["worktree", "add", "-q", &ws.join("wt").to_string_lossy()],
    );
    all_decided(&decide, Outcome::Allow, &["cd wt && git status"]);
    fs::write(
        main.path().join(".git/config"),
        "[core]\n\tfsmonitor = ./watch.sh\n",
    )
    .unwrap();
    all_decided(&decide, Outcome::Ask, &["cd wt && git status"]);

    // A bare repository kept as ordinary files, its working tree the
    // root: `git status` there writes its index, which runs the
    // `post-index-change` hook.
    for folder in ["objects", "refs", "hooks"] {
        fs::create_dir_all(ws.join("hooked.git").join(folder)).unwrap();
    }
    fs::write(ws.join("hooked.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(ws.join("hooked.git/config"), "[core]\n\tworktree = ..\n").unwrap();
    all_decided(&decide, Outcome::Allow, &["cd hooked.git && git status"]);
    fs::write(ws.join("hooked.git/hooks/post-index-change"), "#!/bin/sh\n").unwrap();
    all_decided(&decide, Outcome::Ask, &["cd hooked.git && git status"]);
    // A file its configuration names is read: `git blame` prints a line
    // of an ignore-revs file it cannot parse. The gate does not tell which
    // read reads which key's file: every git read there reads it.
    fs::remove_file(ws.join("hooked.git/hooks/post-index-change")).unwrap();
    fs::write(
        ws.join("hooked.git/config"),
        "[core]\n\tworktree = ..\n[blame]\n\tignoreRevsFile = .env\n",
    )
    .unwrap();
    all_decided(
        &decide,
        Outcome::Deny,
        &["cd hooked.git && git log --oneline"],
    );
}

/// The gate's outcome for a command of the client `agent` in `root`.
/// What `git ARGS` printed in `dir`, as a user `t` would run it.
/// A repository in `ws` whose one commit holds `src/main.rs` and a
/// `.env`.
fn commit_a_secret(ws: &Path) {
    git_in(ws, &["init", "-q", "-b", "main"]);
    fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    fs::write(ws.join(".env"), "TOKEN=s3cret").unwrap();
    git_in(ws, &["add", "src/main.rs", ".env"]);
    git_in(ws, &["commit", "-q", "-m", "one"]);
}

/// The `.env` removed from the index and the working tree, and that
/// committed: only history holds it now.
fn remove_the_secret(ws: &Path) {
    git_in(ws, &["rm", "-q", "--cached", ".env"]);
    fs::remove_file(ws.join(".env")).unwrap();
    git_in(ws, &["commit", "-q", "-m", "drop the secret"]);
}

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn decider<'a>(
    engine: &'a portcullis::pdp::Engine,
    root: &'a portcullis::facts::Root,
) -> impl Fn(&str) -> Outcome + 'a {
    move |command| {
        judge(engine, "agent", root, None, command, Transport::Cli)
            .unwrap()
            .decision
            .outcome
    }
}

/// Asserts that every one of `commands` is decided `outcome`.
fn all_decided(decide: &dyn Fn(&str) -> Outcome, outcome: Outcome, commands: &[&str]) {
    for command in commands {
        assert_eq!(decide(command), outcome, "{command}");
    }
}

/// A git read is read-only only when the configuration git will read
/// names no program: the workspace's own, a nested repository's, a bare
/// repository's kept as ordinary files, and what they include.
#[test]
fn git_reads_whose_configuration_runs_programs_are_not_proven() {
    let GateBench { engine, root, .. } = &GateBench::new(&[
        ".git",
        "vendor/lib/.git",
        "evil.git/objects",
        "evil.git/refs",
    ]);
    let ws = root.path();
    fs::write(
        ws.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n",
    )
    .unwrap();
    fs::write(ws.join("evil.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let decide = |command: &str| {
        judge(engine, "agent", root, None, command, Transport::Cli)
            .unwrap()
            .decision
            .outcome
    };
    for command in [
        "git log --oneline",
        "git -C vendor/lib status",
        "cd evil.git && git log --stat -1",
    ] {
        assert_eq!(decide(command), Outcome::Allow, "{command}");
    }
    fs::write(
        ws.join("vendor/lib/.git/config"),
        "[core]\n\tfsmonitor = ./watch.sh\n",
    )
    .unwrap();
    fs::write(
        ws.join("evil.git/config"),
        "[diff \"x\"]\n\ttextconv = ./conv\n",
    )
    .unwrap();
    fs::write(ws.join(".git/config"), "[include]\n\tpath = more\n").unwrap();
    fs::write(ws.join(".git/more"), "[core]\n\tpager = ./page\n").unwrap();
    for command in [
        "git log --oneline",
        "git -C vendor/lib status",
        "cd evil.git && git log --stat -1",
        "git --git-dir=evil.git log",
    ] {
        assert_eq!(decide(command), Outcome::Ask, "{command}");
    }
}
