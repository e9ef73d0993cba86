//! Replays every input kept under `fuzz/regressions/<target>/` (seed inputs cut from a real
//! store, and every crasher a fuzzing run found) through the fuzz targets' checks
//! (`tierkv::fuzzing`), so that `cargo test` catches a decoder that regresses. The fuzzing
//! itself needs cargo-fuzz and a nightly toolchain: see docs/reliability.md. CI runs a short,
//! blind version of it (`mutated_inputs_pass_every_target`): the kept inputs, mutated at
//! random with a fixed seed, through the same checks.
//!
//! `cargo test -p tierkv --test fuzz_regressions -- --ignored write_seeds` writes the seed
//! inputs again from a fresh store.

use std::path::{Path, PathBuf};

use tierkv::fuzzing::{self, TARGETS};
use tierkv::{Db, WriteBatch};
use tierkv_blockstore::format as block_format;
use tierkv_io::sim::SimFs;
use tierkv_io::Storage;
use tierkv_wal::format as wal_format;

fn regressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
}

#[test]
fn every_kept_input_passes_its_target() {
    let mut replayed = 0;
    for target in TARGETS {
        let dir = regressions().join(target);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("entry").path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{target} has no inputs to replay in {}", dir.display());
        for input in inputs {
            let data = std::fs::read(&input).expect("read");
            fuzzing::run(target, &data);
            replayed += 1;
        }
    }
    println!("replayed {replayed} inputs through {} targets", TARGETS.len());
}

/// How many mutants of the kept inputs each target gets in the short fuzz run: the slow
/// targets (a whole log opened, a whole store damaged and opened) get fewer.
/// `TIERKV_FUZZ_MUTANTS` scales them (a number of mutants for the fast targets).
fn mutants_for(target: &str) -> usize {
    let base: usize = std::env::var("TIERKV_FUZZ_MUTANTS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(3_000);
    match target {
        "log_segment" => (base / 30).max(1),
        "store_dir" => (base / 6).max(1),
        _ => base,
    }
}

/// One random edit of `data`, the kind libFuzzer makes: flip a bit, set a byte, cut the tail,
/// grow it with random bytes, copy a range over another, or splice in part of `other`.
fn mutate(rng: &mut fastrand::Rng, data: &mut Vec<u8>, other: &[u8]) {
    match rng.usize(0..6) {
        0 if !data.is_empty() => {
            let at = rng.usize(0..data.len());
            data[at] ^= 1 << rng.u8(0..8);
        }
        1 if !data.is_empty() => {
            let at = rng.usize(0..data.len());
            data[at] = [0, 0xff, 0x7f, 0x80, rng.u8(..)][rng.usize(0..5)];
        }
        2 if !data.is_empty() => data.truncate(rng.usize(0..data.len())),
        3 => data.extend((0..rng.usize(1..64)).map(|_| rng.u8(..))),
        4 if data.len() > 1 => {
            let len = rng.usize(1..=data.len() / 2);
            let from = rng.usize(0..=data.len() - len);
            let to = rng.usize(0..=data.len() - len);
            data.copy_within(from..from + len, to);
        }
        _ if !other.is_empty() => {
            let at = rng.usize(0..=data.len());
            let from = rng.usize(0..other.len());
            let len = rng.usize(1..=(other.len() - from).min(256));
            data.splice(at..at, other[from..from + len].iter().copied());
        }
        _ => data.push(rng.u8(..)),
    }
}

/// The short fuzz run CI can afford: every target gets mutants of its kept inputs (one to
/// eight random edits each, seeded, so a failure repeats) and must neither panic nor hang.
/// Coverage-guided fuzzing finds far more; this catches a decoder that starts to panic on
/// inputs near the ones it is known to handle.
#[test]
fn mutated_inputs_pass_every_target() {
    let mut rng = fastrand::Rng::with_seed(0x7e1e_4b5f);
    for target in TARGETS {
        let dir = regressions().join(target);
        let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| std::fs::read(entry.expect("entry").path()).expect("read"))
            .collect();
        inputs.sort();
        let mutants = mutants_for(target);
        for round in 0..mutants {
            let mut data = inputs[round % inputs.len()].clone();
            let other = &inputs[rng.usize(0..inputs.len())];
            for _ in 0..rng.usize(1..=8) {
                mutate(&mut rng, &mut data, other);
            }
            fuzzing::run(target, &data);
        }
        println!("{target}: {mutants} mutants");
    }
}

