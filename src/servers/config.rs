//! `policies/servers.toml`: the downstream MCP servers portcullis fronts,
//! how to reach each, and what their tools do. It is part of the policy
//! set (its hash, its snapshot), because what a tool is declared to do is
//! what policies decide on.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use globset::{Glob, GlobMatcher};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

use super::agent::{AgentMapping, AgentProtocol, MappingFields};
use super::protocol::Protocol;
use super::visible::{RawVisible, Visible};
use crate::facts::{PathArgument, PathRole};
use crate::pdp::{Problem, ProblemKind, SourceFile};
use crate::tools::{BUILTIN_SERVER, Effect, HARNESS_SERVER};

/// Server names portcullis uses itself.
pub const RESERVED_SERVERS: [&str; 3] = [BUILTIN_SERVER, HARNESS_SERVER, "bridge"];
/// How long one forwarded call may wait for its answer, unless a server says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to start and answer `initialize` (npx may
/// download a package first).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a forwarded call may run at most, progress or not, when its
/// server's entry does not say.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(60 * 60);
/// The longest name a client sees (`server__tool`), under the protocol's
/// tool-name rule.
pub const MAX_TOOL_NAME: usize = 128;
/// Effects of a tool that no `tools` entry matches: whatever a downstream
/// claims, it is taken to write, reach the network and destroy.
pub const UNDECLARED_EFFECTS: [Effect; 3] = [Effect::Write, Effect::Network, Effect::Destructive];

/// Every downstream server, by name.
#[derive(Debug, Clone, Default)]
pub struct ServersConfig {
    pub servers: Vec<ServerConfig>,
    /// The tools MCP clients are shown, when the team says (`surface =
    /// "wrappers"`); `serve --surface` overrides it.
    pub surface: Option<Surface>,
}

/// The tools `tools/list` shows MCP clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// Every tool the client may discover, by its own name, beside
    /// `tools_list`, `tool_call` and `gate`.
    Direct,
    /// The seed's six, fixed: the bridge's four and `tools_list` and
    /// `tool_call`; every other tool only through `tool_call`.
    Wrappers,
}

impl Surface {
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "direct" => Some(Surface::Direct),
            "wrappers" => Some(Surface::Wrappers),
            _ => None,
        }
    }
}

/// One downstream server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub endpoint: Endpoint,
    /// How long a forwarded call waits (reset by progress).
    pub timeout: Duration,
    /// How long a forwarded call may run at most, however much progress
    /// it reports.
    pub max_duration: Duration,
    pub start_timeout: Duration,
    /// Whether a downstream's error result reaches the client with its
    /// content; otherwise the client gets fixed text.
    pub pass_errors: bool,
    /// The folder the server's path arguments are relative to, when it is
    /// not the workspace root.
    pub root: Option<PathBuf>,
    /// In file order: the first whose glob matches a tool name declares it.
    pub rules: Vec<ToolRule>,
    /// For `kind = "agent"`: how the bridge holds conversations with it.
    /// Its own tools are then called only by the bridge.
    pub agent: Option<AgentMapping>,
    /// What a stdio server's confinement lets it do beyond writing beneath
    /// its root.
    pub confinement: ServerConfinement,
    /// The arguments its tools show policies where their entry does not
    /// say: none but path arguments without it.
    pub visible: Option<Visible>,
    /// The protocol era portcullis speaks to it.
    pub protocol: Protocol,
}

/// What a stdio server may do beyond the floor of its confinement (writes
/// beneath its root, VCS metadata read-only, secrets unreadable, no
/// network): each is a widening `policy diff` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerConfinement {
    /// Folders it may write outside its root, absolute or `~/...` (a
    /// launcher's cache, a state folder), as written in the entry.
    pub writable: Vec<String>,
    /// Whether it may reach the network: `network = true`, or a tool of it
    /// declared with the `network` effect.
    pub network: bool,
}

/// How portcullis reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A child process speaking MCP on stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Plain values, written in the file.
        env: BTreeMap<String, String>,
        /// Variable of the child ← variable of portcullis's environment:
        /// secrets never sit in the policy set.
        env_from: BTreeMap<String, String>,
    },
    /// A Streamable HTTP server.
    Http {
        url: String,
        /// The environment variable that holds its bearer token.
        bearer_from: Option<String>,
    },
}

