//! The words of a command that are credentials, kept out of the audit log.
//! A command's argv is recorded for the people who read the log; policies
//! never see it (they see classes, programs and where it writes), so a
//! credential recorded as its SHA-256 changes no decision and no replay,
//! and an auditor can still match it against a value they hold.
//!
//! A word is a credential when it is the value of a secret-named variable
//! (`AWS_SECRET_ACCESS_KEY=…`), of a credential header (`Authorization:
//! Bearer …`, `Cookie: …`, `X-Api-Key: …`), of a credential option
//! (`--password …`, `--token=…`, `-u user:pass`), the password of a URL
//! (`https://user:pass@host`), the value of a program's own credential
//! option (`docker login -p`, `mysql -pPASS`, `redis-cli -a`), what is
//! printed into a command that reads its credential from standard input
//! (`echo T | gh auth login --with-token`), or when it holds a string of a
//! well-known token format (`sk-…`, `ghp_…`, `AKIA…`, `xoxb-…`, a JWT, a
//! private key).

use std::sync::LazyLock;

use regex::Regex;
use sha2::{Digest, Sha256};

use super::{CommandFacts, CommandPart};

/// Names of variables, options and headers that hold credentials.
static SECRET_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(passw(or)?d|passphrase|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|credential|authori[sz]ation|\bauth\b|oauth|cookie|session[-_]?id|bearer)",
    )
    .unwrap_or_else(|_| unreachable!("the pattern is a constant that compiles"))
});

/// Tokens recognisable by their own shape, wherever they stand in a word.
static TOKEN_SHAPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(sk|rk|pk)[-_](live|test|proj|ant)?[-_]?[A-Za-z0-9_-]{16,}",
        r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}",
        r"|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}",
        r"|(AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}",
        r"|npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{30,}",
        r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        r"|-----BEGIN [A-Z ]*PRIVATE KEY-----",
    ))
    .unwrap_or_else(|_| unreachable!("the pattern is a constant that compiles"))
});

/// `scheme://user:password@host`: the password.
static URL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)([^/@\s]+)(@.*)$")
        .unwrap_or_else(|_| unreachable!("the pattern is a constant that compiles"))
});

/// Headers that hold credentials, however they are written.
const CREDENTIAL_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

/// Options whose value is a credential for the programs that give them
/// that meaning (elsewhere `-p` is a port or a path, and `gh pr create
/// -b` is a body): `(programs, the subcommand it must follow, option,
/// whether the value may also be glued to it)`. mysql's `-p` alone asks
/// for the password, so only a glued value is one.
const PROGRAM_SECRET_OPTIONS: [(&[&str], Option<&str>, &str, Glued); 10] = [
    (
        &[
            "docker", "podman", "nerdctl", "buildah", "skopeo", "sshpass",
        ],
        None,
        "-p",
        Glued::Also,
    ),
    (
        &["mysql", "mariadb", "mysqldump", "mysqladmin"],
        None,
        "-p",
        Glued::Only,
    ),
    (&["7z", "7za", "7zz"], None, "-p", Glued::Only),
    (&["redis-cli"], None, "-a", Glued::Also),
    (
        &[
            "ldapsearch",
            "ldapmodify",
            "ldapadd",
            "ldapdelete",
            "ldapwhoami",
            "ldappasswd",
        ],
        None,
        "-w",
        Glued::Also,
    ),
    (&["zip", "unzip", "zipcloak"], None, "-P", Glued::Also),
    (&["openssl"], None, "-passin", Glued::No),
    (&["openssl"], None, "-passout", Glued::No),
    (&["gh"], Some("secret"), "-b", Glued::Also),
    (&["gh"], Some("secret"), "--body", Glued::Also),
];

/// Options that say the credential comes on standard input: what the
/// command before them prints (`echo TOKEN | gh auth login --with-token`)
/// is the credential.
const FROM_STDIN: [&str; 3] = ["--with-token", "--password-stdin", "--token-stdin"];

/// Programs whose words are what they print.
const PRINTERS: [&str; 2] = ["echo", "printf"];

#[derive(Clone, Copy, PartialEq)]
enum Glued {
    /// `-pVALUE` or `-p VALUE`.
    Also,
    /// `-pVALUE` only.
    Only,
    /// `-passin VALUE` only.
    No,
}

/// The hashed form a credential is recorded as.
fn hashed(secret: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(secret.as_bytes())))
}

