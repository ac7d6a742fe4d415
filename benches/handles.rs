//! `read_file` and `write_file`'s filesystem work through handles (the
//! `confined` module the tools use) against the same work through paths
//! (`std::fs` on the canonical path, as the tools did before), on the same
//! files in one run. Target: handles within 1.2x of paths.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::facts::{Root, resolve};
use portcullis::tools::confined;

const CAP: u64 = 8 * 1024 * 1024;

fn read_by_path(path: &Path) -> String {
    let meta = fs::metadata(path).unwrap();
    assert!(meta.is_file() && meta.len() <= CAP);
    String::from_utf8(fs::read(path).unwrap()).unwrap()
}

fn write_by_path(path: &Path, text: &str) {
    let dir = path.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    let mut temp = tempfile::Builder::new()
        .prefix(".portcullis-")
        .tempfile_in(dir)
        .unwrap();
    temp.write_all(text.as_bytes()).unwrap();
    temp.as_file().sync_all().unwrap();
    let permissions = fs::metadata(path).unwrap().permissions();
    fs::set_permissions(temp.path(), permissions).unwrap();
    temp.persist(path).unwrap();
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("src/module/inner")).unwrap();
    let text = "fn main() { println!(\"a line of a source file\"); }\n".repeat(80);
    let file = ws.join("src/module/inner/file.rs");
    fs::write(&file, &text).unwrap();
    let root = Root::new(&ws).unwrap();
    let decided = resolve(&root, "src/module/inner/file.rs").unwrap();

    let mut read = c.benchmark_group("read_file");
    read.bench_function("handles", |b| {
        b.iter(|| {
            let (mut opened, stat) = confined::open_file(&root, black_box(&decided)).unwrap();
            confined::read_text(&mut opened, &stat, CAP).unwrap()
        });
    });
    read.bench_function("paths", |b| {
        b.iter(|| read_by_path(black_box(&decided.canonical)))
    });
    read.finish();

    let mut write = c.benchmark_group("write_file");
    write.bench_function("handles", |b| {
        b.iter(|| {
            // Each replacement makes a new inode: decide on the current one.
            let decided = resolve(&root, "src/module/inner/file.rs").unwrap();
            confined::replace_file(&root, black_box(&decided), &text).unwrap();
        });
    });
    write.bench_function("paths", |b| {
        b.iter(|| {
            let decided = resolve(&root, "src/module/inner/file.rs").unwrap();
            write_by_path(black_box(&decided.canonical), &text);
        });
    });
    write.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