/// What the tools whose names match `pattern` do.
#[derive(Debug, Clone)]
pub struct ToolRule {
    pub pattern: String,
    matcher: GlobMatcher,
    pub effects: Vec<Effect>,
    pub required_capabilities: Vec<String>,
    pub paths: Vec<PathArgument>,
    /// Arguments named like places that the entry says are not files,
    /// with why.
    pub not_paths: BTreeMap<String, String>,
    /// Arguments (dotted paths) recorded only as their SHA-256, and never
    /// shown to policies.
    pub redact: Vec<String>,
    /// The arguments policies may read (and the log holds in clear), when
    /// the entry says.
    pub visible: Option<Visible>,
}

impl ToolRule {
    pub fn matches(&self, tool: &str) -> bool {
        self.matcher.is_match(tool)
    }
}

impl ServerConfig {
    /// Whether the server is an agent the bridge speaks Codex's app-server
    /// protocol to: it has no MCP tools, and the fleet does not start it.
    pub fn speaks_app_server(&self) -> bool {
        self.agent
            .as_ref()
            .is_some_and(|agent| agent.protocol == AgentProtocol::CodexAppServer)
    }

    /// The folder the server's path arguments are judged against: its own
    /// root, which must resolve (symlinks followed) inside the served root,
    /// since its tools' writes are judged against it; or, without one, the
    /// served root itself.
    pub fn judged_root(&self, workspace: &std::path::Path) -> Result<PathBuf, String> {
        let Some(root) = &self.root else {
            return Ok(workspace.to_owned());
        };
        let resolve = |path: &std::path::Path| {
            path.canonicalize()
                .map_err(|err| format!("root `{}`: {err}", root.display()))
        };
        let own = resolve(&workspace.join(root))?;
        if own.starts_with(resolve(workspace)?) {
            Ok(own)
        } else {
            Err(format!(
                "root `{}` resolves outside the served root",
                root.display()
            ))
        }
    }

    /// The entry that declares `tool`: the first that matches.
    pub fn rule_for(&self, tool: &str) -> Option<&ToolRule> {
        self.rules.iter().find(|rule| rule.matches(tool))
    }
}

impl ServersConfig {
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|server| server.name == name)
    }

    /// The agent the bridge talks to, when the set declares one.
    pub fn agent(&self) -> Option<(&ServerConfig, &AgentMapping)> {
        self.servers
            .iter()
            .find_map(|server| server.agent.as_ref().map(|agent| (server, agent)))
    }

    /// The servers of a set: none when it has no `servers.toml`.
    pub fn of(file: Option<&SourceFile>) -> Result<Self, Vec<Problem>> {
        file.map_or_else(|| Ok(Self::default()), Self::parse)
    }

    /// Parses and checks the file; every problem is reported with its line.
    pub fn parse(file: &SourceFile) -> Result<Self, Vec<Problem>> {
        let raw: RawFile = toml::from_str(&file.text).map_err(|err| {
            let problem = Problem::new(ProblemKind::Servers, &file.display, err.message());
            vec![match err.span() {
                Some(span) => problem.at_offset(&file.text, span.start),
                None => problem,
            }]
        })?;
        let mut problems = Vec::new();
        let surface = raw.surface.and_then(|surface| {
            let named = Surface::named(surface.get_ref());
            if named.is_none() {
                problems.push(
                    Problem::new(
                        ProblemKind::Servers,
                        &file.display,
                        format!(
                            "surface = \"{}\": expected \"direct\" or \"wrappers\"",
                            surface.get_ref()
                        ),
                    )
                    .at_offset(&file.text, surface.span().start),
                );
            }
            named
        });
        let mut servers = Vec::new();
        for (name, server) in raw.servers {
            let at = |offset: usize, message: String| {
                Problem::new(ProblemKind::Servers, &file.display, message)
                    .at_offset(&file.text, offset)
            };
            match check_server(name.get_ref(), server.into_inner()) {
                Ok(server) => servers.push(server),
                Err(errors) => problems.extend(
                    errors
                        .into_iter()
                        .map(|(offset, message)| at(offset.unwrap_or(name.span().start), message)),
                ),
            }
        }
        let agents: Vec<&ServerConfig> = servers.iter().filter(|s| s.agent.is_some()).collect();
        if let [_, second, ..] = agents[..] {
            problems.push(Problem::new(
                ProblemKind::Servers,
                &file.display,
                format!(
                    "server `{}`: only one server may be `kind = \"agent\"` (the bridge talks to one agent)",
                    second.name
                ),
            ));
        }
        if problems.is_empty() {
            Ok(Self { servers, surface })
        } else {
            Err(problems)
        }
    }
}

