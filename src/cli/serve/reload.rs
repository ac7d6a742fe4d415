//! Hot reload: the policies folder, the schema folder (and with them
//! `servers.toml` and `servers.lock`) are watched, and a change is loaded by
//! the start-up loader, proven and validated whole, then swapped in for
//! every keeper at once. A set that does not load leaves the last good one
//! in force. Either way the log says so first: `policy_reload` (old and new
//! set hash, the new set's snapshot stored beside the log before the
//! record) or `policy_reload_failed` (every problem, file:line). A call
//! decides under the one set it started with ([`crate::keeper::Keeper::pinned`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use clap::ValueEnum;
use serde_json::json;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::MissedTickBehavior;

use super::super::PolicyArgs;
use crate::audit::{
    ApplyTrust, AuditLog, Kind, applied, load_snapshot, operator_signed, signed_apply,
    store_snapshot,
};
use crate::file_stamp::FileStamp;
use crate::keeper::Setting;
use crate::loosening::loosenings;
use crate::pdp::{
    self, Audience, ClientRecord, Engine, PolicyBundle, Problem, ProblemKind, SetCache,
};
use crate::servers::{Fleet, Servers};
use crate::state::Listening;

/// How often the watched folders are looked at.
const POLL: Duration = Duration::from_millis(500);
/// How long a replica waits to start following the fleet's applies.
const FOLLOW_WITHIN: Duration = Duration::from_secs(2);
/// How many times a reload reads the files again when they are replaced
/// while it reads them, before it gives up until the next look.
const READS: usize = 5;

/// When `serve` reloads its policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReloadMode {
    /// When a file in the policies or schema folder changes, and on SIGHUP.
    Watch,
    /// On SIGHUP only (for a deployment that writes the files, then says
    /// when they are complete).
    Signal,
    /// Never: the set loaded at start stays in force until a restart.
    Never,
    /// As `watch`, but a set the solver shows to permit anything the set
    /// in force does not (`policy diff`: allow or ask) is refused, and
    /// recorded with a counterexample, until `portcullis policy apply`
    /// lets that exact set through. A set that cannot be proven (no
    /// solver) is refused the same way.
    TightenOnly,
}

/// Everything a reload needs, shared with the running server.
pub(super) struct Reloader {
    pub policies: PolicyArgs,
    pub settings: Arc<ArcSwap<Setting>>,
    pub clients: Vec<ClientRecord>,
    pub proofs: Option<SetCache>,
    pub fleet: Option<Arc<Fleet>>,
    pub audit: Arc<AuditLog>,
    pub snapshots: PathBuf,
    /// The nudge file `policy apply` writes (`--reload tighten-only`).
    pub applied: PathBuf,
    /// Whose signed `policy_apply` record lets a wider set through.
    pub apply_trust: ApplyTrust,
    pub watched: Watched,
    pub session: String,
    /// A fleet's shared state, where every set's snapshot is kept too.
    pub shared: Option<crate::state::SharedState>,
    /// `serve --http`: the clients it serves, followed as they change.
    pub admission: Option<super::keepers::Admission>,
}

/// What identifies the watched files' contents as they are now: each
/// file's path and stamp.
type Fingerprint = BTreeMap<PathBuf, FileStamp>;

/// The files a reload watches, and how they looked when the set in force
/// was read: taken before start-up reads them, so that an edit made as
/// soon as the server says it serves is a change, not part of the start.
#[derive(Debug, Clone)]
pub(super) struct Watched {
    folders: Vec<PathBuf>,
    /// What was loaded. A change is loaded once two looks in a row agree,
    /// so a file an editor is still writing is not loaded half-written.
    known: Fingerprint,
}

impl Watched {
    pub fn now(policies: &PolicyArgs, applied: &Path, mode: ReloadMode) -> Self {
        let mut folders: Vec<PathBuf> = [&policies.policies, &policies.schema]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if mode == ReloadMode::TightenOnly && !folders.is_empty() {
            // An applied set is loaded at the next look.
            folders.push(applied.to_owned());
        }
        let known = fingerprint(&folders);
        Self { folders, known }
    }
}

fn fingerprint(watched: &[PathBuf]) -> Fingerprint {
    watched
        .iter()
        .flat_map(|path| {
            if path.is_dir() {
                walk(path)
            } else {
                vec![path.clone()]
            }
        })
        .filter_map(|file| FileStamp::of(&file).map(|stamp| (file, stamp)))
        .collect()
}