impl CommandFacts {
    /// These facts as the audit log keeps them: every credential word of
    /// every part's argv replaced by its SHA-256, all else as judged.
    pub fn for_the_record(&self) -> CommandFacts {
        let mut parts: Vec<CommandPart> = self
            .parts
            .iter()
            .map(|part| CommandPart {
                argv: recorded_argv(&part.argv),
                ..part.clone()
            })
            .collect();
        for index in 1..parts.len() {
            let reads_stdin = parts[index]
                .argv
                .iter()
                .any(|word| FROM_STDIN.contains(&word.as_str()));
            let before = &mut parts[index - 1];
            if reads_stdin && PRINTERS.contains(&program_name(&before.argv)) {
                for word in before.argv.iter_mut().skip(1) {
                    if !word.starts_with("sha256:") {
                        *word = hashed(word);
                    }
                }
            }
        }
        CommandFacts {
            parts,
            ..self.clone()
        }
    }
}

/// `argv` with its credentials hashed.
fn recorded_argv(argv: &[String]) -> Vec<String> {
    // curl's `-u`/`--user` take `user:password`; elsewhere `-u` means
    // other things (`sort -u`).
    let program = program_name(argv);
    let curl = program == "curl";
    let own: Vec<(&str, Glued)> = PROGRAM_SECRET_OPTIONS
        .iter()
        .filter(|(programs, subcommand, ..)| {
            programs.contains(&program)
                && subcommand.is_none_or(|sub| argv.get(1).is_some_and(|w| w == sub))
        })
        .map(|(.., option, glued)| (*option, *glued))
        .collect();
    let mut recorded = Vec::with_capacity(argv.len());
    let mut value_is_secret = false;
    for word in argv {
        if std::mem::take(&mut value_is_secret) {
            recorded.push(hashed(word));
            continue;
        }
        if let Some(&(option, glued)) = own.iter().find(|(option, _)| word == option) {
            value_is_secret = glued != Glued::Only;
            recorded.push(option.to_owned());
            continue;
        }
        if let Some((glue, value)) = own.iter().find_map(|&(option, glued)| {
            // A long option's value is glued with `=`.
            let glue = if option.starts_with("--") {
                format!("{option}=")
            } else {
                option.to_owned()
            };
            let value = word.strip_prefix(&glue)?;
            (!value.is_empty() && glued != Glued::No).then(|| (glue.clone(), value))
        }) {
            recorded.push(format!("{glue}{}", hashed(value)));
            continue;
        }
        if curl && (word == "-u" || word == "--user") {
            value_is_secret = true;
            recorded.push(word.clone());
            continue;
        }
        if curl
            && let Some(value) = word.strip_prefix("-u")
            && !value.is_empty()
        {
            recorded.push(format!("-u{}", hashed(value)));
            continue;
        }
        let (word, next_is_secret) = recorded_word(word);
        value_is_secret = next_is_secret;
        recorded.push(word);
    }
    recorded
}

/// The program of an argv, without its folder.
fn program_name(argv: &[String]) -> &str {
    argv.first()
        .map_or("", |program| program.rsplit('/').next().unwrap_or(program))
}

/// Whether `word` is a header (`Name: value`) that holds a credential:
/// one of the credential headers, or any header named like one and
/// written with the space after its colon.
fn credential_header(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once(':')?;
    let plain_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let known = CREDENTIAL_HEADERS.contains(&name.to_ascii_lowercase().as_str());
    let named = value.starts_with(' ') && SECRET_NAME.is_match(name);
    (plain_name && !value.trim().is_empty() && (known || named)).then(|| (name, value.trim()))
}

/// A credential header's value as recorded: its scheme kept (`Bearer`,
/// `Basic`), the credential hashed.
fn header_value(value: &str) -> String {
    match value.split_once(' ') {
        Some((scheme, credential))
            if !scheme.is_empty()
                && scheme.bytes().all(|b| b.is_ascii_alphabetic())
                && !credential.trim().is_empty() =>
        {
            format!("{scheme} {}", hashed(credential.trim()))
        }
        _ => hashed(value),
    }
}

