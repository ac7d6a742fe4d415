//! The SMT solver behind every proof about a policy set (`proof.rs`,
//! `diff/`): cvc5, driven by SymCC through tokio.

use cedar_policy_symcc::CedarSymCompiler;
use cedar_policy_symcc::solver::LocalSolver;

/// A compiler talking to a fresh cvc5, or why there is none (`CVC5` names
/// the binary, else `cvc5` on `PATH`).
pub(super) fn cvc5() -> Result<CedarSymCompiler<LocalSolver>, String> {
    let solver = LocalSolver::cvc5().map_err(|err| {
        format!("cvc5 could not be started ({err}); set CVC5 or put cvc5 on PATH")
    })?;
    CedarSymCompiler::new(solver).map_err(|err| err.to_string())
}

/// Runs `work` to completion on a thread and runtime of its own, so that a
/// proof can be asked for from inside or outside a runtime.
pub(super) fn on_own_thread<T, F>(work: impl FnOnce() -> F + Send) -> Result<T, String>
where
    T: Send,
    F: Future<Output = T>,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| err.to_string())?;
                Ok(runtime.block_on(work()))
            })
            .join()
            .unwrap_or_else(|_| Err("the prover panicked".to_owned()))
    })
}