/// The servers of `text`, which must parse: for tests.
#[cfg(test)]
pub(super) fn parsed(text: &str) -> ServersConfig {
    ServersConfig::parse(&SourceFile {
        logical: "policies/servers.toml".into(),
        display: "servers.toml".into(),
        text: text.into(),
    })
    .expect("a test's servers.toml parses")
}

/// What the file says, before it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    servers: BTreeMap<Spanned<String>, Spanned<RawServer>>,
    surface: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    env_from: Option<BTreeMap<String, String>>,
    url: Option<Spanned<String>>,
    bearer_from: Option<String>,
    timeout: Option<Spanned<String>>,
    start_timeout: Option<Spanned<String>>,
    max_duration: Option<Spanned<String>>,
    #[serde(default)]
    pass_errors: bool,
    root: Option<String>,
    #[serde(default)]
    tools: OrderedRules,
    kind: Option<Spanned<String>>,
    preset: Option<String>,
    start_tool: Option<String>,
    reply_tool: Option<String>,
    prompt_argument: Option<String>,
    session_argument: Option<String>,
    session_from: Option<String>,
    reply_from: Option<String>,
    start_arguments: Option<toml::Table>,
    /// Folders a stdio server may write outside its root.
    #[serde(default)]
    writable: Vec<String>,
    /// Whether a stdio server may reach the network.
    network: Option<bool>,
    /// The arguments its tools show policies, where their entry does not
    /// say.
    visible: Option<RawVisible>,
    /// The protocol era to speak to it.
    protocol: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    /// Effect names, or `["none"]` for a tool that touches nothing.
    effects: Spanned<Vec<String>>,
    required_capabilities: Option<Vec<String>>,
    #[serde(default)]
    paths: BTreeMap<String, PathRole>,
    /// Arguments that look like places but are not files, each with a
    /// word of why (`url = "fetched, never a local file"`).
    #[serde(default)]
    not_paths: BTreeMap<String, String>,
    #[serde(default)]
    redact: Vec<String>,
    visible: Option<RawVisible>,
}

/// The `tools` table in file order: the first matching entry wins, so the
/// order is meaning.
#[derive(Default)]
struct OrderedRules(Vec<(Spanned<String>, RawRule)>);

impl<'de> Deserialize<'de> for OrderedRules {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = OrderedRules;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of tool-name globs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut rules = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    rules.push(entry);
                }
                Ok(OrderedRules(rules))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

type Errors = Vec<(Option<usize>, String)>;

/// Why `name` cannot name a server.
pub fn server_name_problem(name: &str) -> Option<String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !valid {
        return Some(format!(
            "server name `{name}`: use 1 to 64 of a-z, 0-9, `_` and `-`"
        ));
    }
    if name.contains("__") {
        return Some(format!(
            "server name `{name}`: `__` separates the server from the tool in the names clients see"
        ));
    }
    RESERVED_SERVERS
        .contains(&name)
        .then(|| format!("server name `{name}` is portcullis's own; pick another"))
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn duration(value: Option<Spanned<String>>, default: Duration, errors: &mut Errors) -> Duration {
    let Some(value) = value else { return default };
    match humantime::parse_duration(value.get_ref()) {
        Ok(parsed) if !parsed.is_zero() => parsed,
        _ => {
            errors.push((
                Some(value.span().start),
                format!(
                    "`{}` is not a duration such as \"30s\" or \"2m\"",
                    value.get_ref()
                ),
            ));
            default
        }
    }
}