/// Writes seed inputs for every target, cut from a small store on the simulated file
/// system, into `fuzz/regressions/<target>/seed-*` (and so into the corpora, which start
/// from them).
#[test]
#[ignore]
fn write_seeds() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let options = fuzzing::store_options();
    let db = Db::open_on(&storage, "/db", options.clone()).expect("open");
    for i in 0..300u32 {
        db.put(format!("key{i:04}"), vec![i as u8; 20 + i as usize % 30]).expect("put");
    }
    let mut batch = WriteBatch::new();
    batch.put(b"batch-a", b"1").delete(b"key0003").put(b"batch-b", vec![9u8; 700]);
    db.write(&batch).expect("batch");
    db.checkpoint().expect("checkpoint");
    db.put(b"tail", b"in the log only").expect("put");
    drop(db);
    // Opened again: the block store's recovery writes a map checkpoint.
    drop(Db::open_on(&storage, "/db", options).expect("reopen"));
    let files = fs.snapshot().files;
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = regressions().join(target);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write");
    };
    let trim = |bytes: &[u8]| {
        let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |at| at + 1);
        bytes[..used.next_multiple_of(64).min(bytes.len())].to_vec()
    };
    let start = |offset: u64| offset as usize;
    for (path, bytes) in &files {
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        if name.ends_with(".wal") {
            write("log_segment", &name, &trim(bytes));
            let records = &bytes[start(wal_format::RECORDS_START)..];
            if let Ok(header) = wal_format::decode_header(records, records.len() as u64) {
                let end = wal_format::RECORD_HEADER_BYTES + header.len as usize;
                write("log_record", &name, &records[..end]);
                write("write_batch", &name, &records[wal_format::RECORD_HEADER_BYTES..end]);
            }
        } else if name.ends_with(".blk") {
            write("segment_header", &name, &bytes[..start(block_format::BLOCKS_START)]);
            let mut at = start(block_format::BLOCKS_START);
            let (mut pages, mut headers) = (0, 0);
            while let Ok(header) = block_format::decode_header(&bytes[at..]) {
                let end = at + block_format::BLOCK_HEADER_BYTES + header.payload_len();
                if headers < 4 {
                    write("block_header", &format!("{name}-{at}"), &bytes[at..end]);
                    headers += 1;
                }
                let payload = &bytes[at + block_format::BLOCK_HEADER_BYTES..end];
                if header.id.0 == 0 && header.codec == block_format::Codec::None {
                    write("meta_block", &format!("{name}-{at}"), payload);
                } else if pages < 4 && header.codec == block_format::Codec::None {
                    write("btree_page", &format!("{name}-{at}"), payload);
                    pages += 1;
                }
                at = (end as u64).next_multiple_of(block_format::BLOCK_ALIGN) as usize;
                if at >= bytes.len() {
                    break;
                }
            }
        } else if name.ends_with(".map") {
            write("map_checkpoint", &name, &trim(bytes));
        }
    }
    for (name, image) in fuzzing::slotted_page_seeds() {
        write("slotted_page", &name, &image);
    }
    for (name, script) in fuzzing::slotted_edits_seeds() {
        write("slotted_edits", &name, &script);
    }
    // The store target's inputs are damage descriptions: none, one flip, one cut.
    write("store_dir", "none", &[]);
    write("store_dir", "flip", &[2, 0x10, 0x20, 0, 0, 0x41]);
    write("store_dir", "cut", &[1, 0x00, 0x30, 0, 0, 0]);
}
