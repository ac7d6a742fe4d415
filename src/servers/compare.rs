//! What a change to `servers.toml` and `servers.lock` newly permits: the
//! solver sees each side's tools as entities, but which arguments are
//! paths, against which root, what a server runs and which definition is
//! pinned come from these files. Every loosening is named, with its file
//! and entry, for `policy diff` and `serve --reload tighten-only`.

use std::collections::{BTreeMap, BTreeSet};

use super::Servers;
use super::catalog::{all_capabilities, downstream_specs};
use super::config::ServerConfig;
use crate::pdp::{PolicyBundle, SERVERS_FILE, SERVERS_LOCK_FILE, tier_entities};
use crate::tools::{PathRole, ToolId, ToolSpec};

/// One loosening: the file, the entry, and what it newly permits.
pub type ServerLoosening = (String, String, String);

/// Every loosening of the servers files from `old` to `new`.
pub fn server_loosenings(old: &PolicyBundle, new: &PolicyBundle) -> Vec<ServerLoosening> {
    let (Ok(before), Ok(after)) = (Servers::of(old), Servers::of(new)) else {
        return vec![(
            SERVERS_FILE.to_owned(),
            "the servers".to_owned(),
            "do not load on one side, so nothing of them can be compared".to_owned(),
        )];
    };
    let mut found = Vec::new();
    let toml = || SERVERS_FILE.to_owned();
    let lock = || SERVERS_LOCK_FILE.to_owned();
    for server in &after.config.servers {
        let entry = format!("server `{}`", server.name);
        let Some(was) = before.config.server(&server.name) else {
            found.push((toml(), entry, "added: its tools may be offered".to_owned()));
            continue;
        };
        entry_loosenings(was, server, &mut found);
        for (tool, pin) in after.lock.servers.get(&server.name).into_iter().flatten() {
            let entry = format!("tool `{}/{tool}`", server.name);
            match before.lock.pin(&server.name, tool) {
                None => found.push((
                    lock(),
                    entry,
                    "pinned: a definition OLD did not pin can be called".to_owned(),
                )),
                Some(old_pin) if old_pin.sha256 != pin.sha256 => found.push((
                    lock(),
                    entry,
                    "pinned anew with another definition, which can be called".to_owned(),
                )),
                Some(_) => {}
            }
        }
    }
    let (old_specs, new_specs) = (specs(old, &before), specs(new, &after));
    for (id, spec) in &new_specs {
        if let Some(was) = old_specs.get(id) {
            declaration(id, was, spec, &mut found);
        }
    }
    found
}

/// What a server's own entry in `servers.toml` newly permits: how it is
/// started, where its paths are judged, what it may write and reach, what
/// its errors show, and, for an agent, how the bridge starts its
/// conversations (a `start_arguments` sandbox loosened, say).
fn entry_loosenings(was: &ServerConfig, server: &ServerConfig, found: &mut Vec<ServerLoosening>) {
    let entry = format!("server `{}`", server.name);
    let mut say = |what: String| found.push((SERVERS_FILE.to_owned(), entry.clone(), what));
    if was.endpoint != server.endpoint {
        say("how it is started or reached changed".to_owned());
    }
    if was.root != server.root {
        say(format!(
            "its root changed from {} to {}: its paths are judged against another folder",
            shown(was.root.as_deref()),
            shown(server.root.as_deref())
        ));
    }
    for folder in &server.confinement.writable {
        if !was.confinement.writable.contains(folder) {
            say(format!("it may now write `{folder}`, outside its root"));
        }
    }
    if server.confinement.network && !was.confinement.network {
        say("it may now reach the network".to_owned());
    }
    if server.pass_errors && !was.pass_errors {
        say("pass_errors turned on: its error results reach clients".to_owned());
    }
    if server.agent.is_some() && was.agent != server.agent {
        say("its agent mapping changed: conversations start or continue otherwise (its start_arguments, a sandbox say)".to_owned());
    }
}

