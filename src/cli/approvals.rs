//! `portcullis approvals list|show|approve|deny`: an approver's terminal on
//! the approval inbox of a running `serve --approvals`. The token is an
//! approver's (`token create NAME --approver GROUP`), read from a file or
//! the environment, never from the command line where `ps` would show it.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{Exit, Format, print_json, printable};

/// The environment variable an approver's token may be given in.
pub const APPROVER_TOKEN_ENV: &str = "PORTCULLIS_APPROVER_TOKEN";

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The questions: pending ones first, then the latest answered.
    List(Endpoint),
    /// One question whole: the call, its paths and arguments, why it asks.
    Show(ShowArgs),
    /// Approve a question; the waiting call runs.
    Approve(AnswerArgs),
    /// Deny a question; the waiting call is refused with your reason.
    Deny(AnswerArgs),
}

#[derive(Debug, Args)]
pub struct Endpoint {
    /// The inbox: the address `serve --approvals` printed.
    #[arg(long, env = "PORTCULLIS_APPROVALS_URL", value_name = "URL")]
    pub url: String,
    /// A file holding your approver token [default: PORTCULLIS_APPROVER_TOKEN].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    pub id: String,
    #[command(flatten)]
    pub endpoint: Endpoint,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    pub id: String,
    /// Why, in your words: recorded, and told to the client on a denial.
    #[arg(long, default_value = "")]
    pub reason: String,
    #[command(flatten)]
    pub endpoint: Endpoint,
}

pub fn run(command: ApprovalsCommand, format: Format) -> anyhow::Result<Exit> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async {
        match command {
            ApprovalsCommand::List(endpoint) => {
                let body = request(&endpoint, "/api/questions", None).await?;
                print_list(&body, format)
            }
            ApprovalsCommand::Show(args) => {
                let body = request(
                    &args.endpoint,
                    &format!("/api/questions/{}", path_id(&args.id)?),
                    None,
                )
                .await?;
                print_question(&body, format)
            }
            ApprovalsCommand::Approve(args) => answer(&args, "approve", format).await,
            ApprovalsCommand::Deny(args) => answer(&args, "deny", format).await,
        }
    })
}

/// A question id as a path segment: what the inbox makes (hex digits),
/// nothing that could change the path.
fn path_id(id: &str) -> anyhow::Result<&str> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        anyhow::bail!("`{}` is not a question id", printable(id));
    }
    Ok(id)
}

fn token(endpoint: &Endpoint) -> anyhow::Result<String> {
    let token = match &endpoint.token_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the approver token in {}", path.display()))?,
        None => std::env::var(APPROVER_TOKEN_ENV).map_err(|_| {
            anyhow::anyhow!("no approver token: give --token-file FILE or set {APPROVER_TOKEN_ENV}")
        })?,
    };
    let token = token.trim().to_owned();
    if token.is_empty() {
        anyhow::bail!("the approver token is empty");
    }
    Ok(token)
}

/// One request to the inbox; its JSON body on success, the inbox's own
/// words as the error otherwise.
async fn request(endpoint: &Endpoint, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let token = token(endpoint)?;
    let base = endpoint.url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        anyhow::bail!(
            "--url must be http:// or https://, not `{}`",
            printable(base)
        );
    }
    // reqwest is built without a TLS provider of its own: ring is
    // portcullis's, for https and plain http alike (the client builds its
    // TLS settings either way).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .build()
        .context("cannot make an HTTP client")?;
    let url = format!("{base}{path}");
    let request = match body {
        Some(body) => client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string()),
        None => client.get(&url),
    };
    let response = request
        .bearer_auth(token)
        .send()
        .await
        .with_context(|| format!("cannot reach the approval inbox at {base}"))?;
    let status = response.status();
    let text = response.text().await.context("the inbox's answer")?;
    if status == reqwest::StatusCode::UNAUTHORIZED {
        anyhow::bail!("the inbox refused the token: is it an approver's, and not revoked?");
    }
    let value: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"error": text.trim()}));
    if !status.is_success() {
        let said = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no reason given");
        anyhow::bail!("the inbox refused ({status}): {}", printable(said));
    }
    Ok(value)
}