/// The files under `folder`, at any depth.
fn walk(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![folder.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(entry.path()),
                Ok(_) => files.push(entry.path()),
                Err(_) => {}
            }
        }
    }
    files
}

impl Reloader {
    /// Listens for SIGHUP from now on, so that one arriving before the
    /// first call is not lost to its default action (ending the process).
    pub fn hangups() -> std::io::Result<Signal> {
        signal(SignalKind::hangup())
    }

    /// Reloads on every change and every SIGHUP until the process ends.
    /// With `Never`, SIGHUP is only logged.
    pub async fn run(mut self, mode: ReloadMode, mut hangup: Signal) {
        let tighten_only = mode == ReloadMode::TightenOnly;
        let Watched { folders, known } = self.watched.clone();
        let mut known = known;
        let watching = matches!(mode, ReloadMode::Watch | ReloadMode::TightenOnly);
        let mut last = known.clone();
        let mut every = tokio::time::interval(POLL);
        // Two looks that agree must be a poll apart: looks missed during a
        // long reload are not made up back to back.
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut clients_every = tokio::time::interval(POLL);
        clients_every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // In a fleet, `policy apply` reaches every replica through the
        // shared state; a lost connection is made again at the next look.
        let mut applies: Option<Listening> = None;
        loop {
            if tighten_only
                && applies.is_none()
                && let Some(state) = &self.shared
            {
                // Bounded: a database whose packets vanish must not hold up
                // the watcher and the clients' following behind it.
                applies = match tokio::time::timeout(FOLLOW_WITHIN, state.follow_applies()).await {
                    Ok(Ok(listening)) => Some(listening),
                    Ok(Err(err)) => {
                        tracing::warn!(error = %err, "cannot follow the fleet's `policy apply`: looking again soon");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(
                            "the shared state did not answer in time to follow the fleet's `policy apply`: looking again soon"
                        );
                        None
                    }
                };
            }
            let mut lost = false;
            tokio::select! {
                heard = next_apply(&mut applies), if applies.is_some() => match heard {
                    Some(_) => {
                        if let Some(read) = self.reload("policy apply", tighten_only).await {
                            known = read;
                        }
                    }
                    None => lost = true,
                },
                _ = clients_every.tick(), if self.admission.is_some() => self.follow_clients().await,
                _ = every.tick(), if watching && !folders.is_empty() => {
                    let now = fingerprint(&folders);
                    if now != known && now == last
                        && let Some(read) = self.reload("change", tighten_only).await
                    {
                        known = read;
                    }
                    last = now;
                }
                _ = hangup.recv() => match mode {
                    ReloadMode::Watch | ReloadMode::Signal | ReloadMode::TightenOnly => {
                        // What SIGHUP loads is what the watcher would load
                        // next: it need not load it again.
                        match self.reload("SIGHUP", tighten_only).await {
                            Some(read) => {
                                last = read.clone();
                                known = read;
                            }
                            // No watcher will look again.
                            None if !watching => tracing::warn!(
                                "SIGHUP loaded nothing: send it again once the files are written"
                            ),
                            None => {}
                        }
                    }
                    ReloadMode::Never => tracing::warn!("SIGHUP ignored: --reload never"),
                },
            }
            if lost {
                applies = None;
            }
        }
    }

    /// Loads the set as start-up does and swaps it in, or keeps the one in
    /// force; records which first. Gives back how the watched files looked
    /// when they were read, the state that was judged; `None` when they kept
    /// being replaced as they were read (nothing judged, nothing recorded:
    /// the watcher loads them once they settle).
    async fn reload(&self, trigger: &'static str, tighten_only: bool) -> Option<Fingerprint> {
        let old = self.settings.load_full();
        let old_hash = old.engine.identity().hash.clone();
        let live = match &self.fleet {
            Some(fleet) => fleet.live_tools().await,
            None => BTreeMap::new(),
        };
        let policies = self.policies.clone();
        let clients = self.clients.clone();
        let proofs = self.proofs.clone();
        let root = old.root.clone();
        let in_force = old_hash.clone();
        let folders = self.watched.folders.clone();
        // What a load that stopped is counted as read at: the files as they
        // were when it began, so the same stop is not recorded at every look.
        let tried = fingerprint(&folders);
        let loaded = tokio::task::spawn_blocking(move || {
            load(
                &policies,
                &folders,
                &in_force,
                &clients,
                proofs.as_ref(),
                &live,
                root,
            )
        })
        .await;
        let (read, loaded) = match loaded {
            Ok(Some(read)) => read,
            Ok(None) => {
                tracing::warn!(
                    trigger,
                    "the policy files were replaced each time they were read: nothing was loaded"
                );
                return None;
            }
            Err(err) => {
                let stopped = format!("the reload stopped: {err}");
                (
                    tried,
                    Err(vec![Problem::new(ProblemKind::Files, "", stopped)]),
                )
            }
        };
        self.judge(trigger, tighten_only, &old, loaded).await;
        Some(read)
    }