/// One word as recorded, and whether the word after it is a credential
/// (the value of `--password VALUE`).
fn recorded_word(word: &str) -> (String, bool) {
    if let Some((name, value)) = credential_header(word) {
        return (format!("{name}: {}", header_value(value)), false);
    }
    // `-HAuthorization: …`, `--header=Cookie: …`: the header glued to its
    // option.
    for glued in ["-H", "--header="] {
        if let Some((name, value)) = word.strip_prefix(glued).and_then(credential_header) {
            return (format!("{glued}{name}: {}", header_value(value)), false);
        }
    }
    if TOKEN_SHAPE.is_match(word) {
        return (hashed(word), false);
    }
    if let Some(found) = URL_PASSWORD.captures(word) {
        return (
            format!("{}{}{}", &found[1], hashed(&found[2]), &found[3]),
            false,
        );
    }
    // `--password=VALUE`, `NAME=VALUE`.
    if let Some((name, value)) = word.split_once('=')
        && !value.is_empty()
        && !name.is_empty()
        && !name.contains(char::is_whitespace)
        && SECRET_NAME.is_match(name)
    {
        return (format!("{name}={}", hashed(value)), false);
    }
    // `--password VALUE`, `--api-key VALUE`.
    let option_takes_secret = word.starts_with("--") && SECRET_NAME.is_match(word);
    (word.to_owned(), option_takes_secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(words: &[&str]) -> Vec<String> {
        recorded_argv(&words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>())
    }

    fn kept_out(words: &[&str], secret: &str) {
        let got = recorded(words);
        let joined = got.join(" ");
        assert!(!joined.contains(secret), "{secret} is in {got:?}");
        assert!(
            joined.contains(&hashed(secret)) || joined.contains("sha256:"),
            "{got:?}"
        );
    }

    #[test]
    fn credentials_are_hashed_in_every_form_they_are_given() {
        kept_out(
            &[
                "curl",
                "-H",
                "Authorization: Bearer sk-live-4f1c9e0d8b7a6c5e",
                "https://x",
            ],
            "sk-live-4f1c9e0d8b7a6c5e",
        );
        kept_out(
            &["curl", "-H", "Authorization: Basic dXNlcjpwYXNz"],
            "dXNlcjpwYXNz",
        );
        kept_out(&["curl", "-HCookie: session=abc123def"], "abc123def");
        kept_out(&["curl", "--header=X-Api-Key: k-991122"], "k-991122");
        kept_out(
            &["export", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG"],
            "wJalrXUtnFEMI/K7MDENG",
        );
        kept_out(
            &["env", "GITHUB_TOKEN=abcdef", "gh", "pr", "list"],
            "abcdef",
        );
        kept_out(&["mysql", "--password=hunter2"], "hunter2");
        kept_out(&["tool", "--api-key", "plainvalue77"], "plainvalue77");
        kept_out(
            &["curl", "-u", "alice:hunter2", "https://x"],
            "alice:hunter2",
        );
        kept_out(&["curl", "-ualice:hunter2"], "alice:hunter2");
        kept_out(
            &["git", "clone", "https://bob:pa55word@example.com/r.git"],
            "pa55word",
        );
        kept_out(
            &["echo", "ghp_0123456789abcdefghij0123456789abcdef"],
            "ghp_0123456789abcdefghij0123456789abcdef",
        );
        kept_out(
            &["echo", "key=AKIAIOSFODNN7EXAMPLE"],
            "AKIAIOSFODNN7EXAMPLE",
        );
        kept_out(
            &["echo", "xoxb-1234567890-abcdefghij"],
            "xoxb-1234567890-abcdefghij",
        );
        kept_out(
            &["echo", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.sig"],
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.sig",
        );
    }

    #[test]
    fn each_program_s_own_credential_options_are_hashed() {
        kept_out(
            &[
                "wget",
                "--header=Authorization: Bearer abc123xyz",
                "https://x",
            ],
            "abc123xyz",
        );
        kept_out(
            &["wget", "--header", "Authorization: Bearer abc123xyz"],
            "abc123xyz",
        );
        kept_out(&["wget", "--http-password=hunter2", "https://x"], "hunter2");
        kept_out(
            &["wget", "--http-password", "hunter2", "https://x"],
            "hunter2",
        );
        kept_out(
            &["docker", "login", "-u", "me", "-p", "hunter2", "reg.io"],
            "hunter2",
        );
        kept_out(&["/usr/bin/docker", "login", "-phunter2"], "hunter2");
        kept_out(&["sshpass", "-p", "hunter2", "ssh", "host"], "hunter2");
        kept_out(&["mysql", "-uroot", "-phunter2", "db"], "hunter2");
        kept_out(&["redis-cli", "-a", "hunter2", "ping"], "hunter2");
        kept_out(
            &["ldapsearch", "-D", "cn=admin", "-w", "hunter2"],
            "hunter2",
        );
        kept_out(&["zip", "-P", "hunter2", "a.zip", "f"], "hunter2");
        kept_out(&["7z", "a", "-phunter2", "a.7z"], "hunter2");
        kept_out(
            &["openssl", "rsa", "-passin", "pass:hunter2", "-in", "k"],
            "pass:hunter2",
        );
        kept_out(&["gh", "secret", "set", "API", "-b", "hunter2"], "hunter2");
        kept_out(
            &["gh", "secret", "set", "API", "--body", "hunter2"],
            "hunter2",
        );
        kept_out(&["gh", "secret", "set", "API", "--body=hunter2"], "hunter2");
        kept_out(
            &[
                "env",
                "AWS_SESSION_TOKEN=FwoGZXIvYXdzEJr",
                "aws",
                "s3",
                "ls",
            ],
            "FwoGZXIvYXdzEJr",
        );
        // The same letters mean other things elsewhere.
        for words in [
            &["mysql", "-p", "db"][..],
            &["ssh", "-p", "2222", "host"],
            &["mkdir", "-p", "a/b"],
            &["sort", "-u", "names.txt"],
            &["grep", "-w", "word", "f"],
            &["gh", "pr", "create", "-b", "the body"],
        ] {
            assert_eq!(recorded(words), words, "{words:?}");
        }
    }

    fn of_parts(parts: Vec<CommandPart>) -> CommandFacts {
        CommandFacts {
            classes: Default::default(),
            programs: Default::default(),
            writes_inside_root: true,
            writes_vcs_metadata: false,
            touches_vcs_metadata: false,
            opaque: false,
            parts,
        }
    }

    #[test]
    fn what_is_piped_into_a_credential_read_from_stdin_is_hashed() {
        let part = |argv: &[&str]| CommandPart {
            argv: argv.iter().map(|w| (*w).to_owned()).collect(),
            program: argv[0].to_owned(),
            classes: Default::default(),
        };
        for (printer, reader) in [
            (
                &["echo", "plaintoken42"][..],
                &["gh", "auth", "login", "--with-token"][..],
            ),
            (
                &["printf", "%s", "plaintoken42"],
                &["docker", "login", "--password-stdin", "-u", "me"],
            ),
        ] {
            let facts = of_parts(vec![part(printer), part(reader)]);
            let recorded = facts.for_the_record();
            let text = format!("{:?}", recorded.parts);
            assert!(!text.contains("plaintoken42"), "{text}");
            assert_eq!(recorded.parts[0].argv[0], printer[0]);
        }
        let facts = of_parts(vec![part(&["echo", "hello"]), part(&["wc", "-c"])]);
        assert_eq!(facts.for_the_record().parts[0].argv, ["echo", "hello"]);
    }

    #[test]
    fn ordinary_words_are_kept_as_written() {
        for words in [
            &["git", "log", "--oneline", "-n", "5"][..],
            &["grep", "-r", "token", "src/"],
            &["ls", "-la", "https://example.com/a:b"],
            &["cargo", "test", "--", "auth::tests"],
            &["echo", "key: value"],
            &["sort", "-u", "names.txt"],
            &["git", "log", "--author=alice", "--since=2.weeks"],
            &["rg", "-n", "session", "-g", "*.rs"],
        ] {
            assert_eq!(recorded(words), words, "{words:?}");
        }
        let hashed_name = recorded(&["export", "PATH=/usr/bin"]);
        assert_eq!(hashed_name, ["export", "PATH=/usr/bin"]);
    }

    #[test]
    fn the_recorded_facts_differ_only_in_argv() {
        let facts = CommandFacts {
            classes: ["network".to_owned()].into(),
            programs: ["curl".to_owned()].into(),
            writes_inside_root: true,
            writes_vcs_metadata: false,
            touches_vcs_metadata: false,
            opaque: false,
            parts: vec![CommandPart {
                argv: vec!["curl".into(), "--token".into(), "t0k3n".into()],
                program: "curl".into(),
                classes: ["network".to_owned()].into(),
            }],
        };
        let recorded = facts.for_the_record();
        assert_eq!(recorded.parts[0].argv[2], hashed("t0k3n"));
        assert_eq!(
            CommandFacts {
                parts: facts.parts.clone(),
                ..recorded.clone()
            },
            facts
        );
    }
}
