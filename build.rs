//! How the executables are linked, for the memory an idle `serve` keeps.
//!
//! Packed relative relocations (`DT_RELR`, glibc 2.36 and later): a
//! position-independent executable keeps its address randomisation, but its
//! relative relocations, one 24-byte entry per pointer in its read-only
//! data, are read whole by the loader at every start and stay resident
//! (about 0.7 MiB for this binary). Packed, they take a few kilobytes. A
//! linker that does not know the option warns and links as before.
//!
//! The hot code first, in a release build: the kernel maps code 64 KiB
//! around each page a process touches, so the functions `serve` runs,
//! scattered over 25 MiB of text, kept 19 MiB of it resident.
//! `link/hot-symbols.txt` (written by `.ci/hot-code` from callgrind runs
//! of the usual work) names them, and the linker lays them out side by side
//! ahead of the rest. A name the list has and the build has not (a function
//! renamed since) is skipped quietly: a stale list costs memory, never
//! correctness. Only where the linker is known to be LLD, which reads the
//! list: Rust's default for x86-64 Linux since 1.90.

use std::path::Path;

fn main() {
    println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    let hot = Path::new(env!("CARGO_MANIFEST_DIR")).join("link/hot-symbols.txt");
    println!("cargo::rerun-if-changed={}", hot.display());
    println!("cargo::rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let lld = std::env::var("TARGET").is_ok_and(|target| target == "x86_64-unknown-linux-gnu");
    if release && lld && hot.exists() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            hot.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
