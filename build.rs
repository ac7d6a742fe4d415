//! Links the executables with packed relative relocations (`DT_RELR`,
//! glibc 2.36 and later). A position-independent executable keeps its
//! address randomisation, but its relative relocations, one 24-byte entry
//! per pointer in its read-only data, are read whole by the loader at
//! every start and stay resident in an idle `serve` (about 0.7 MiB for this
//! binary). Packed, they take a few kilobytes. A linker that does not know
//! the option warns and links as before.

fn main() {
    println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}
