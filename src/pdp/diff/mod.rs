//! `policy diff`: whether a new policy set permits anything the old one
//! does not, proved by the solver for every action of the new schema and
//! for both ways a call goes through: allowed outright (the first pass,
//! nobody has approved) and allowed once a human approves (the second
//! pass, what makes an ask). If neither pass of NEW permits a request that
//! the same pass of OLD refuses, no request is decided more openly by NEW
//! (deny < ask < allow): an allow under NEW is an allow under OLD, and an
//! ask under NEW is an ask or an allow under OLD.
//!
//! The data is pinned, not left to the solver (`pinned.rs`): NEW's tiers
//! with their capabilities, its tools with their declared effects, its
//! servers. The solver ranges over everything else the schema admits: any
//! client of one of the tiers, any of the tools, any context. SymCC
//! compares two sets within one world of data, so a change to the data
//! itself (a tier that gains a capability, a tool declared otherwise) is
//! searched apart (`data.rs`). Every counterexample is decided again on
//! both sides, each with its own data, the way the decision point decides
//! (`counterexample.rs`), before it is reported.

mod constraints;
mod counterexample;
mod data;
mod pinned;

use cedar_policy::{EntityUid, PolicySet, RequestEnv, Schema};
use cedar_policy_symcc::solver::LocalSolver;
use cedar_policy_symcc::{CedarSymCompiler, CompiledPolicySet, CompiledSchema, SymEnv};
use serde::Serialize;
use thiserror::Error;

pub use counterexample::Counterexample;

use super::solver;
use super::{Engine, Outcome};
use constraints::Constraints;

/// The pass of the decision point a proof is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// Nobody has approved: what NEW allows outright.
    Allow,
    /// A human has approved: what NEW lets through once asked.
    Ask,
}

impl Pass {
    pub fn as_str(self) -> &'static str {
        match self {
            Pass::Allow => "allow",
            Pass::Ask => "ask",
        }
    }
}

/// What the solver found for one action and pass.
#[derive(Debug, Serialize)]
pub struct Finding {
    pub action: String,
    pub outcome: Pass,
    /// NEW permits, in this pass, a request that OLD does not.
    pub wider: bool,
    /// Such a request, when `wider`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<Counterexample>,
    /// The change to the data (a tier, a tool) the request is about, when
    /// the data opened it rather than the policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_by: Option<String>,
    /// Whether the decision point, deciding the counterexample on both
    /// sides, finds NEW more open. A change to the data is searched from
    /// above (`data.rs`): what it finds may turn out decided alike.
    pub confirmed: bool,
}

#[derive(Debug, Serialize)]
pub struct Diff {
    pub findings: Vec<Finding>,
    /// What the proof ranges over and what it does not cover.
    pub bounds: Vec<String>,
    /// How many solver queries it took.
    pub queries: usize,
}

impl Diff {
    pub fn wider(&self) -> bool {
        self.findings.iter().any(|f| f.wider)
    }
}

#[derive(Debug, Error)]
pub enum DiffError {
    #[error("no solver: {0}")]
    SolverAbsent(String),
    #[error("the comparison could not be run: {0}")]
    Failed(String),
}

fn failed(context: impl std::fmt::Display) -> impl FnOnce(String) -> DiffError {
    move |err| DiffError::Failed(format!("{context}: {err}"))
}

/// Proves, action by action and pass by pass, whether `new` permits
/// anything `old` does not. Both sets are compiled against NEW's schema:
/// the comparison is about the requests NEW will see; OLD's policies must
/// type-check there (a schema change that breaks them is reported).
pub fn diff(old: &Engine, new: &Engine) -> Result<Diff, DiffError> {
    solver::on_own_thread(|| diff_async(old, new)).map_err(DiffError::Failed)?
}

