//! Clients created, revoked or re-tiered while `serve --http` runs: the
//! directory (the token store's file, or a fleet's table) is looked at
//! every half second, and a changed list of clients is loaded as the
//! policies were, with the set in force (its snapshot, so a change to the
//! files meanwhile goes through the reload and its checks, not through
//! here), recorded (`clients_changed`) before it takes effect, and served
//! without a restart. A revoked token is refused at its next request
//! whatever happens here: the directory is asked at every request.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::reload::{Reloader, setting};
use crate::audit::{Kind, load_snapshot};
use crate::auth::StoredClient;
use crate::keeper::Keeper;
use crate::pdp::{ClientRecord, Problem, ProblemKind};
use crate::servers::Servers;

impl Reloader {
    /// Serves the directory's clients as they are now, if they changed.
    pub(super) async fn follow_clients(&mut self) {
        let Some(admission) = &self.admission else {
            return;
        };
        // A directory that cannot say refuses every request by itself.
        let Some(listed) = admission.clients.listed() else {
            return;
        };
        if listed[..] == admission.served[..] {
            return;
        }
        let (listed, served) = (listed.to_vec(), admission.served.clone());
        let records: Vec<ClientRecord> = listed.iter().map(ClientRecord::from).collect();
        let loaded = if records == self.clients {
            Ok(())
        } else {
            self.load_clients(&served, &listed, records).await
        };
        let Some(admission) = &mut self.admission else {
            return;
        };
        // Keepers of clients whose record is unchanged stay, with their calls
        // in flight; a client the policies could not be loaded with is left
        // out until the next change.
        let in_force: Vec<ClientRecord> = self.clients.clone();
        let current: BTreeMap<String, Arc<Keeper>> = admission
            .clients
            .keepers()
            .into_iter()
            .map(|keeper| (keeper.client().fingerprint.clone(), keeper))
            .collect();
        let keepers: Vec<Arc<Keeper>> = listed
            .iter()
            .filter(|client| in_force.contains(&ClientRecord::from(*client)))
            .map(|client| match current.get(&client.fingerprint()) {
                Some(keeper)
                    if keeper.client().tier == client.tier
                        && keeper.client().name == client.name =>
                {
                    Arc::clone(keeper)
                }
                _ => admission.maker.keeper(client.clone()),
            })
            .collect();
        admission.clients.admit(keepers);
        if let Err(problems) = loaded {
            for problem in &problems {
                tracing::error!("{problem}");
            }
            tracing::error!(
                "the policies do not load with the changed clients: the clients new to them are refused"
            );
        }
        admission.served = listed;
    }

    /// Loads the set in force again for `records` and swaps it in,
    /// recorded first.
    async fn load_clients(
        &mut self,
        served: &[StoredClient],
        listed: &[StoredClient],
        records: Vec<ClientRecord>,
    ) -> Result<(), Vec<Problem>> {
        let old = self.settings.load_full();
        let hash = old.engine.identity().hash.clone();
        let live = match &self.fleet {
            Some(fleet) => fleet.live_tools().await,
            None => BTreeMap::new(),
        };
        let (snapshots, proofs, root) = (
            self.snapshots.clone(),
            self.proofs.clone(),
            old.root.clone(),
        );
        let for_clients = records.clone();
        let built = tokio::task::spawn_blocking(move || {
            let bundle = load_snapshot(&snapshots, &hash).map_err(|err| {
                vec![Problem::new(
                    ProblemKind::Files,
                    &snapshots.display().to_string(),
                    format!("the set in force has no readable snapshot: {err}"),
                )]
            })?;
            let servers = Servers::of(&bundle).map_err(|err| err.problems)?;
            setting(
                &bundle,
                &servers,
                &live,
                &for_clients,
                proofs.as_ref(),
                root,
            )
        })
        .await
        .unwrap_or_else(|err| {
            Err(vec![Problem::new(
                ProblemKind::Files,
                "",
                format!("loading the policies for the changed clients stopped: {err}"),
            )])
        })?;
        let described =
            |clients: &mut dyn Iterator<Item = &StoredClient>| -> Vec<serde_json::Value> {
                clients
                .map(|client| json!({"name": client.name, "fingerprint": client.fingerprint(), "tier": client.tier}))
                .collect()
            };
        let record = json!({
            "event": "clients_changed", "session": self.session,
            "added": described(&mut listed.iter().filter(|c| !served.contains(c))),
            "removed": described(&mut served.iter().filter(|c| !listed.contains(c))),
            "policy_set": built.engine.identity(),
        });
        // Recorded before it takes effect, as a reload is.
        if let Err(err) = self.audit.append_many(vec![(Kind::System, record)]).await {
            return Err(vec![Problem::new(
                ProblemKind::Files,
                "",
                format!("the changed clients could not be recorded: {err}"),
            )]);
        }
        self.settings.store(Arc::new(built));
        self.clients = records;
        tracing::info!(
            clients = self.clients.len(),
            "the policies are loaded for the changed clients"
        );
        Ok(())
    }
}
