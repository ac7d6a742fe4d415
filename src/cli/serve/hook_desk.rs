//! `serve --hook-socket`: answers the hooks of the harness beside it, so
//! a hook process asks instead of loading the set (`hook/remote.rs`). It
//! decides exactly as the hook would, or declines: the same binary, the
//! same set (by hash, read again from this `serve`'s folder when it is not
//! held warm), the same token store (the client, its command approvals,
//! the proofs) and the same audit log, where every decision is recorded
//! before the answer leaves; the hook's root and `~`. A setting is kept
//! warm per set, client (its name and tier, all the policies see of it),
//! root and `~`.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwap;
use tokio_util::sync::CancellationToken;

use super::super::PolicyArgs;
use super::super::harness_setting::{command_approvals, load_failed};
use super::super::state_paths::{StoreArgs, authenticate_token, set_cache};
use super::ServeArgs;
use crate::audit::{AuditLog, store_snapshot};
use crate::auth::StoredClient;
use crate::facts::{Root, Transport};
use crate::hook::remote::{HookAsk, HookReply, RemoteError, read_ask, this_binary, write_reply};
use crate::hook::{CommandRewrite, HookAnswer, PreToolUse, decide, mcp_tool};
use crate::keeper::{AuditSink, ClientIdentity, Keeper, Setting};
use crate::pdp::{Audience, ClientRecord, Engine, SetCache};
use crate::tools::Registry;

use super::warm::Warm;

/// Longest a hook may take to send its question.
const ASK_WITHIN: Duration = Duration::from_secs(10);

/// Settings kept warm; past it the least recently asked is let go (a new
/// set, client or root is rare: a session keeps its own).
const WARM_SETTINGS: usize = 16;

/// A set, a client as the policies see it (name and tier), a root by
/// path and by the folder there now (a root removed and made again is
/// another folder, which a warm handle would not see), and the `~` of
/// the hook's judgement.
type Warmth = (String, String, String, PathBuf, (u64, u64), Option<PathBuf>);

pub(super) struct HookDesk {
    socket: PathBuf,
    listener: UnixListener,
    store: StoreArgs,
    /// The token store and the log, canonical, as a hook names them.
    same: (PathBuf, PathBuf),
    /// This binary, which a hook's must be.
    binary: (u64, u64),
    audit: Arc<AuditLog>,
    snapshots: PathBuf,
    policies: PolicyArgs,
    proofs: Option<SetCache>,
    warm: Mutex<Warm<Warmth, Arc<ArcSwap<Setting>>>>,
}

impl HookDesk {
    /// `--hook-socket`, bound, when it is given.
    pub(super) fn open_if_given(
        args: &ServeArgs,
        root: &Path,
        audit: (&Path, &Arc<AuditLog>),
    ) -> anyhow::Result<Option<Self>> {
        args.hook_socket
            .as_deref()
            .map(|socket| Self::open(socket, (&args.policies, &args.store, root), audit))
            .transpose()
    }

    /// Binds `socket` (0600; a socket left by a `serve` that is gone is
    /// replaced, one that answers is not), never inside the workspace
    /// `root` (canonical), where a hook would not ask it.
    pub(super) fn open(
        socket: &Path,
        (policies, store, root): (&PolicyArgs, &StoreArgs, &Path),
        (audit_path, audit): (&Path, &Arc<AuditLog>),
    ) -> anyhow::Result<Self> {
        let canonical = |path: &Path| {
            std::fs::canonicalize(path)
                .with_context(|| format!("{} cannot be resolved", path.display()))
        };
        let folder = socket
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if canonical(folder)?.starts_with(root) {
            anyhow::bail!(
                "--hook-socket {} is inside --root, where what the agent runs could bind it: a hook never asks a socket there",
                socket.display()
            );
        }
        let listener = bind(socket)?;
        let store_path = store.resolve().context("no token store")?;
        Ok(Self {
            socket: socket.to_owned(),
            listener,
            store: store.clone(),
            same: (canonical(&store_path)?, canonical(audit_path)?),
            binary: this_binary().context("this binary cannot be named")?,
            audit: Arc::clone(audit),
            snapshots: crate::audit::snapshots_dir(audit_path),
            policies: policies.clone(),
            proofs: set_cache(store),
            warm: Mutex::new(Warm::new(WARM_SETTINGS)),
        })
    }

