//! Kernel confinement for what portcullis lets others run: the hard
//! constraints hold even where a judgement of a command is wrong.
//!
//! A [`Plan`] is drawn from the decision (the root, the VCS metadata in it,
//! the secrets outside it, whether the network is allowed). `portcullis
//! exec` hands it to a fresh `portcullis confined` process, which applies it
//! to itself (namespaces, read-only mounts, Landlock, no new privileges, no
//! capabilities) and then becomes the command, so the command and every
//! process it starts inherit it. The kernel, not the gate's reading,
//! decides what the command can change.

mod kernel;
mod landlock_abi;
mod launch;
mod mountinfo;
mod plan;
mod secrets;
mod vcs;

pub use kernel::{ConfineError, apply};
pub use landlock_abi::{LANDLOCK_ABI_ENV, landlock_abi};
pub use launch::{Launch, LaunchError, Launched, launch};
pub use plan::Plan;
