//! `portcullis token {create,list,revoke}`: manages the token store. A
//! token is printed once, at creation, and never again.

use clap::{Args, Subcommand};
use serde_json::json;

use super::state_paths::{StateArgs, StoreArgs, with_state};
use super::{Exit, Format, PolicyArgs, print_json};
use crate::auth::{Revoked, StoredClient, Token, TokenStore};
use crate::pdp::{ClientRecord, Engine, ProblemKind};
use crate::servers::registry_for;
use crate::state::ClientTable;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a client and print its token, once.
    Create(CreateArgs),
    /// List the clients: name, tier, fingerprint, created.
    List(ListArgs),
    /// Remove a client; a running `serve` refuses its token from its next
    /// request (every replica of a fleet, within a second).
    Revoke(RevokeArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The client's name (A-Z a-z 0-9 . _ -); policies may name it.
    pub name: String,
    /// The client's tier, declared in tiers.json. Never `owner`.
    #[arg(long, default_value = "paired")]
    pub tier: String,
    /// Make an approver of this group (declared in tiers.json) instead of
    /// a client: it answers the approval inbox's questions and can never
    /// open an MCP session. Repeat for several groups.
    #[arg(long = "approver", value_name = "GROUP")]
    pub approver: Vec<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub state: StateArgs,
    #[command(flatten)]
    pub policies: PolicyArgs,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    pub name: String,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

fn store_path(store: &StoreArgs) -> anyhow::Result<std::path::PathBuf> {
    store.resolve().ok_or_else(|| {
        anyhow::anyhow!(
            "no token store: set --store, PORTCULLIS_TOKEN_STORE, XDG_STATE_HOME or HOME"
        )
    })
}

pub fn run(command: TokenCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        TokenCommand::Create(args) => create(&args, format),
        TokenCommand::List(args) => list(&args, format),
        TokenCommand::Revoke(args) => revoke(&args, format),
    }
}

fn create(args: &CreateArgs, format: Format) -> anyhow::Result<Exit> {
    if !args.approver.is_empty() {
        return create_approver(args, format);
    }
    // The tier must be one the policy set declares, or the client could
    // never be served.
    let bundle = args.policies.bundle()?;
    let record = ClientRecord {
        name: args.name.clone(),
        tier: args.tier.clone(),
    };
    let loaded = registry_for(&bundle)
        .and_then(|registry| Engine::load(&bundle, &registry, std::slice::from_ref(&record)));
    if let Err(err) = loaded {
        match err
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::UnknownTier)
        {
            Some(problem) => anyhow::bail!("--tier: {}", problem.message),
            None => anyhow::bail!("the policy set does not load; run `portcullis policy validate`"),
        }
    }
    let (token, client, place) = match &args.state.url()? {
        Some(url) => {
            let (token, client) = with_state(url, async |state| {
                ClientTable::of(state).create(&args.name, &args.tier).await
            })?;
            (token, client, url.to_string())
        }
        None => {
            let (token, client, path) = create_in_store(args)?;
            (token, client, path.display().to_string())
        }
    };
    let fingerprint = client.fingerprint();
    match format {
        Format::Json => print_json(&json!({
            "name": args.name,
            "tier": args.tier,
            "fingerprint": fingerprint,
            "token": token.as_str(),
            "store": place,
        }))?,
        Format::Human => {
            eprintln!(
                "created client `{}` (tier {}, fingerprint {fingerprint}) in {place}; the token is shown once:",
                args.name, args.tier,
            );
            println!("{}", token.as_str());
        }
    }
    Ok(Exit::Ok)
}