fn check_server(name: &str, raw: RawServer) -> Result<ServerConfig, Errors> {
    let mut errors: Errors = Vec::new();
    if let Some(problem) = server_name_problem(name) {
        errors.push((None, problem));
    }
    if let Some(problem) = raw
        .root
        .as_deref()
        .and_then(|root| root_problem(name, root))
    {
        errors.push((None, problem));
    }
    let endpoint = endpoint(name, &raw, &mut errors);
    let agent = agent(name, &raw, &mut errors);
    if let (Some(mapping), Some(Endpoint::Http { .. })) = (&agent, &endpoint)
        && mapping.protocol == AgentProtocol::CodexAppServer
    {
        errors.push((
            None,
            format!(
                "server `{name}`: an app-server agent speaks over its stdio: give `command`, not `url`"
            ),
        ));
    }
    let timeout = duration(raw.timeout, DEFAULT_TIMEOUT, &mut errors);
    let start_timeout = duration(raw.start_timeout, DEFAULT_START_TIMEOUT, &mut errors);
    let max_duration = duration(raw.max_duration.clone(), DEFAULT_MAX_DURATION, &mut errors);
    if max_duration < timeout {
        errors.push((
            raw.max_duration.as_ref().map(|d| d.span().start),
            format!(
                "server `{name}`: max_duration ({}) is shorter than its timeout ({})",
                humantime::format_duration(max_duration),
                humantime::format_duration(timeout)
            ),
        ));
    }
    let mut rules = Vec::new();
    for (pattern, rule) in raw.tools.0 {
        let effects = match effects_of(pattern.get_ref(), rule.effects.get_ref()) {
            Ok(effects) => effects,
            Err(message) => {
                errors.push((Some(rule.effects.span().start), message));
                continue;
            }
        };
        match check_rule(pattern.get_ref(), rule, effects) {
            Ok(rule) => rules.push(rule),
            Err(message) => errors.push((Some(pattern.span().start), message)),
        }
    }
    for folder in &raw.writable {
        let absolute = folder.starts_with('/') || folder.starts_with("~/");
        let climbs = std::path::Path::new(folder)
            .components()
            .any(|c| c == std::path::Component::ParentDir);
        if !absolute || climbs || folder == "/" || folder == "~/" {
            errors.push((
                None,
                format!(
                    "server `{name}`: writable `{folder}` must be a folder given as an absolute path or `~/...`, without `..`, and not `/` or the home folder itself"
                ),
            ));
        }
    }
    let network = raw.network.unwrap_or_else(|| {
        rules
            .iter()
            .any(|rule: &ToolRule| rule.effects.contains(&Effect::Network))
    });
    let confinement = ServerConfinement {
        writable: raw.writable.clone(),
        network,
    };
    let visible = match raw.visible {
        Some(visible) => visible
            .check(&format!("server `{name}`"))
            .map_err(|problem| errors.push((None, problem)))
            .ok(),
        None => None,
    };
    let protocol = match raw.protocol {
        Some(named) => Protocol::named(named.get_ref()).unwrap_or_else(|| {
            errors.push((
                Some(named.span().start),
                format!(
                    "server `{name}`: protocol = \"{}\": expected {}",
                    named.get_ref(),
                    Protocol::NAMES
                ),
            ));
            Protocol::default()
        }),
        None => Protocol::default(),
    };
    match endpoint {
        Some(endpoint) if errors.is_empty() => Ok(ServerConfig {
            name: name.to_owned(),
            endpoint,
            timeout,
            start_timeout,
            max_duration,
            pass_errors: raw.pass_errors,
            root: raw.root.map(PathBuf::from),
            rules,
            agent,
            confinement,
            visible,
            protocol,
        }),
        _ => Err(errors),
    }
}

/// The agent mapping of a `kind = "agent"` server; the mapping keys on
/// any other server are a mistake.
fn agent(name: &str, raw: &RawServer, errors: &mut Errors) -> Option<AgentMapping> {
    let fields = MappingFields {
        preset: raw.preset.clone(),
        start_tool: raw.start_tool.clone(),
        reply_tool: raw.reply_tool.clone(),
        prompt_argument: raw.prompt_argument.clone(),
        session_argument: raw.session_argument.clone(),
        session_from: raw.session_from.clone(),
        reply_from: raw.reply_from.clone(),
        start_arguments: raw
            .start_arguments
            .clone()
            .and_then(|table| serde_json::to_value(table).ok())
            .and_then(|value| match value {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            })
            .unwrap_or_default(),
    };
    match raw.kind.as_ref() {
        Some(kind) if kind.get_ref() == "agent" => match AgentMapping::from_fields(name, fields) {
            Ok(mapping) => Some(mapping),
            Err(found) => {
                errors.extend(found.into_iter().map(|e| (Some(kind.span().start), e)));
                None
            }
        },
        Some(kind) if kind.get_ref() == "tools" => {
            agent_keys_misplaced(name, &fields, errors);
            None
        }
        Some(kind) => {
            errors.push((
                Some(kind.span().start),
                format!(
                    "server `{name}`: kind `{}` is not known: `tools` (the default) or `agent`",
                    kind.get_ref()
                ),
            ));
            None
        }
        None => {
            agent_keys_misplaced(name, &fields, errors);
            None
        }
    }
}