async fn answer(args: &AnswerArgs, verdict: &str, format: Format) -> anyhow::Result<Exit> {
    let path = format!("/api/questions/{}/answer", path_id(&args.id)?);
    let body = json!({"verdict": verdict, "reason": args.reason});
    let question = request(&args.endpoint, &path, Some(body)).await?;
    match format {
        Format::Json => print_json(&question)?,
        Format::Human => println!(
            "{} question {} ({} by {})",
            if verdict == "approve" {
                "approved"
            } else {
                "denied"
            },
            printable(text(&question, "id")),
            printable(text(&question, "name")),
            printable(text(&question, "client")),
        ),
    }
    Ok(Exit::Ok)
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn print_list(body: &Value, format: Format) -> anyhow::Result<Exit> {
    if format == Format::Json {
        print_json(body)?;
        return Ok(Exit::Ok);
    }
    let questions: Vec<&Value> = items(body, "questions").collect();
    if questions.is_empty() {
        println!("no questions in the inbox");
        return Ok(Exit::Ok);
    }
    println!(
        "{:<14} {:<10} {:<16} {:<28} EXPIRES",
        "ID", "STATUS", "CLIENT", "TOOL"
    );
    for q in questions {
        println!(
            "{:<14} {:<10} {:<16} {:<28} {}",
            printable(text(q, "id")),
            printable(text(q, "status")),
            printable(text(q, "client")),
            printable(text(q, "tool")),
            printable(text(q, "expires_at")),
        );
    }
    Ok(Exit::Ok)
}

/// The elements of the array `key` of `q`; none when it is not one.
fn items<'a>(q: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    q.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn print_question(q: &Value, format: Format) -> anyhow::Result<Exit> {
    if format == Format::Json {
        print_json(q)?;
        return Ok(Exit::Ok);
    }
    println!(
        "question {} ({})",
        printable(text(q, "id")),
        printable(text(q, "status"))
    );
    println!(
        "  `{}` ({}, over {}) asks to run `{}` ({})",
        printable(text(q, "client")),
        printable(text(q, "client_tier")),
        printable(text(q, "transport")),
        printable(text(q, "name")),
        printable(text(q, "tool")),
    );
    println!(
        "  asked {}, expires {}",
        printable(text(q, "asked_at")),
        printable(text(q, "expires_at"))
    );
    for path in items(q, "paths") {
        let name = path.get(0).and_then(Value::as_str).unwrap_or("");
        let shown = path.get(1).and_then(Value::as_str).unwrap_or("");
        println!("  path `{}`: {}", printable(name), printable(shown));
    }
    if let Some(arguments) = q.get("arguments").and_then(Value::as_object) {
        for (name, value) in arguments {
            println!(
                "  argument `{}`: {}",
                printable(name),
                printable(&value.to_string())
            );
        }
    }
    for hidden in items(q, "hidden") {
        println!(
            "  argument `{}`: hidden from policies, not shown",
            printable(hidden.as_str().unwrap_or(""))
        );
    }
    for policy in items(q, "policies") {
        println!(
            "  asks because: {} ({})",
            printable(text(policy, "reason")),
            printable(text(policy, "id"))
        );
    }
    let required = q.get("required").and_then(Value::as_u64).unwrap_or(1);
    if required > 1 {
        println!("  needs {required} distinct approvers");
    }
    for answer in items(q, "answers") {
        println!(
            "  answered {} by {} ({}) at {}: {}",
            printable(text(answer, "verdict")),
            printable(text(answer, "approver")),
            printable(text(answer, "fingerprint")),
            printable(text(answer, "at")),
            printable(text(answer, "reason")),
        );
    }
    Ok(Exit::Ok)
}
