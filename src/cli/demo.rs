//! `portcullis demo`: the whole loop on the built-in defaults, in a
//! temporary folder. It writes the policies out, permits what it needs
//! through a policy file (no special code), creates a token, starts `serve`
//! as a child process and talks to it with the rmcp client, as any MCP
//! client would.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Stdio;

use anyhow::Context;
use clap::Args;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::{Exit, Format, print_json};
use crate::auth::{TOKEN_ENV, TokenStore};
use crate::pdp::PolicyBundle;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the temporary folder and print where it is.
    #[arg(long)]
    pub keep: bool,
}

/// The demo's allowlist: what a team would write in 20_allowlist.cedar.
const DEMO_ALLOWLIST: &str = r#"// The demo's allowlist: paired clients may see and call the built-in
// file tools, and may see (but not call) search.

@id("demo.allow.files")
@reason("paired clients may use the workspace file tools")
permit (
  principal in Portcullis::Tier::"paired",
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
)
unless { resource == Portcullis::Tool::"builtin/search" };

@id("demo.show.search")
@reason("search is listed so the demo can show a call the allowlist does not permit")
permit (
  principal in Portcullis::Tier::"paired",
  action in Portcullis::Action::"discover_tool",
  resource == Portcullis::Tool::"builtin/search"
);
"#;

struct Step {
    title: &'static str,
    tool: &'static str,
    arguments: Value,
}

fn steps() -> Vec<Step> {
    vec![
        Step {
            title: "an allowed read inside the root",
            tool: "read_file",
            arguments: json!({"path": "README.md"}),
        },
        Step {
            title: "a write that escapes the root through a symlink (docs -> ../outside)",
            tool: "write_file",
            arguments: json!({"path": "docs/escape.txt", "content": "should never land"}),
        },
        Step {
            title: "a call the allowlist does not permit",
            tool: "search",
            arguments: json!({"pattern": "portcullis"}),
        },
        Step {
            title: "a write inside the root, which needs a human approval",
            tool: "write_file",
            arguments: json!({"path": "notes.txt", "content": "hello"}),
        },
    ]
}

pub fn run(args: &DemoArgs, format: Format) -> anyhow::Result<Exit> {
    let dir = tempfile::Builder::new()
        .prefix("portcullis-demo-")
        .tempdir()?;
    let base = dir.path();
    let token = prepare(base)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(session(base, &token, format))?;
    if format == Format::Json {
        print_json(&report)?;
    }
    if args.keep {
        let kept = dir.keep();
        eprintln!("kept {}", kept.display());
    }
    Ok(Exit::Ok)
}

/// Writes the policies (defaults plus the demo allowlist), a workspace with
/// an escaping symlink, and a token store; returns the token.
fn prepare(base: &Path) -> anyhow::Result<String> {
    for file in PolicyBundle::builtin().team_files() {
        let path = base.join(&file.logical);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, &file.text)?;
    }
    fs::write(base.join("policies/20_allowlist.cedar"), DEMO_ALLOWLIST)?;
    let workspace = base.join("workspace");
    fs::create_dir_all(workspace.join("src"))?;
    fs::create_dir_all(base.join("outside"))?;
    fs::write(
        workspace.join("README.md"),
        "# demo workspace\nportcullis guards this folder.\n",
    )?;
    fs::write(workspace.join("src/lib.rs"), "pub fn portcullis() {}\n")?;
    symlink("../outside", workspace.join("docs"))?;
    let mut store = TokenStore::open_or_new(&base.join("state/tokens.json"))?;
    Ok(store.create("demo-agent", "paired")?.as_str().to_owned())
}

async fn session(base: &Path, token: &str, format: Format) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("cannot find the portcullis binary")?;
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("serve")
        .arg("--root")
        .arg(base.join("workspace"))
        .arg("--policies")
        .arg(base.join("policies"))
        .arg("--schema")
        .arg(base.join("schemas"))
        .arg("--store")
        .arg(base.join("state/tokens.json"))
        .arg("--audit")
        .arg(base.join("state/audit/audit.jsonl"))
        .env(TOKEN_ENV, token);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()?;
    let client = ().serve(transport).await.context("the server did not start")?;
    let human = format == Format::Human;
    if human {
        println!(
            "portcullis demo: a client `demo-agent` (tier paired) connects to `portcullis serve`"
        );
        println!(
            "policies: defaults + {}",
            base.join("policies/20_allowlist.cedar").display()
        );
    }
    let tools: Vec<String> = client
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    if human {
        println!("\ntools/list: {}", tools.join(", "));
    }
    let mut calls = Vec::new();
    for step in steps() {
        let arguments: JsonObject = match &step.arguments {
            Value::Object(map) => map.clone(),
            _ => JsonObject::new(),
        };
        let result = client
            .call_tool(CallToolRequestParams::new(step.tool).with_arguments(arguments))
            .await
            .with_context(|| format!("calling {}", step.tool))?;
        let summary = summarize(&result);
        if human {
            println!(
                "\n{}\n  {} {}\n  => {}",
                step.title,
                step.tool,
                step.arguments,
                describe(&summary)
            );
        }
        calls.push(json!({"title": step.title, "tool": step.tool, "arguments": step.arguments, "result": summary}));
    }
    client.cancel().await?;
    let escaped = base.join("outside/escape.txt").exists();
    if human {
        println!(
            "\nthe escaping write {} outside the root",
            if escaped { "LANDED" } else { "left nothing" }
        );
    }
    Ok(json!({"tools": tools, "calls": calls, "escaped": escaped}))
}

fn summarize(result: &CallToolResult) -> Value {
    let mut summary = result.structured_content.clone().unwrap_or(Value::Null);
    if let Value::Object(map) = &mut summary {
        map.insert(
            "is_error".to_owned(),
            json!(result.is_error.unwrap_or(false)),
        );
    }
    summary
}

fn describe(summary: &Value) -> String {
    if summary["is_error"] != json!(true) {
        return format!(
            "ALLOW: {}",
            summary
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("ok")
                .trim_end()
        );
    }
    let policies: Vec<&str> = summary["policies"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["id"].as_str()).collect())
        .unwrap_or_default();
    format!(
        "{} ({}{}): {}",
        summary["decision"]
            .as_str()
            .unwrap_or("error")
            .to_uppercase(),
        summary["reason_code"].as_str().unwrap_or(""),
        if policies.is_empty() {
            String::new()
        } else {
            format!(", {}", policies.join(", "))
        },
        summary["reason"].as_str().unwrap_or("")
    )
}
