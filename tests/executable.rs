//! What the linker made of the executable: still position-independent (its
//! address is randomised at every start, as a program that reads hostile
//! input should be), with its relative relocations packed (`build.rs`), so
//! the loader does not read a table of them that stays resident in an idle
//! `serve`.

use std::process::Command;

#[test]
fn the_executable_is_position_independent_with_packed_relocations() {
    let binary = env!("CARGO_BIN_EXE_portcullis");
    let out = Command::new("readelf")
        .args(["--file-header", "--dynamic", binary])
        .output()
        .expect("readelf runs: binutils link the executable");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("DYN (Position-Independent Executable file)"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.contains("(FLAGS_1)") && line.contains("PIE")),
        "{text}"
    );
    assert!(text.contains("(RELR)"), "relocations not packed: {text}");
    let relocations: u64 = text
        .lines()
        .find(|line| line.contains("(RELASZ)"))
        .and_then(|line| line.split_whitespace().nth(2))
        .and_then(|size| size.parse().ok())
        .expect("a RELASZ entry");
    // Before packing, this binary's table was about 0.7 MB; what is left
    // are the relocations against symbols of the shared libraries.
    assert!(
        relocations < 64 * 1024,
        "{relocations} bytes of RELA: {text}"
    );
}
