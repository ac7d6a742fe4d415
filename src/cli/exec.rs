//! `portcullis exec`: decides a command with the gate, as the gate
//! records it, and runs what was allowed (or approved) confined by the
//! kernel, recording how it ended. `portcullis-confine` is the fresh
//! process that confines itself and becomes the command.
//!
//! Exit codes: the command's own (128 plus the signal that ended it), or
//! 2 denied, 3 not confined (the kernel lacks what a rule needs), 4 needs
//! an approval that was not given, 1 anything else that kept it from
//! running. Nothing runs without a durable decision record.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::harness_setting::{command_approvals, load_failed};
use super::state_paths::{StoreArgs, audit_for_one_decision, authenticate, set_cache};
use super::{ClientArgs, Exit, PolicyArgs};
use crate::approval::command_digest;
use crate::confine::{self, Launch, LaunchError, Launched, Plan, landlock_abi};
use crate::facts::{Root, Transport, shell_quote};
use crate::gate::GateAnswer;
use crate::keeper::{AuditSink, ClientIdentity, GateFailure, Keeper, Setting};
use crate::pdp::{Audience, Engine, Outcome};
use crate::tools::Registry;

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Who asks, when PORTCULLIS_TOKEN is not set (with it, the client it
    /// authenticates).
    #[command(flatten)]
    pub client: ClientArgs,
    /// The workspace root: the only tree the command may change.
    #[arg(long, env = "PORTCULLIS_ROOT", default_value = ".", value_name = "DIR")]
    pub root: PathBuf,
    /// The audit log [default: audit/audit.jsonl beside the token store].
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// A human's approval of this exact command (the hook hands one over
    /// with the command it rewrites); spent on use.
    #[arg(long, value_name = "TOKEN")]
    pub approved: Option<String>,
    /// Where the kernel lacks what a rule needs, run the command anyway,
    /// unconfined; the outcome record says so.
    #[arg(long)]
    pub unconfined_ok: bool,
    /// The command as one shell script, judged as the gate judges it and
    /// run by `bash -c` (as a harness's shell tool runs it).
    #[arg(long, conflicts_with = "argv", value_name = "SCRIPT")]
    pub command: Option<String>,
    /// The command as words, after `--`: judged as they are quoted and run
    /// without a shell.
    #[arg(last = true)]
    pub argv: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ConfinedArgs {
    /// The confinement, as `exec` drew it (JSON).
    #[arg(long)]
    pub plan: String,
    /// Where to say why the confinement failed.
    #[arg(long)]
    pub report: PathBuf,
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

/// `portcullis-confine`'s command line: it runs before every command
/// `exec` confines.
#[derive(Debug, clap::Parser)]
#[command(name = "portcullis-confine")]
struct ConfinedCommand {
    #[command(flatten)]
    args: ConfinedArgs,
}

/// Runs `portcullis-confine` from the process's arguments.
pub fn confined_main() -> Exit {
    use clap::Parser;
    confined(&ConfinedCommand::parse().args)
}

/// The helper binary `exec` starts: beside this one.
pub const CONFINE_HELPER: &str = "portcullis-confine";

/// Confines this process and becomes the command; returns only when
/// either fails.
fn confined(args: &ConfinedArgs) -> Exit {
    let report = std::fs::OpenOptions::new().write(true).open(&args.report);
    let fail = |why: String| {
        use std::io::Write;
        match &report {
            Ok(file) => {
                let mut file = file;
                let _ = file.write_all(why.as_bytes());
            }
            Err(_) => eprintln!("portcullis: not confined: {why}"),
        }
        Exit::NotConfined
    };
    let plan: Plan = match serde_json::from_str(&args.plan) {
        Ok(plan) => plan,
        Err(err) => return fail(format!("the plan cannot be read: {err}")),
    };
    if let Err(err) = confine::apply(&plan, landlock_abi()) {
        return fail(err.to_string());
    }
    let Some((program, rest)) = args.argv.split_first() else {
        return fail("no command was given".into());
    };
    let err = std::process::Command::new(program).args(rest).exec();
    eprintln!("portcullis: cannot run {program}: {err}");
    Exit::Code(if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// The set loaded and proven for this one client (the proof cached with
/// the token store).
fn engine_for(
    args: &ExecArgs,
    bundle: &crate::pdp::PolicyBundle,
    registry: &Registry,
    client: &ClientIdentity,
) -> anyhow::Result<Engine> {
    let record = crate::pdp::ClientRecord {
        name: client.name.clone(),
        tier: client.tier.clone(),
    };
    let cache = set_cache(&args.store);
    let (engine, _) = Engine::load_proven(
        bundle,
        registry,
        &[record],
        cache.as_ref(),
        Audience::LoadedClientsOnly,
    )
    .map_err(load_failed)?;
    Ok(engine)
}

pub fn run(args: &ExecArgs) -> anyhow::Result<Exit> {
    let (command, argv) = command_line(args)?;
    let client = identity(args)?;
    let bundle = args.policies.bundle()?;
    let registry = Registry::harness_named(&[])?;
    let root = Root::new(&args.root).with_context(|| format!("--root {}", args.root.display()))?;
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .context("the current folder cannot be read")?;
    let engine = engine_for(args, &bundle, &registry, &client)?;
    let secret_classes = engine.path_classes().clone();
    let approved = redeemed(args, &client.name, &command, &root, &cwd)?;
    let (_, audit) = audit_for_one_decision(&args.store, args.audit.as_deref(), &bundle)?;
    let (root_path, home) = (root.path().to_owned(), root.home().map(PathBuf::from));
    let keeper = Keeper::new(
        Setting {
            engine,
            registry,
            root,
        },
        client,
        Transport::Cli,
        audit as Arc<dyn AuditSink>,
        "exec".to_owned(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("cannot start the async runtime")?;
    let request_id = request_id()?;
    let cwd_text = cwd.to_string_lossy().into_owned();
    let (answer, decision_seq) = runtime
        .block_on(keeper.gate_for_run(&request_id, &command, Some(&cwd_text), approved))
        .map_err(|err| match err {
            GateFailure::Input(err) => anyhow::anyhow!("the command cannot be judged: {err}"),
            GateFailure::AuditUnavailable => {
                anyhow::anyhow!("the audit log cannot be written, so nothing may run")
            }
        })?;
    if let Some(refused) = refusal(&answer, approved) {
        return Ok(refused);
    }
    let plan = Plan::for_command(
        &root_path,
        &cwd,
        &answer.facts,
        &secret_classes,
        home.as_deref(),
    );
    let (launched, unconfined_because) = match launch(args, &plan, &argv, &cwd)? {
        Ok(launched) => launched,
        Err(why) => {
            eprintln!(
                "portcullis: not run: it cannot be confined: {why} (--unconfined-ok runs it anyway, recorded)"
            );
            runtime
                .block_on(keeper.record_run(
                    &request_id,
                    decision_seq,
                    "not_run",
                    json!({"reason": format!("not confined: {why}")}),
                ))
                .map_err(|_| anyhow::anyhow!("the audit log cannot be written"))?;
            return Ok(Exit::NotConfined);
        }
    };
    let (status, detail) = ran(&launched, approved, unconfined_because, &plan);
    runtime
        .block_on(keeper.record_run(&request_id, decision_seq, status, detail))
        .map_err(|_| anyhow::anyhow!("the command ran, but its outcome could not be recorded"))?;
    Ok(Exit::Code(u8::try_from(launched.shell_code()).unwrap_or(1)))
}

/// The outcome record of a command that ran: `executed` or `failed`, with
/// how it ended and how it was confined.
fn ran(
    launched: &Launched,
    approved: bool,
    unconfined_because: Option<String>,
    plan: &Plan,
) -> (&'static str, serde_json::Value) {
    let detail = json!({
        "exit_code": launched.status.code(),
        "signal": std::os::unix::process::ExitStatusExt::signal(&launched.status),
        "duration_ms": u64::try_from(launched.duration.as_millis()).unwrap_or(u64::MAX),
        "approved": approved,
        "confined": unconfined_because.is_none(),
        "unconfined_because": unconfined_because,
        "network": plan.network,
        "vcs_read_only": !plan.read_only.is_empty(),
    });
    let status = if launched.status.success() {
        "executed"
    } else {
        "failed"
    };
    (status, detail)
}

/// The command as the gate judges it (one line), and the argv that runs.
fn command_line(args: &ExecArgs) -> anyhow::Result<(String, Vec<String>)> {
    Ok(match (&args.command, args.argv.is_empty()) {
        (Some(script), _) => (
            script.clone(),
            vec!["bash".to_owned(), "-c".to_owned(), script.clone()],
        ),
        (None, false) => (shell_quote(&args.argv), args.argv.clone()),
        (None, true) => anyhow::bail!("give the command after -- or with --command SCRIPT"),
    })
}

/// Whether a human approved this exact command: `--approved` redeems a
/// single-use approval bound to the command, the root and the folder.
fn redeemed(
    args: &ExecArgs,
    client: &str,
    command: &str,
    root: &Root,
    cwd: &std::path::Path,
) -> anyhow::Result<bool> {
    let Some(token) = &args.approved else {
        return Ok(false);
    };
    let approvals = command_approvals(&args.store)?;
    let digest = command_digest(command, root.path(), cwd);
    approvals
        .redeem(token, client, &digest)
        .context("--approved")?;
    Ok(true)
}

/// The exit of a command the gate did not let run, said on stderr.
fn refusal(answer: &GateAnswer, approved: bool) -> Option<Exit> {
    let reason = answer.reason();
    match answer.decision.outcome {
        Outcome::Deny => {
            eprintln!("portcullis: denied: {reason}");
            Some(Exit::Deny)
        }
        Outcome::Ask if !approved => {
            eprintln!(
                "portcullis: needs a human's approval: {reason} (an approval of this exact command comes with --approved)"
            );
            Some(Exit::Ask)
        }
        Outcome::Ask | Outcome::Allow => None,
    }
}

/// Runs the command confined by the plan; where it cannot be confined,
/// unconfined only with `--unconfined-ok` (and why, for the record), else
/// not at all (`Err(why)` inside).
fn launch(
    args: &ExecArgs,
    plan: &Plan,
    argv: &[String],
    cwd: &std::path::Path,
) -> anyhow::Result<Result<(Launched, Option<String>), String>> {
    let exe = std::env::current_exe()
        .context("cannot tell where this portcullis binary is")?
        .with_file_name(CONFINE_HELPER);
    let confined = match landlock_abi() {
        0 => Err(LaunchError::NotConfined(
            crate::confine::ConfineError::NoLandlock.to_string(),
        )),
        _ if !exe.is_file() => Err(LaunchError::NotConfined(format!(
            "the helper {} is missing: install it beside portcullis",
            exe.display()
        ))),
        _ => confine::launch(&Launch::Confined { exe: &exe, plan }, argv),
    };
    match confined {
        Ok(launched) => Ok(Ok((launched, None))),
        Err(LaunchError::NotConfined(why)) if args.unconfined_ok => {
            tracing::warn!(%why, "running unconfined, as --unconfined-ok allows");
            let launched = confine::launch(&Launch::Unconfined { cwd }, argv)?;
            Ok(Ok((launched, Some(why))))
        }
        Err(LaunchError::NotConfined(why)) => Ok(Err(why)),
        Err(err) => Err(err.into()),
    }
}

/// The client: the one PORTCULLIS_TOKEN authenticates, or, without a
/// token, the one named on the command line (as `gate` and `check` take
/// it).
fn identity(args: &ExecArgs) -> anyhow::Result<ClientIdentity> {
    let token_given = std::env::var_os(crate::auth::TOKEN_ENV).is_some_and(|t| !t.is_empty());
    if token_given {
        let client = authenticate(&args.store).context(
            "PORTCULLIS_TOKEN does not authenticate a client in the token store (see `portcullis token list`)",
        )?;
        return Ok(ClientIdentity::from(client));
    }
    Ok(ClientIdentity {
        name: args.client.name.clone(),
        tier: args.client.tier.clone(),
        fingerprint: format!("cli:{}", args.client.name),
    })
}

fn request_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|err| anyhow::anyhow!("no randomness: {err}"))?;
    Ok(format!("exec-{}", hex::encode(bytes)))
}