fn shown(root: Option<&std::path::Path>) -> String {
    root.map_or_else(
        || "the served root".to_owned(),
        |r| format!("`{}`", r.display()),
    )
}

/// Each pinned tool as its side declares it (the conservative default for
/// a tool no entry matches).
fn specs(bundle: &PolicyBundle, servers: &Servers) -> BTreeMap<ToolId, ToolSpec> {
    let capabilities = tier_entities(&bundle.tiers)
        .map(|(tiers, _)| all_capabilities(&tiers))
        .unwrap_or_default();
    downstream_specs(
        &servers.config,
        &servers.lock,
        &BTreeMap::new(),
        &capabilities,
    )
    .into_iter()
    .map(|(spec, _)| (spec.id.clone(), spec))
    .collect()
}

fn declaration(id: &ToolId, was: &ToolSpec, now: &ToolSpec, found: &mut Vec<ServerLoosening>) {
    let entry = format!("tool `{id}`");
    let mut say = |change: String| found.push((SERVERS_FILE.to_owned(), entry.clone(), change));
    let dropped = |before: &[String], after: &[String]| -> Vec<String> {
        let after: BTreeSet<&String> = after.iter().collect();
        before
            .iter()
            .filter(|item| !after.contains(item))
            .cloned()
            .collect()
    };
    let effects = |spec: &ToolSpec| {
        spec.effects
            .iter()
            .map(|e| e.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let fewer = dropped(&effects(was), &effects(now));
    if !fewer.is_empty() {
        say(format!(
            "no longer declared to {}: policies on those effects no longer see it",
            fewer.join(", ")
        ));
    }
    let fewer = dropped(&was.required_capabilities, &now.required_capabilities);
    if !fewer.is_empty() {
        say(format!("no longer requires {}", fewer.join(", ")));
    }
    for argument in &was.path_arguments {
        let role = now
            .path_arguments
            .iter()
            .find(|p| p.name == argument.name)
            .map(|p| p.role);
        let weaker = match role {
            None => true,
            Some(role) => {
                (argument.role.writes() && !role.writes())
                    || (argument.role.reads() && !role.reads())
            }
        };
        if weaker {
            say(format!(
                "the argument `{}` is judged as {}, was {}: the path rules see less of it",
                argument.name,
                role.map_or("no path", role_name),
                role_name(argument.role)
            ));
        }
    }
    let fewer = dropped(&was.redact, &now.redact);
    if !fewer.is_empty() {
        say(format!(
            "shows {} to policies: recorded in clear, no longer only as a SHA-256",
            fewer.join(", ")
        ));
    }
}

fn role_name(role: PathRole) -> &'static str {
    match role {
        PathRole::Read => "read",
        PathRole::Write => "write",
        PathRole::ReadWrite => "read_write",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pdp::SourceFile;
    use crate::servers::{Pin, ServersLock, pinned_definition};

    fn bundle(servers: &str, lock: &ServersLock) -> PolicyBundle {
        let mut bundle = PolicyBundle::builtin();
        let file = |name: &str, text: String| SourceFile {
            logical: format!("policies/{name}"),
            display: name.to_owned(),
            text,
        };
        bundle.servers = Some(file(SERVERS_FILE, servers.to_owned()));
        bundle.servers_lock = Some(file(SERVERS_LOCK_FILE, lock.to_text()));
        bundle
    }

    fn lock(description: &str) -> ServersLock {
        let mut lock = ServersLock::new();
        let tool = json!({"name": "write_text", "description": description, "inputSchema": {"type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}});
        lock.servers
            .entry("files".into())
            .or_default()
            .insert("write_text".into(), Pin::of(pinned_definition(&tool)));
        lock
    }

    const DECLARED: &str = "[servers.files]\ncommand = \"x\"\nroot = \"data\"\n[servers.files.tools.write_text]\neffects = [\"write\", \"destructive\"]\npaths = { path = \"write\" }\n";

    fn changes(new: &str, new_lock: &ServersLock) -> Vec<String> {
        server_loosenings(&bundle(DECLARED, &lock("writes")), &bundle(new, new_lock))
            .into_iter()
            .map(|(file, entry, change)| format!("{file}: {entry}: {change}"))
            .collect()
    }

    #[test]
    fn the_same_files_and_stricter_ones_loosen_nothing() {
        assert!(changes(DECLARED, &lock("writes")).is_empty());
        let stricter = DECLARED.replace(
            "paths = { path = \"write\" }",
            "paths = { path = \"read_write\" }",
        );
        assert!(changes(&stricter, &lock("writes")).is_empty());
    }

    #[test]
    fn every_loosening_of_a_server_or_a_pin_is_named() {
        let cases = [
            (
                DECLARED.replace(
                    "paths = { path = \"write\" }",
                    "paths = { path = \"read\" }",
                ),
                "`path` is judged as read, was write",
            ),
            (
                DECLARED.replace(
                    "effects = [\"write\", \"destructive\"]",
                    "effects = [\"write\"]",
                ),
                "no longer declared to destructive",
            ),
            (
                DECLARED.replace("root = \"data\"\n", ""),
                "root changed from `data` to the served root",
            ),
            (
                DECLARED.replace("command = \"x\"", "command = \"y\""),
                "how it is started",
            ),
            (
                format!("{DECLARED}[servers.more]\ncommand = \"z\"\n"),
                "server `more`: added",
            ),
            (
                DECLARED.replace(
                    "root = \"data\"\n",
                    "root = \"data\"\nwritable = [\"~/.npm\"]\n",
                ),
                "may now write `~/.npm`, outside its root",
            ),
            (
                DECLARED.replace("root = \"data\"\n", "root = \"data\"\nnetwork = true\n"),
                "may now reach the network",
            ),
            (
                DECLARED.replace(
                    "effects = [\"write\", \"destructive\"]",
                    "effects = [\"write\", \"destructive\", \"network\"]",
                ),
                "may now reach the network",
            ),
            (
                DECLARED.replace(
                    "paths = { path = \"write\" }",
                    "paths = { path = \"write\" }\nvisible = [\"content\"]",
                ),
                "shows content to policies: recorded in clear",
            ),
            (
                DECLARED.replace("root = \"data\"\n", "root = \"data\"\nvisible = \"all\"\n"),
                "shows content to policies",
            ),
        ];
        for (new, named) in cases {
            let found = changes(&new, &lock("writes"));
            assert!(
                found.iter().any(|f| f.contains(named)),
                "{named}: {found:?}"
            );
        }
        let found = changes(DECLARED, &lock("writes everything"));
        assert!(
            found
                .iter()
                .any(|f| f.starts_with("servers.lock: tool `files/write_text`: pinned anew")),
            "{found:?}"
        );
    }

    #[test]
    fn an_agent_whose_conversations_start_otherwise_is_a_loosening() {
        let agent = |sandbox: &str| {
            format!(
                "[servers.codex]\ncommand = \"codex\"\nargs = [\"app-server\"]\nkind = \"agent\"\npreset = \"codex-app-server\"\nstart_arguments = {{ sandbox = \"{sandbox}\" }}\n"
            )
        };
        let empty = ServersLock::new();
        let loosened = server_loosenings(
            &bundle(&agent("read-only"), &empty),
            &bundle(&agent("danger-full-access"), &empty),
        );
        assert!(
            loosened
                .iter()
                .any(|(_, entry, change)| entry == "server `codex`"
                    && change.contains("agent mapping changed")),
            "{loosened:?}"
        );
        assert!(
            server_loosenings(
                &bundle(&agent("read-only"), &empty),
                &bundle(&agent("read-only"), &empty)
            )
            .is_empty()
        );
    }
}
