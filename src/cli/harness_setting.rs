//! What `hook` and `exec` both rest on, kept apart from either so neither
//! imports the other: the approvals the hook issues and `exec` redeems,
//! and a policy set that does not load, as one message.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::state_paths::StoreArgs;
use crate::approval::CommandApprovals;
use crate::clock::SystemClock;
use crate::pdp::LoadError;

/// How long an approval the hook hands to `exec` stays good: the human
/// answers the harness's prompt, then the harness runs the command.
pub const COMMAND_APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);

/// The approvals the hook issues and `exec` redeems, with the key beside
/// the token store.
pub fn command_approvals(store: &StoreArgs) -> anyhow::Result<CommandApprovals> {
    let store = store.resolve().context("no token store")?;
    let keys = store
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(CommandApprovals::open(
        keys,
        COMMAND_APPROVAL_TTL,
        Arc::new(SystemClock),
    )?)
}

/// Every problem of a set that does not load, as one error.
pub fn load_failed(err: LoadError) -> anyhow::Error {
    let problems: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    anyhow::anyhow!("the policy set does not load: {}", problems.join("; "))
}
