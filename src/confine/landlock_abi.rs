//! Which Landlock ABI the kernel offers, so `exec` can refuse to run (or
//! say it runs unconfined) before it starts anything.

use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};

/// The highest Landlock ABI portcullis may use, below what the kernel
/// offers: `0` makes a kernel with Landlock look like one without, so the
/// refusal and `--unconfined-ok` can be tested. It can only take away.
pub const LANDLOCK_ABI_ENV: &str = "PORTCULLIS_LANDLOCK_ABI";

/// The newest ABI this build knows.
const NEWEST: i32 = 7;

/// The Landlock ABI the kernel offers (0: none), capped by
/// [`LANDLOCK_ABI_ENV`].
pub fn landlock_abi() -> i32 {
    let cap = std::env::var(LANDLOCK_ABI_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(NEWEST)
        .clamp(0, NEWEST);
    (1..=cap).rev().find(|&n| supported(n)).unwrap_or(0)
}

/// Whether a ruleset handling every file-system access of ABI `n` can be
/// made as a hard requirement.
fn supported(n: i32) -> bool {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::from(n)))
        .and_then(Ruleset::create)
        .is_ok()
}