/// An approver: its groups must be ones the policy set declares, or no
/// policy could ever let it approve.
fn create_approver(args: &CreateArgs, format: Format) -> anyhow::Result<Exit> {
    let bundle = args.policies.bundle()?;
    let engine = registry_for(&bundle)
        .and_then(|registry| Engine::load(&bundle, &registry, &[]))
        .map_err(|_| {
            anyhow::anyhow!("the policy set does not load; run `portcullis policy validate`")
        })?;
    let declared = engine.approver_groups();
    if let Some(unknown) = args.approver.iter().find(|g| !declared.contains(g)) {
        anyhow::bail!(
            "--approver: the group `{unknown}` is not declared in {} (declared: {})",
            bundle.tiers.display,
            if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            }
        );
    }
    let (token, approver, place) = match &args.state.url()? {
        Some(url) => {
            let (token, approver) = with_state(url, async |state| {
                ClientTable::of(state)
                    .create_approver(&args.name, &args.approver)
                    .await
            })?;
            (token, approver, url.to_string())
        }
        None => {
            let path = store_path(&args.store)?;
            let mut store = TokenStore::open_or_new(&path)?;
            let (token, approver) = store.create_approver(&args.name, &args.approver)?;
            (token, approver, path.display().to_string())
        }
    };
    let fingerprint = approver.fingerprint();
    match format {
        Format::Json => print_json(&json!({
            "name": approver.name,
            "approver_groups": approver.groups,
            "fingerprint": fingerprint,
            "token": token.as_str(),
            "store": place,
        }))?,
        Format::Human => {
            eprintln!(
                "created approver `{}` (groups {}, fingerprint {fingerprint}) in {place}; the token is shown once:",
                approver.name,
                approver.groups.join(", "),
            );
            println!("{}", token.as_str());
        }
    }
    Ok(Exit::Ok)
}

/// A client added to the token store's file, with the audit checkpoint
/// key pair made beside it if it is not there yet.
fn create_in_store(args: &CreateArgs) -> anyhow::Result<(Token, StoredClient, std::path::PathBuf)> {
    let path = store_path(&args.store)?;
    let mut store = TokenStore::open_or_new(&path)?;
    let token = store.create(&args.name, &args.tier)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::audit::load_or_create_signer(dir)?;
    }
    let client = store
        .clients()
        .iter()
        .find(|c| c.name == args.name)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the client just created is not in the store"))?;
    Ok((token, client, path))
}

fn list(args: &ListArgs, format: Format) -> anyhow::Result<Exit> {
    let (clients, approvers, place) = match &args.state.url()? {
        Some(url) => {
            let (clients, approvers) = with_state(url, async |state| {
                let table = ClientTable::of(state);
                Ok((table.list().await?, table.approvers().await?))
            })?;
            (clients, approvers, url.to_string())
        }
        None => {
            let path = store_path(&args.store)?;
            let store = TokenStore::open_or_new(&path)?;
            (
                store.clients().to_vec(),
                store.approvers().to_vec(),
                path.display().to_string(),
            )
        }
    };
    match format {
        Format::Json => {
            let clients: Vec<_> = clients
                .iter()
                .map(|c| json!({"name": c.name, "tier": c.tier, "fingerprint": c.fingerprint(), "created": c.created}))
                .collect();
            let approvers: Vec<_> = approvers
                .iter()
                .map(|a| json!({"name": a.name, "approver_groups": a.groups, "fingerprint": a.fingerprint(), "created": a.created}))
                .collect();
            print_json(&json!({"store": place, "clients": clients, "approvers": approvers}))?;
        }
        Format::Human => {
            if clients.is_empty() {
                println!("no clients in {place}");
            } else {
                println!(
                    "{:<24} {:<10} {:<16}  CREATED",
                    "NAME", "TIER", "FINGERPRINT"
                );
            }
            for c in &clients {
                println!(
                    "{:<24} {:<10} {}  {}",
                    c.name,
                    c.tier,
                    c.fingerprint(),
                    c.created
                );
            }
            if !approvers.is_empty() {
                println!(
                    "\n{:<24} {:<20} {:<16}  CREATED",
                    "APPROVER", "GROUPS", "FINGERPRINT"
                );
            }
            for a in &approvers {
                println!(
                    "{:<24} {:<20} {}  {}",
                    a.name,
                    a.groups.join(","),
                    a.fingerprint(),
                    a.created
                );
            }
        }
    }
    Ok(Exit::Ok)
}

fn revoke(args: &RevokeArgs, format: Format) -> anyhow::Result<Exit> {
    let revoked = match &args.state.url()? {
        Some(url) => with_state(url, async |state| {
            ClientTable::of(state).revoke(&args.name).await
        })?,
        None => TokenStore::open(&store_path(&args.store)?)?.revoke(&args.name)?,
    };
    let (name, fingerprint, what) = match revoked {
        Revoked::Client(c) => (c.name.clone(), c.fingerprint(), "client"),
        Revoked::Approver(a) => (a.name.clone(), a.fingerprint(), "approver"),
    };
    match format {
        Format::Json => {
            print_json(&json!({"revoked": name, "kind": what, "fingerprint": fingerprint}))?
        }
        Format::Human => println!("revoked {what} `{name}` ({fingerprint})"),
    }
    Ok(Exit::Ok)
}