async fn diff_async(old: &Engine, new: &Engine) -> Result<Diff, DiffError> {
    let mut compiler = solver::cvc5().map_err(DiffError::SolverAbsent)?;
    let schema = new.schema();
    let compiled_schema =
        CompiledSchema::new(schema).map_err(|err| DiffError::Failed(err.to_string()))?;
    let old_constraints = Constraints::of(old);
    let new_constraints = Constraints::of(new);
    let mut envs: Vec<RequestEnv> = schema.request_envs().collect();
    envs.sort_by_key(|env| env.action().to_string());
    let mut findings = Vec::new();
    let mut queries = 0;
    let openings = data::openings(old, new);
    for env in &envs {
        let base = compiled_schema
            .sym_env(env)
            .map_err(|err| DiffError::Failed(err.to_string()))?;
        let world = pinned::with_data_of(&mut compiler, schema, env, base, new).await?;
        queries += 1;
        for pass in [Pass::Allow, Pass::Ask] {
            let mut finding = Finding {
                action: action_name(env.action()),
                outcome: pass,
                wider: false,
                counterexample: None,
                opened_by: None,
                confirmed: false,
            };
            let about_tool = constraints::is_tool_request(env);
            let asks = std::iter::once(None).chain(
                openings
                    .iter()
                    .filter(|opening| !opening.tool || about_tool)
                    .filter(|opening| {
                        opening.read_by(old, env.action()) || opening.read_by(new, env.action())
                    })
                    .map(Some),
            );
            for opening in asks {
                let query = Query {
                    schema,
                    env,
                    pass,
                    world: &world,
                    old: (&old_constraints, old.policies()),
                    new: (&new_constraints, new.policies()),
                    opening,
                };
                queries += 1;
                let Some(found) = query.counterexample(&mut compiler, false).await? else {
                    continue;
                };
                // A request `check` can reproduce is worth one more query.
                let checkable = if constraints::is_tool_request(env) {
                    queries += 1;
                    query.counterexample(&mut compiler, true).await?
                } else {
                    None
                };
                let shown = Counterexample::confirm(&checkable.unwrap_or(found), pass, old, new)?;
                finding.wider = true;
                finding.confirmed = rank(shown.new) > rank(shown.old);
                finding.opened_by = opening.map(|o| o.what.clone());
                finding.counterexample = Some(shown);
                if finding.confirmed {
                    break;
                }
            }
            findings.push(finding);
        }
    }
    Ok(Diff {
        findings,
        bounds: bounds(old, new),
        queries,
    })
}

/// One question to the solver: a request of `env`, in `pass`, that NEW's
/// policies allow and OLD's do not. With an `opening`, only requests it is
/// about, all of which OLD is taken to refuse.
struct Query<'a> {
    schema: &'a Schema,
    env: &'a RequestEnv,
    pass: Pass,
    world: &'a SymEnv,
    old: (&'a Constraints, &'a PolicySet),
    new: (&'a Constraints, &'a PolicySet),
    opening: Option<&'a data::Opening>,
}

impl Query<'_> {
    async fn counterexample(
        &self,
        compiler: &mut CedarSymCompiler<LocalSolver>,
        checkable: bool,
    ) -> Result<Option<cedar_policy_symcc::Env>, DiffError> {
        let action = self.env.action().to_string();
        let compile = |(constraints, policies): (&Constraints, &PolicySet),
                       extra: Option<String>,
                       side: &str|
         -> Result<CompiledPolicySet, DiffError> {
            let set = constraints
                .restrict(policies, self.env, self.pass, checkable, extra)
                .map_err(failed(format!("{side}, {action}")))?;
            CompiledPolicySet::compile_with_custom_symenv(
                &set,
                self.env,
                self.schema,
                self.world.clone(),
            )
            .map_err(|err| {
                failed(format!("{side}'s policies under NEW's schema, {action}"))(err.to_string())
            })
        };
        let (old_extra, new_extra) = match self.opening {
            Some(opening) => (
                Some(format!("!({})", opening.condition)),
                Some(opening.condition.clone()),
            ),
            None => (None, None),
        };
        let old = compile(self.old, old_extra, "OLD")?;
        let new = compile(self.new, new_extra, "NEW")?;
        compiler
            .check_implies_with_counterexample_opt(&new, &old)
            .await
            .map_err(|err| DiffError::Failed(format!("{action}: {err}")))
    }
}

/// Deny < ask < allow.
fn rank(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Deny => 0,
        Outcome::Ask => 1,
        Outcome::Allow => 2,
    }
}

/// An action as policies name it (`Portcullis::Action::"call_tool"`).
fn action_name(action: &EntityUid) -> String {
    action.to_string()
}

fn bounds(old: &Engine, new: &Engine) -> Vec<String> {
    vec![
        "every action of NEW's schema, for every request its schema admits: any client, any context value of the declared types (strings of any length, 64-bit Longs, sets of any size)".to_owned(),
        format!(
            "the data is fixed: the policies are compared under NEW's tiers ({}) and NEW's tools and servers with their declared effects and capabilities; a tier or tool whose data changed from OLD's ({}) is searched apart, every request about it taken as refused by OLD, and each request found decided again on both sides",
            new.tiers().join(", "),
            old.tiers().join(", ")
        ),
        "a client belongs to one tier of its side; a tool or server a side does not know is one it refuses".to_owned(),
        "outside the proof: the facts themselves (which paths a call touches, which classes a command has) are taken as the schema allows them, not as portcullis would compute them from arguments".to_owned(),
        "a policy that errors makes portcullis deny; the proof follows Cedar, which skips it, so a change that only removes an erroring forbid may go unreported".to_owned(),
    ]
}