    /// Swaps in a set that loaded, unless tighten-only refuses it, or keeps
    /// the one in force; records which first.
    async fn judge(
        &self,
        trigger: &'static str,
        tighten_only: bool,
        old: &Arc<Setting>,
        loaded: Loaded,
    ) {
        let old_hash = old.engine.identity().hash.clone();
        let loaded = loaded.and_then(|loaded| {
            let Some((setting, bundle)) = loaded else {
                return Ok(None);
            };
            store_snapshot(&self.snapshots, &bundle)
                .map(|_| Some((setting, bundle)))
                .map_err(|err| {
                    vec![Problem::new(
                        ProblemKind::Files,
                        &self.snapshots.display().to_string(),
                        format!("the policy snapshot cannot be stored: {err}"),
                    )]
                })
        });
        match loaded {
            Ok(None) => tracing::debug!(trigger, "the policy set is unchanged"),
            Ok(Some((setting, bundle))) => {
                let new_hash = setting.engine.identity().hash.clone();
                if let Some(state) = &self.shared
                    && let Err(err) = state.keep_snapshot(&self.snapshots, &new_hash).await
                {
                    let problem = Problem::new(
                        ProblemKind::Files,
                        "",
                        format!("the policy snapshot cannot be kept in the shared state: {err}"),
                    );
                    return self.record_failed(trigger, &old_hash, &[problem]).await;
                }
                let (setting, applied) = if tighten_only {
                    match self.no_wider(trigger, old, setting, bundle).await {
                        Some(admitted) => admitted,
                        None => return,
                    }
                } else {
                    (setting, false)
                };
                let mut record = json!({
                    "event": "policy_reload", "session": self.session, "trigger": trigger,
                    "old": old_hash, "new": new_hash, "policy_set": setting.engine.identity(),
                });
                if applied {
                    record["applied"] = json!(true);
                }
                // Recorded before it takes effect: a set no record names
                // never decides.
                if let Err(err) = self.audit.append_many(vec![(Kind::System, record)]).await {
                    tracing::error!(error = %err, "the reload could not be recorded: the old policy set stays in force");
                    return;
                }
                self.settings.store(Arc::new(setting));
                tracing::info!(trigger, old = %old_hash, new = %new_hash, "policy set reloaded");
            }
            Err(problems) => self.record_failed(trigger, &old_hash, &problems).await,
        }
    }

    /// A set that does not load: every problem logged, and recorded with the
    /// set that stays in force.
    async fn record_failed(&self, trigger: &'static str, in_force: &str, problems: &[Problem]) {
        for problem in problems {
            tracing::error!("{problem}");
        }
        tracing::error!(trigger, policy_set = %in_force,
            "the changed policy set does not load: the one in force stays");
        let record = json!({
            "event": "policy_reload_failed", "session": self.session, "trigger": trigger,
            "policy_set": in_force, "problems": problems,
        });
        if let Err(err) = self.audit.append_many(vec![(Kind::System, record)]).await {
            tracing::error!(error = %err, "the failed reload could not be recorded");
        }
    }
}

