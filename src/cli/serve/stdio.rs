//! `serve` over stdio: the one client whose token is in the environment.

use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

use super::super::Exit;
use super::super::signals::Signals;
use super::{ServeArgs, World};
use crate::facts::Transport;
use crate::mcp::{Callers, PortcullisServer};

pub(super) fn serve(world: World, _args: &ServeArgs) -> anyhow::Result<Exit> {
    let keepers = world.keepers(Transport::Stdio);
    let Some(keeper) = keepers.into_iter().next() else {
        anyhow::bail!("no client to serve");
    };
    let client = keeper.client();
    tracing::info!(
        client = %client.name,
        fingerprint = %client.fingerprint,
        tier = %client.tier,
        policy_set = %keeper.engine().identity().hash,
        root = %world.settings.load().root.path().display(),
        "serving over stdio"
    );
    let start = json!({
        "client": {"name": client.name, "fingerprint": client.fingerprint, "tier": client.tier},
        "transport": "stdio",
    });
    let signals = {
        let _entered = world.runtime.enter();
        Signals::install().context("cannot listen for SIGINT and SIGTERM")?
    };
    let handler = PortcullisServer::new(
        Callers::One(Arc::clone(&keeper)),
        &world.set.bundle,
        Arc::clone(&world.approvals),
        world.set.surface,
    )?;
    let serving = crate::mcp::serve_stdio(keeper, handler, signals.first());
    let fields = start.as_object().cloned().unwrap_or_default();
    world.run(fields, None, serving)
}
