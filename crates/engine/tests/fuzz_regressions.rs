//! Replays every input kept under `fuzz/regressions/<target>/` (seed inputs cut from a real
//! store, and every crasher a fuzzing run found) through the fuzz targets' checks
//! (`tierkv::fuzzing`), so that `cargo test` catches a decoder that regresses. The fuzzing
//! itself needs cargo-fuzz and a nightly toolchain: see docs/reliability.md.
//!
//! `cargo test -p tierkv --test fuzz_regressions -- --ignored write_seeds` writes the seed
//! inputs again from a fresh store.

use std::path::{Path, PathBuf};

use tierkv::fuzzing::{self, TARGETS};
use tierkv::{Db, Durability, Options, WriteBatch};
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

/// Writes seed inputs for every target, cut from a small store on the simulated file
/// system, into `fuzz/regressions/<target>/seed-*` (and so into the corpora, which start
/// from them).
#[test]
#[ignore]
fn write_seeds() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let options = Options {
        cache_size: 1 << 20,
        max_page_bytes: 1024,
        log_segment_bytes: 32 << 10,
        block_segment_bytes: 64 << 10,
        durability: Durability::None,
        ..Options::default()
    };
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
    // The store target's inputs are damage descriptions: none, one flip, one cut.
    write("store_dir", "none", &[]);
    write("store_dir", "flip", &[2, 0x10, 0x20, 0, 0, 0x41]);
    write("store_dir", "cut", &[1, 0x00, 0x30, 0, 0, 0]);
}