impl Reloader {
    /// `--reload tighten-only`: the new setting, with whether it came
    /// through only as an applied set; `None` when it is refused, which is
    /// recorded (`policy_reload_refused`, with the widenings the solver
    /// found) and logged. A set that cannot be proven is refused as one
    /// that widens: a change never opens anything unseen.
    async fn no_wider(
        &self,
        trigger: &'static str,
        old: &Arc<Setting>,
        setting: Setting,
        bundle: PolicyBundle,
    ) -> Option<(Setting, bool)> {
        let in_force = Arc::clone(old);
        let old_hash = old.engine.identity().hash.clone();
        let snapshots = self.snapshots.clone();
        let in_force_hash = old_hash.clone();
        let judged = tokio::task::spawn_blocking(move || {
            let verdict = pdp::diff(&in_force.engine, &setting.engine);
            // The data files are compared with the set in force as it was
            // recorded: its snapshot, stored before it took effect.
            let data = load_snapshot(&snapshots, &in_force_hash)
                .map(|in_force| loosenings(&in_force, &bundle))
                .map_err(|err| format!("the set in force has no readable snapshot: {err}"));
            (setting, verdict, data)
        })
        .await;
        let (setting, verdict, data) = match judged {
            Ok(judged) => judged,
            Err(err) => {
                tracing::error!(error = %err, "the proof of the changed policy set stopped: the one in force stays");
                return None;
            }
        };
        let new_hash = setting.engine.identity().hash.clone();
        let (data_widenings, data_error) = match data {
            Ok(found) => (found, None),
            Err(error) => (Vec::new(), Some(error)),
        };
        let (widenings, error) = match &verdict {
            Ok(diff) if !diff.wider() && data_widenings.is_empty() && data_error.is_none() => {
                return Some((setting, false));
            }
            Ok(diff) => (
                diff.findings.iter().filter(|f| f.wider).collect::<Vec<_>>(),
                data_error,
            ),
            Err(err) => (Vec::new(), Some(err.to_string())),
        };
        if self.signed_apply_for(&new_hash).await {
            tracing::info!(policy_set = %new_hash, "a wider policy set is loaded: a signed `policy apply` let it through");
            return Some((setting, true));
        }
        for finding in &widenings {
            tracing::error!(action = %finding.action, outcome = finding.outcome.as_str(),
                counterexample = %serde_json::to_string(&finding.counterexample).unwrap_or_default(),
                "the changed policy set permits what the one in force does not");
        }
        for loosening in &data_widenings {
            tracing::error!(file = %loosening.file, entry = %loosening.entry,
                change = %loosening.change, "the changed policy set loosens a data file");
        }
        if let Some(error) = &error {
            tracing::error!(%error, "the changed policy set could not be proven no wider");
        }
        tracing::error!(trigger, policy_set = %old_hash, refused = %new_hash,
            "--reload tighten-only: the changed policy set stays unloaded until `portcullis policy apply` lets it through");
        let record = json!({
            "event": "policy_reload_refused", "session": self.session, "trigger": trigger,
            "policy_set": old_hash, "refused": new_hash,
            "widenings": widenings, "data_widenings": data_widenings, "error": error,
        });
        if let Err(err) = self.audit.append_many(vec![(Kind::System, record)]).await {
            tracing::error!(error = %err, "the refused reload could not be recorded");
        }
        None
    }
}

impl Reloader {
    /// Whether the log holds a signed `policy apply` of the set `hash`. A
    /// hash listed by hand in the nudge file, with no signed record, lets
    /// nothing through (and is logged as ignored).
    async fn signed_apply_for(&self, hash: &str) -> bool {
        let Some(log) = self.audit.file().map(Path::to_owned) else {
            return self.shared_apply_for(hash).await;
        };
        let (trust, wanted) = (self.apply_trust.clone(), hash.to_owned());
        let signed = tokio::task::spawn_blocking(move || signed_apply(&log, &wanted, &trust)).await;
        match signed {
            Ok(Ok(true)) => return true,
            Ok(Ok(false)) => {
                if applied(&self.applied)
                    .is_ok_and(|listed| listed.iter().any(|a| a.policy_set == hash))
                {
                    tracing::warn!(policy_set = %hash, file = %self.applied.display(),
                        "the set is listed as applied, but the log holds no signed `policy_apply` for it: the list is ignored");
                }
            }
            Ok(Err(err)) => {
                tracing::error!(error = %err, "the log cannot be read for a signed `policy apply`: the wider set is refused");
            }
            Err(err) => {
                tracing::error!(error = %err, "the search for a signed `policy apply` stopped: the wider set is refused");
            }
        }
        false
    }

    /// In a fleet: whether the shared state holds a `policy apply` of the
    /// set `hash` signed by the operator key this replica was given. A
    /// replica's own log key signs nothing the others trust, so without
    /// `--apply-key` no wider set comes through.
    async fn shared_apply_for(&self, hash: &str) -> bool {
        let (Some(state), ApplyTrust::Operator(key)) = (&self.shared, &self.apply_trust) else {
            tracing::error!(policy_set = %hash,
                "a fleet lets a wider set through only with an operator's signed `policy apply`: give every replica --apply-key; the wider set is refused");
            return false;
        };
        match state.applies_of(hash).await {
            Ok(records) => {
                let signed = records
                    .iter()
                    .any(|record| operator_signed(record, hash, key));
                if !signed && !records.is_empty() {
                    tracing::warn!(policy_set = %hash,
                        "the shared state lists the set as applied, but no record is signed by the operator key: ignored");
                }
                signed
            }
            Err(err) => {
                tracing::error!(error = %err, "the shared state cannot be read for a signed `policy apply`: the wider set is refused");
                false
            }
        }
    }
}