fn agent_keys_misplaced(name: &str, fields: &MappingFields, errors: &mut Errors) {
    let given = fields.preset.is_some()
        || fields.start_tool.is_some()
        || fields.reply_tool.is_some()
        || fields.prompt_argument.is_some()
        || fields.session_argument.is_some()
        || fields.session_from.is_some()
        || fields.reply_from.is_some()
        || !fields.start_arguments.is_empty();
    if given {
        errors.push((
            None,
            format!(
                "server `{name}`: preset and the agent mapping keys are for a `kind = \"agent\"` server"
            ),
        ));
    }
}

fn endpoint(name: &str, raw: &RawServer, errors: &mut Errors) -> Option<Endpoint> {
    let env_names = raw
        .env
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .chain(raw.env_from.iter().flatten().flat_map(|(k, v)| [k, v]))
        .chain(raw.bearer_from.iter());
    for bad in env_names.filter(|n| !is_env_name(n)) {
        errors.push((
            None,
            format!("server `{name}`: `{bad}` is not an environment variable name"),
        ));
    }
    match (&raw.command, &raw.url) {
        (Some(command), None) => {
            if raw.bearer_from.is_some() {
                errors.push((
                    None,
                    format!("server `{name}`: bearer_from is for a `url` server"),
                ));
            }
            if command.trim().is_empty() {
                errors.push((None, format!("server `{name}`: the command is empty")));
            }
            Some(Endpoint::Stdio {
                command: command.clone(),
                args: raw.args.clone().unwrap_or_default(),
                env: raw.env.clone().unwrap_or_default(),
                env_from: raw.env_from.clone().unwrap_or_default(),
            })
        }
        (None, Some(url)) => {
            if raw.args.is_some() || raw.env.is_some() || raw.env_from.is_some() {
                errors.push((
                    Some(url.span().start),
                    format!("server `{name}`: args, env and env_from are for a `command` server"),
                ));
            }
            let text = url.get_ref();
            let scheme_ok = text.starts_with("http://") || text.starts_with("https://");
            if !scheme_ok || text.chars().any(char::is_whitespace) {
                errors.push((
                    Some(url.span().start),
                    format!("server `{name}`: `{text}` is not an http:// or https:// URL"),
                ));
            }
            Some(Endpoint::Http {
                url: text.clone(),
                bearer_from: raw.bearer_from.clone(),
            })
        }
        (Some(_), Some(_)) => {
            errors.push((
                None,
                format!("server `{name}`: give `command` or `url`, not both"),
            ));
            None
        }
        (None, None) => {
            errors.push((
                None,
                format!(
                    "server `{name}`: give `command` (a stdio server) or `url` (Streamable HTTP)"
                ),
            ));
            None
        }
    }
}

/// The capabilities a tool requires by default: the ones named like its
/// effects (`process` and `worktree` need none: the hard constraints
/// forbid them outright).
fn capabilities_of(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter(|e| !matches!(e, Effect::Process | Effect::Worktree))
        .map(|e| e.as_str().to_owned())
        .collect()
}

/// The effects an entry declares. An empty list is refused: it reads
/// like "nothing to fear" and was taken for a tool that writes nowhere; a
/// tool that touches nothing says so with `["none"]`.
fn effects_of(pattern: &str, names: &[String]) -> Result<Vec<Effect>, String> {
    if names.is_empty() {
        return Err(format!(
            "tools.\"{pattern}\": `effects = []` is refused: list what the tool does, or \
             `effects = [\"none\"]` for a tool that touches nothing"
        ));
    }
    if names.iter().any(|name| name == "none") {
        return if names.iter().all(|name| name == "none") {
            Ok(Vec::new())
        } else {
            Err(format!(
                "tools.\"{pattern}\": `none` cannot stand beside other effects"
            ))
        };
    }
    names
        .iter()
        .map(|name| {
            Effect::ALL
                .into_iter()
                .find(|effect| effect.as_str() == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = Effect::ALL.iter().map(|e| e.as_str()).collect();
                    format!(
                        "tools.\"{pattern}\": unknown effect `{name}`, expected one of {}, or none",
                        known.join(", ")
                    )
                })
        })
        .collect()
}