    /// Answers hooks until `stop`, then waits for the answers under way
    /// (each is recorded before the session's last record) and removes the
    /// socket.
    pub(super) async fn serve(self, stop: CancellationToken) {
        let listener = match self
            .listener
            .try_clone()
            .and_then(tokio::net::UnixListener::from_std)
        {
            Ok(listener) => listener,
            Err(err) => {
                tracing::error!(error = %err, socket = %self.socket.display(), "the hook socket cannot be served");
                return;
            }
        };
        let desk = Arc::new(self);
        let mut answering = tokio::task::JoinSet::new();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = stop.cancelled() => break,
            };
            while answering.try_join_next().is_some() {}
            match accepted {
                Ok((stream, _)) => {
                    answering.spawn(Arc::clone(&desk).answer(stream));
                }
                Err(err) => tracing::warn!(error = %err, "a hook's connection failed"),
            }
        }
        drop(listener);
        while answering.join_next().await.is_some() {}
        if let Err(err) = std::fs::remove_file(&desk.socket) {
            tracing::warn!(error = %err, socket = %desk.socket.display(), "the hook socket cannot be removed");
        }
    }

    async fn answer(self: Arc<Self>, mut stream: tokio::net::UnixStream) {
        let reply = match tokio::time::timeout(ASK_WITHIN, read_ask(&mut stream)).await {
            Ok(Ok((ask, event))) => match Arc::clone(&self).decide(ask, &event).await {
                Ok(answer) => HookReply::from(answer),
                Err(reason) => HookReply::Declined { reason },
            },
            Ok(Err(err @ RemoteError::Stranger { .. })) => {
                tracing::warn!(error = %err, "a hook's question is refused");
                return;
            }
            Ok(Err(err)) => HookReply::Declined {
                reason: err.to_string(),
            },
            Err(_) => HookReply::Declined {
                reason: format!("the question took more than {} s", ASK_WITHIN.as_secs()),
            },
        };
        if let Err(err) = write_reply(&mut stream, &reply).await {
            tracing::warn!(error = %err, "a hook's answer cannot be sent");
        }
    }

    /// The hook's answer, decided and recorded here; or why the hook must
    /// decide itself.
    async fn decide(self: Arc<Self>, ask: HookAsk, bytes: &[u8]) -> Result<HookAnswer, String> {
        let (store, audit) = &self.same;
        if ask.binary != self.binary {
            return Err("serve runs another build of portcullis".into());
        }
        if &ask.store != store {
            return Err(format!("serve reads the token store {}", store.display()));
        }
        if &ask.audit != audit {
            return Err(format!("serve records in {}", audit.display()));
        }
        let event = PreToolUse::parse(bytes).map_err(|err| err.to_string())?;
        if mcp_tool(&event.tool_name).is_some() {
            return Err("an MCP server's tool is the hook's to decide".into());
        }
        let client = authenticate_token(&self.store, &ask.token)
            .ok_or("the token does not authenticate a client in serve's token store")?;
        let desk = Arc::clone(&self);
        let warmed = (ask.clone(), client.clone());
        let settings = tokio::task::spawn_blocking(move || desk.setting(&warmed.0, &warmed.1))
            .await
            .map_err(|err| format!("the setting could not be built: {err}"))??;
        let rewrite = ask
            .exec
            .map(|exec| -> Result<CommandRewrite, String> {
                Ok(CommandRewrite {
                    exec,
                    approvals: command_approvals(&self.store).map_err(|err| format!("{err:#}"))?,
                    client: client.name.clone(),
                    root: settings.load().root.path().to_owned(),
                })
            })
            .transpose()?;
        let keeper = Keeper::sharing(
            settings,
            ClientIdentity::from(client),
            Transport::Hook,
            Arc::clone(&self.audit) as Arc<dyn AuditSink>,
            event.session_id.clone(),
        );
        Ok(decide(&keeper, ask.harness, &event, rewrite.as_ref()).await)
    }

    /// The warm setting of the hook's set, client and root, built (and the
    /// set's snapshot kept beside the log) the first time.
    fn setting(
        &self,
        ask: &HookAsk,
        client: &StoredClient,
    ) -> Result<Arc<ArcSwap<Setting>>, String> {
        let folder = std::fs::metadata(&ask.root)
            .map_err(|err| format!("workspace root {}: {err}", ask.root.display()))?;
        let key = (
            ask.policy_set.clone(),
            client.name.clone(),
            client.tier.clone(),
            ask.root.clone(),
            (folder.dev(), folder.ino()),
            ask.home.clone(),
        );
        if let Some(warm) = self.warmed().get(&key) {
            return Ok(warm);
        }
        let bundle = self.policies.bundle().map_err(|err| format!("{err:#}"))?;
        if bundle.hash() != ask.policy_set {
            return Err(format!(
                "serve reads another policy set from its folder ({})",
                bundle.hash()
            ));
        }
        let registry = Registry::harness().map_err(|err| err.to_string())?;
        let record = ClientRecord::from(client);
        let (engine, _) = Engine::load_proven(
            &bundle,
            &registry,
            std::slice::from_ref(&record),
            self.proofs.as_ref(),
            Audience::LoadedClientsOnly,
        )
        .map_err(|err| load_failed(err).to_string())?;
        store_snapshot(&self.snapshots, &bundle).map_err(|err| err.to_string())?;
        let root = Root::new(&ask.root)
            .map_err(|err| format!("workspace root: {err}"))?
            .with_home(ask.home.clone());
        let setting = Arc::new(ArcSwap::from_pointee(Setting {
            engine,
            registry,
            root,
        }));
        self.warmed().insert(key, Arc::clone(&setting));
        Ok(setting)
    }

    /// A panic while the settings were held left them whole: they only
    /// ever gain or lose whole entries.
    fn warmed(&self) -> std::sync::MutexGuard<'_, Warm<Warmth, Arc<ArcSwap<Setting>>>> {
        self.warm.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Binds the socket, replacing one that nothing answers any more.