/// The next set applied in the fleet; `None` once the connection that
/// listens is lost.
async fn next_apply(applies: &mut Option<Listening>) -> Option<String> {
    match applies {
        Some(listening) => listening.heard.recv().await,
        None => std::future::pending().await,
    }
}

/// What a reload made of the files: a new setting with the bundle it was
/// built from, `None` when the files hash as the set in force (the set
/// hash covers every file), or why they do not load.
type Loaded = Result<Option<(Setting, PolicyBundle)>, Vec<Problem>>;

/// The start-up loader, run again on the files as they were at one state
/// (the fingerprint given back): the bundle, the servers files, the
/// registry over the tools the downstream servers list now, and the engine,
/// proven. `None` when the files were replaced each time they were read.
fn load(
    policies: &PolicyArgs,
    folders: &[PathBuf],
    in_force: &str,
    clients: &[ClientRecord],
    proofs: Option<&SetCache>,
    live: &BTreeMap<String, Vec<serde_json::Value>>,
    root: crate::facts::Root,
) -> Option<(Fingerprint, Loaded)> {
    let (read, bundle) = read_settled(folders, || policies.bundle())?;
    let loaded = bundle
        .map_err(|err| vec![Problem::new(ProblemKind::Files, "", err.to_string())])
        .and_then(|bundle| {
            if bundle.hash() == in_force {
                return Ok(None);
            }
            let servers = Servers::of(&bundle).map_err(|err| err.problems)?;
            let setting = setting(&bundle, &servers, live, clients, proofs, root)?;
            Ok(Some((setting, bundle)))
        });
    Some((read, loaded))
}

/// The files read at one state, with its fingerprint. Two agreeing looks
/// say a change has settled, not that no other lands while the files are
/// read: a file replaced during the read would make a set of two states
/// (judged as one, and recorded against a fingerprint it was not read at),
/// so the read is made again until the files are the same before and after.
fn read_settled<T>(folders: &[PathBuf], mut read: impl FnMut() -> T) -> Option<(Fingerprint, T)> {
    (0..READS).find_map(|_| {
        let before = fingerprint(folders);
        let contents = read();
        (fingerprint(folders) == before).then_some((before, contents))
    })
}

/// The registry over the tools the downstream servers list, and the
/// engine, proven: what start-up and every reload build from the files.
pub(super) fn setting(
    bundle: &PolicyBundle,
    servers: &Servers,
    live: &BTreeMap<String, Vec<serde_json::Value>>,
    clients: &[ClientRecord],
    proofs: Option<&SetCache>,
    root: crate::facts::Root,
) -> Result<Setting, Vec<Problem>> {
    let registry = servers.registry(bundle, live).map_err(|err| err.problems)?;
    let (engine, _) = Engine::load_proven(bundle, &registry, clients, proofs, Audience::AnyClient)
        .map_err(|err| err.problems)?;
    Ok(Setting {
        engine,
        registry,
        root,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    /// Replaces `file` by rename, as an editor does.
    fn replace(file: &Path, text: &str) {
        let staged = file.with_extension("staged");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, file).unwrap();
    }

    #[test]
    fn a_file_replaced_during_the_read_is_read_again_and_the_state_read_is_the_one_given() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policies").join("a.cedar");
        std::fs::create_dir(file.parent().unwrap()).unwrap();
        replace(&file, "first");
        let folders = vec![file.parent().unwrap().to_owned()];
        let mut reads = 0;
        let (read, text) = read_settled(&folders, || {
            reads += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            if reads == 1 {
                // The edit lands while the first read is under way.
                replace(&file, "second");
            }
            text
        })
        .unwrap();
        assert_eq!(reads, 2, "the read under an edit is made again");
        assert_eq!(text, "second");
        assert_eq!(
            read,
            fingerprint(&folders),
            "the state given is the one read"
        );
    }

    #[test]
    fn files_replaced_at_every_read_are_not_judged() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.cedar");
        replace(&file, "0");
        let folders = vec![dir.path().to_owned()];
        let mut reads = 0;
        let settled = read_settled(&folders, || {
            reads += 1;
            replace(&file, &reads.to_string());
        });
        assert!(settled.is_none());
        assert_eq!(reads, READS, "bounded");
    }
}