/// Why a server's `root` cannot be where its paths are judged: it must be
/// a folder inside the served root, so it is relative and never climbs.
fn root_problem(name: &str, root: &str) -> Option<String> {
    let path = std::path::Path::new(root);
    let climbs = path.components().any(|c| {
        !matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    (root.trim().is_empty() || climbs).then(|| {
        format!(
            "server `{name}`: root `{root}` must be a folder inside the served root (relative, \
             without `..`): its tools' paths are judged against it"
        )
    })
}

fn check_rule(pattern: &str, raw: RawRule, effects: Vec<Effect>) -> Result<ToolRule, String> {
    let matcher = Glob::new(pattern)
        .map_err(|err| format!("tools.\"{pattern}\": not a glob: {err}"))?
        .compile_matcher();
    let mut effects = effects;
    effects.sort();
    effects.dedup();
    if let Some((name, _)) = raw.not_paths.iter().find(|(_, why)| why.trim().is_empty()) {
        return Err(format!(
            "tools.\"{pattern}\": not_paths.{name} needs a word of why it names no file"
        ));
    }
    if let Some(name) = raw
        .not_paths
        .keys()
        .find(|name| raw.paths.contains_key(*name))
    {
        return Err(format!(
            "tools.\"{pattern}\": `{name}` is under both paths and not_paths"
        ));
    }
    let required_capabilities = raw
        .required_capabilities
        .unwrap_or_else(|| capabilities_of(&effects));
    if let Some(empty) = required_capabilities.iter().find(|c| c.is_empty()) {
        return Err(format!(
            "tools.\"{pattern}\": capability `{empty}` is empty"
        ));
    }
    if let Some(bad) = raw
        .redact
        .iter()
        .find(|path| path.split('.').any(str::is_empty))
    {
        return Err(format!(
            "tools.\"{pattern}\": `{bad}` in `redact` is not an argument name (dotted for a nested one)"
        ));
    }
    let visible = match raw.visible {
        Some(visible) => Some(visible.check(&format!("tools.\"{pattern}\""))?),
        None => None,
    };
    if let Some(Visible::Listed(names)) = &visible
        && let Some(both) = names.iter().find(|name| raw.redact.contains(name))
    {
        return Err(format!(
            "tools.\"{pattern}\": `{both}` is in both visible and redact"
        ));
    }
    Ok(ToolRule {
        pattern: pattern.to_owned(),
        matcher,
        effects,
        required_capabilities,
        redact: raw.redact,
        visible,
        not_paths: raw.not_paths,
        paths: raw
            .paths
            .into_iter()
            .map(|(name, role)| PathArgument {
                name,
                role,
                default: None,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> SourceFile {
        SourceFile {
            logical: "policies/servers.toml".into(),
            display: "policies/servers.toml".into(),
            text: text.into(),
        }
    }

    fn problems(text: &str) -> String {
        ServersConfig::parse(&file(text))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    const FILES: &str = r#"
[servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
env = { LOG_LEVEL = "info" }
env_from = { API_KEY = "FILES_API_KEY" }
timeout = "30s"
pass_errors = false

[servers.files.tools."read_*"]
effects = ["read"]
required_capabilities = ["read"]

[servers.files.tools."write_file"]
effects = ["write"]
paths = { path = "write" }

[servers.files.tools."*"]
effects = ["read"]
"#;

    #[test]
    fn the_issue_example_parses_with_rules_in_file_order() {
        let config = ServersConfig::parse(&file(FILES)).unwrap();
        let files = config.server("files").unwrap();
        assert!(
            matches!(&files.endpoint, Endpoint::Stdio { command, env_from, .. }
            if command == "npx" && env_from["API_KEY"] == "FILES_API_KEY")
        );
        assert_eq!(files.timeout, Duration::from_secs(30));
        assert_eq!(files.rule_for("read_text_file").unwrap().pattern, "read_*");
        let write = files.rule_for("write_file").unwrap();
        assert_eq!(write.effects, [Effect::Write]);
        assert_eq!(write.required_capabilities, ["write"]);
        assert_eq!(write.paths[0].role, PathRole::Write);
        assert_eq!(files.rule_for("anything").unwrap().pattern, "*");
    }

    #[test]
    fn a_call_is_bounded_by_max_duration_which_is_no_shorter_than_the_timeout() {
        let config = ServersConfig::parse(&file(
            "[servers.a]\ncommand = \"a\"\n[servers.b]\ncommand = \"b\"\ntimeout = \"10s\"\nmax_duration = \"5m\"\n",
        ))
        .unwrap();
        assert_eq!(
            config.server("a").unwrap().max_duration,
            DEFAULT_MAX_DURATION
        );
        assert_eq!(
            config.server("b").unwrap().max_duration,
            Duration::from_secs(300)
        );
        let found =
            problems("[servers.a]\ncommand = \"a\"\ntimeout = \"2m\"\nmax_duration = \"1m\"\n");
        assert!(
            found.contains("servers.toml:4")
                && found.contains("max_duration (1m) is shorter than its timeout (2m)"),
            "{found}"
        );
    }

    #[test]
    fn a_server_speaks_the_2025_era_unless_its_entry_names_another() {
        let config = ServersConfig::parse(&file(
            "[servers.a]\ncommand = \"a\"\n[servers.b]\ncommand = \"b\"\nprotocol = \"2026-07-28\"\n[servers.c]\nurl = \"http://127.0.0.1:1/mcp\"\nprotocol = \"auto\"\n",
        ))
        .unwrap();
        assert_eq!(config.server("a").unwrap().protocol, Protocol::Initialize);
        assert_eq!(config.server("b").unwrap().protocol, Protocol::Discover);
        assert_eq!(config.server("c").unwrap().protocol, Protocol::Auto);
        let found = problems("[servers.a]\ncommand = \"a\"\nprotocol = \"2026\"\n");
        assert!(
            found.contains("servers.toml:3")
                && found.contains(
                    "protocol = \"2026\": expected \"2025-11-25\", \"2026-07-28\" or \"auto\""
                ),
            "{found}"
        );
    }

    #[test]
    fn an_agent_can_have_fixed_start_arguments_but_not_the_prompt() {
        let config = ServersConfig::parse(&file(
            "[servers.codex]\ncommand = \"codex\"\nkind = \"agent\"\npreset = \"codex\"\nstart_arguments = { sandbox = \"read-only\", config = { x = 1 } }\n",
        ))
        .unwrap();
        let (_, mapping) = config.agent().unwrap();
        assert_eq!(
            serde_json::Value::Object(mapping.start_arguments.clone()),
            serde_json::json!({"sandbox": "read-only", "config": {"x": 1}})
        );
        let found = problems(
            "[servers.codex]\ncommand = \"codex\"\nkind = \"agent\"\npreset = \"codex\"\nstart_arguments = { prompt = \"x\" }\n",
        );
        assert!(found.contains("may not set `prompt`"), "{found}");
    }

    #[test]
    fn an_agent_server_with_the_codex_preset_needs_five_lines() {
        let config = ServersConfig::parse(&file(
            "[servers.codex]\ncommand = \"npx\"\nargs = [\"-y\", \"@openai/codex@0.153.4\", \"mcp-server\"]\nkind = \"agent\"\npreset = \"codex\"\n",
        ))
        .unwrap();
        let (server, mapping) = config.agent().unwrap();
        assert_eq!(server.name, "codex");
        assert_eq!(*mapping, AgentMapping::codex());
        assert!(
            ServersConfig::parse(&file(FILES))
                .unwrap()
                .agent()
                .is_none()
        );
    }

    #[test]
    fn a_tool_that_touches_nothing_says_none_and_a_root_inside_is_taken() {
        let config = ServersConfig::parse(&file(
            "[servers.a]\ncommand = \"x\"\nroot = \"./data/sub\"\n[servers.a.tools.t]\neffects = [\"none\"]\nnot_paths = { url = \"fetched, never a local file\" }\n",
        ))
        .unwrap();
        let rule = config.servers[0].rule_for("t").unwrap();
        assert!(rule.effects.is_empty());
        assert!(rule.required_capabilities.is_empty());
        assert_eq!(rule.not_paths["url"], "fetched, never a local file");
    }

    #[test]
    fn a_server_may_reach_the_network_as_its_entry_or_its_tools_say() {
        let config = ServersConfig::parse(&file(
            "[servers.a]\ncommand = \"x\"\nwritable = [\"~/.npm\", \"/var/cache/a\"]\n\
             [servers.b]\ncommand = \"x\"\n[servers.b.tools.fetch]\neffects = [\"network\"]\n\
             [servers.c]\ncommand = \"x\"\nnetwork = true\n",
        ))
        .unwrap();
        let a = &config.server("a").unwrap().confinement;
        assert_eq!(
            (a.writable.as_slice(), a.network),
            (
                ["~/.npm".to_owned(), "/var/cache/a".to_owned()].as_slice(),
                false
            )
        );
        assert!(config.server("b").unwrap().confinement.network);
        assert!(config.server("c").unwrap().confinement.network);
    }

    #[test]
    fn an_http_server_and_an_empty_file() {
        let config = ServersConfig::parse(&file(
            "[servers.gh]\nurl = \"https://example.com/mcp\"\nbearer_from = \"GH_TOKEN\"\n",
        ))
        .unwrap();
        assert!(
            matches!(&config.servers[0].endpoint, Endpoint::Http { bearer_from: Some(b), .. } if b == "GH_TOKEN")
        );
        assert!(config.servers[0].rule_for("x").is_none());
        assert!(ServersConfig::parse(&file("")).unwrap().servers.is_empty());
    }

    #[test]
    fn every_mistake_is_named_with_its_line() {
        let cases = [
            (
                "[servers.Files]\ncommand = \"x\"\n",
                "1:10",
                "server name `Files`",
            ),
            (
                "[servers.builtin]\ncommand = \"x\"\n",
                "1:10",
                "portcullis's own",
            ),
            (
                "[servers.a__b]\ncommand = \"x\"\n",
                "1:10",
                "`__` separates",
            ),
            ("[servers.a]\n", "1:10", "give `command`"),
            (
                "[servers.a]\ncommand = \"x\"\nwritable = [\"cache\"]\n",
                "1:10",
                "writable `cache` must be a folder given as an absolute path",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nwritable = [\"~/../etc\"]\n",
                "1:10",
                "without `..`",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nwritable = [\"/\"]\n",
                "1:10",
                "not `/` or the home folder",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n",
                "1:10",
                "not both",
            ),
            ("[servers.a]\nurl = \"ftp://h\"\n", "2:7", "not an http"),
            (
                "[servers.a]\nurl = \"http://h\"\nargs = []\n",
                "2:7",
                "args, env and env_from",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nbearer_from = \"T\"\n",
                "1:10",
                "bearer_from is for",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nenv_from = { K = \"not-a-name\" }\n",
                "1:10",
                "`not-a-name` is not an environment",
            ),
            (
                "[servers.a]\ncommand = \"x\"\ntimeout = \"soon\"\n",
                "3:11",
                "not a duration",
            ),
            (
                "[servers.a]\ncommand = \"x\"\ntimeout = \"0s\"\n",
                "3:11",
                "not a duration",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.\"[\"]\neffects = [\"none\"]\n",
                "3:18",
                "not a glob",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"teleport\"]\n",
                "4:",
                "teleport",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\npaths = { p = \"delete\" }\n",
                "5:",
                "delete",
            ),
            (
                "[servers.a]\ncommand = \"x\"\ncolour = \"red\"\n",
                "3:1",
                "colour",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\n",
                "3:",
                "effects",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\nrequired_capabilities = [\"\"]\n",
                "3:18",
                "is empty",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\nredact = [\"auth..token\"]\n",
                "3:18",
                "not an argument name",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = []\n",
                "4:11",
                "`effects = []` is refused",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\", \"write\"]\n",
                "4:11",
                "`none` cannot stand beside",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"read\"]\nnot_paths = { url = \" \" }\n",
                "3:18",
                "needs a word of why",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"read\"]\npaths = { url = \"read\" }\nnot_paths = { url = \"fetched\" }\n",
                "3:18",
                "under both paths and not_paths",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nroot = \"/\"\n",
                "1:10",
                "root `/` must be a folder inside the served root",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nroot = \"data/../..\"\n",
                "1:10",
                "must be a folder inside",
            ),
            ("[[servers]]\n", "1:", "servers"),
            (
                "[servers.a]\ncommand = \"x\"\nkind = \"robot\"\n",
                "3:8",
                "kind `robot` is not known",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nkind = \"agent\"\n",
                "3:8",
                "an agent needs `start_tool`",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nkind = \"agent\"\npreset = \"gpt\"\n",
                "3:8",
                "preset `gpt` is not known",
            ),
            (
                "[servers.a]\ncommand = \"x\"\npreset = \"codex\"\n",
                "1:10",
                "are for a `kind = \"agent\"` server",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nkind = \"agent\"\npreset = \"codex\"\n[servers.b]\ncommand = \"x\"\nkind = \"agent\"\npreset = \"codex\"\n",
                "",
                "only one server may be `kind = \"agent\"`",
            ),
        ];
        for (text, place, message) in cases {
            let found = problems(text);
            assert!(
                found.contains(&format!("policies/servers.toml:{place}"))
                    && found.contains(message),
                "{text:?}: {found}"
            );
        }
    }
}