fn bind(socket: &Path) -> anyhow::Result<UnixListener> {
    match std::fs::symlink_metadata(socket) {
        Ok(found) if found.file_type().is_socket() => {
            if UnixStream::connect(socket).is_ok() {
                anyhow::bail!(
                    "another process answers hooks at {} already",
                    socket.display()
                );
            }
            std::fs::remove_file(socket)
                .with_context(|| format!("the stale hook socket {}", socket.display()))?;
        }
        Ok(_) => anyhow::bail!(
            "--hook-socket {} exists and is not a socket",
            socket.display()
        ),
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => {
            return Err(err).with_context(|| format!("--hook-socket {}", socket.display()));
        }
    }
    let listener = UnixListener::bind(socket)
        .with_context(|| format!("cannot bind the hook socket {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", socket.display()))?;
    listener
        .set_nonblocking(true)
        .context("the hook socket cannot be made non-blocking")?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_socket_is_kept_a_stale_one_replaced_and_a_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("hook.sock");
        let live = bind(&socket).unwrap();
        let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let err = bind(&socket).unwrap_err();
        assert!(err.to_string().contains("answers hooks"), "{err}");
        drop(live);
        bind(&socket).unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "").unwrap();
        let err = bind(&file).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert!(file.exists(), "a file in the way is left as it is");
    }
}
