//! The checks behind the fuzz targets in `fuzz/` (one per on-disk decoder, and one that
//! salvages and opens a damaged store), shared with `tests/fuzz_regressions.rs`, which
//! replays every input kept under `fuzz/regressions/` through them in `cargo test`. Not part
//! of the API.
//!
//! Each check feeds arbitrary bytes to a decoder, or to recovery, and fails (panics) only
//! when a promise breaks: a decoder that panics, allocates without bound, or accepts bytes
//! it cannot give back the same; a store that returns a wrong value; a salvage that copies
//! a wrong entry, or loses one, without its report saying so. An error is the right
//! answer to damage.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use tierkv_blockstore::format as block_format;
use tierkv_io::sim::{CrashModel, SimFs};
use tierkv_io::{AccessMethod, OpenOptions, Storage};
use tierkv_wal::format as wal_format;

use crate::meta::Meta;
use crate::page;
use crate::{Db, Durability, Options, WriteBatch};

/// The fuzz targets, by name (each `fuzz/fuzz_targets/<name>.rs` calls `run(name, data)`).
pub const TARGETS: [&str; 10] = [
    "log_record",
    "log_segment",
    "write_batch",
    "block_header",
    "segment_header",
    "map_checkpoint",
    "btree_page",
    "slotted_page",
    "meta_block",
    "store_dir",
];

/// Runs target `name` on `data`. Panics on an unknown name.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "log_record" => log_record(data),
        "log_segment" => log_segment(data),
        "write_batch" => write_batch(data),
        "block_header" => block_header(data),
        "segment_header" => segment_header(data),
        "map_checkpoint" => map_checkpoint(data),
        "btree_page" => btree_page(data),
        "slotted_page" => slotted_page(data),
        "meta_block" => meta_block(data),
        "store_dir" => store_dir(data),
        other => panic!("no fuzz target {other}"),
    }
}

/// A log record: its header, then its checksum over the payload that follows.
pub fn log_record(data: &[u8]) {
    let Ok(header) = wal_format::decode_header(data, data.len() as u64) else { return };
    let start = wal_format::RECORD_HEADER_BYTES;
    let Some(payload) = data.get(start..start + header.len as usize) else {
        panic!("a header claims {} payload bytes that its room check let through", header.len);
    };
    let _ = wal_format::check_payload(data, &header, payload);
}

/// A whole log segment file, recovered by `Wal::open` (segment header, records, the torn
/// tail's repair), with each record's payload decoded as the engine's write batch.
pub fn log_segment(data: &[u8]) {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs);
    let dir = Path::new("/log");
    storage.create_dir_all(dir).expect("a directory in a fresh simulation");
    let name = dir.join(wal_format::segment_file_name(1));
    let file = storage
        .open(&name, &OpenOptions::new(AccessMethod::Syscall).create(true))
        .expect("a file in a fresh simulation");
    if !data.is_empty() {
        file.write_at(data, 0).expect("a write in a fresh simulation");
    }
    drop(file);
    let options = tierkv_wal::WalOptions {
        segment_bytes: (data.len() as u64)
            .next_multiple_of(4096)
            .max(tierkv_wal::WalOptions::MIN_SEGMENT_BYTES),
        ..tierkv_wal::WalOptions::default()
    };
    let opened = tierkv_wal::Wal::open(&storage, dir, options, |record| {
        let _ = WriteBatch::decode(record.payload);
    });
    drop(opened);
}

/// A log record's payload as the engine writes it: a batch.
pub fn write_batch(data: &[u8]) {
    if let Ok(batch) = WriteBatch::decode(data) {
        let again = WriteBatch::decode(&batch.encode()).expect("a batch re-encodes");
        assert_eq!(again.ops().count(), batch.ops().count());
    }
}

/// A block header, then the checksum over the payload after it.
pub fn block_header(data: &[u8]) {
    if block_format::decode_header(data).is_ok() && data.len() >= block_format::BLOCK_HEADER_BYTES {
        let (head, payload) = data.split_at(block_format::BLOCK_HEADER_BYTES);
        let _ = block_format::verify_block(head, payload);
    }
}

/// A block segment's header, and the doublewrite file's batch header.
pub fn segment_header(data: &[u8]) {
    let _ = block_format::decode_segment_header(data);
    let _ = block_format::decode_doublewrite_header(data);
}

/// A map checkpoint file.
pub fn map_checkpoint(data: &[u8]) {
    let _ = block_format::decode_map(data);
}

/// A B+tree page: what decodes must encode back to bytes that decode to the same page.
pub fn btree_page(data: &[u8]) {
    if let Ok(decoded) = page::decode(data) {
        let again =
            page::decode(&page::encode(&decoded, data.len())).expect("an encoded page decodes");
        assert_eq!(again, decoded, "a page changed through encode and decode");
    }
}

/// A slotted page (format 2) as a frame holds it: `data` cut or zero-padded to a 4 KiB page.
/// Reads of the unchecked bytes answer or say `None`, never panic; a page `check` accepts
/// decodes, encodes again to a page with the same entries, and finds each key where it is.
pub fn slotted_page(data: &[u8]) {
    use page::slotted::{self, Kind, Slotted};
    let page_bytes = 4096;
    let mut image = vec![0u8; page_bytes];
    let n = data.len().min(page_bytes);
    image[..n].copy_from_slice(&data[..n]);
    let page = Slotted::new(&image[..]);
    for probe in [&data[..data.len().min(12)], b"", b"user", &[0xFF; 8]] {
        let _ = page.search(probe);
        let _ = page.child_index(probe);
    }
    for index in 0..page.count().unwrap_or(0).min(64) {
        if let Some(slotted::ValueAt::Inline { offset, len }) = page.value(index) {
            let _ = page.inline_into(offset, len, &mut Vec::new());
        }
        let _ = page.child(index);
        let _ = page.key_into(index, &mut Vec::new());
    }
    let (lsn, link) = (page.lsn().unwrap_or(0), page.link().unwrap_or(0));
    match slotted::check(&image, page_bytes) {
        Ok(Kind::Leaf) => {
            let entries = slotted::decode_leaf(&image).expect("a checked leaf decodes");
            for (at, (key, _)) in entries.iter().enumerate() {
                assert_eq!(page.search(key), Some(Ok(at)), "a checked leaf lost a key");
            }
            let again = slotted::encode_leaf(&entries, lsn, link, page_bytes);
            assert_eq!(slotted::decode_leaf(&again), Some(entries), "a leaf changed");
        }
        Ok(Kind::Internal) => {
            let (first, entries) = slotted::decode_internal(image.as_slice())
                .expect("a checked internal page decodes");
            for (at, (key, child)) in entries.iter().enumerate() {
                assert_eq!(page.child_index(key), Some(at + 1));
                assert_eq!(page.child(at + 1), Some(*child));
            }
            let again = slotted::encode_internal(first, &entries, lsn, page_bytes);
            assert_eq!(slotted::decode_internal(again.as_slice()), Some((first, entries)));
        }
        Err(_) => {}
    }
}

/// Seed inputs for `slotted_page`: a leaf with inline and overflow values, an internal page.
pub fn slotted_page_seeds() -> Vec<(String, Vec<u8>)> {
    use bytes::Bytes;
    use page::slotted;
    let page_bytes = 4096;
    let leaf: Vec<(Bytes, page::Value)> = (0..40u32)
        .map(|i| {
            let key = Bytes::from(format!("user{:06}", i * 37));
            let value = if i % 9 == 0 {
                page::Value::Overflow(page::OverflowRef {
                    len: 5000,
                    first: 100 + u64::from(i),
                    blocks: 2,
                })
            } else {
                page::Value::inline(vec![i as u8; (i % 13) as usize])
            };
            (key, value)
        })
        .collect();
    let internal: Vec<(Vec<u8>, u64)> =
        (1..30u64).map(|i| (format!("user{:03}", i * 7).into_bytes(), 10 + i)).collect();
    vec![
        ("leaf".into(), slotted::encode_leaf(&leaf, 12, 0, page_bytes)),
        ("internal".into(), slotted::encode_internal(5, &internal, 12, page_bytes)),
    ]
}

/// The meta block (the store's root record: its manifest).
pub fn meta_block(data: &[u8]) {
    if let Ok(meta) = Meta::decode(data) {
        let again = Meta::decode(&meta.encode()).expect("an encoded meta block decodes");
        assert_eq!(again, meta);
    }
}

/// A closed store on the simulated file system, and what it holds.
type BaseStore = (SimFs, BTreeMap<Vec<u8>, Vec<u8>>);

/// The closed store `store_dir` damages copies of, built once.
fn base_store() -> &'static BaseStore {
    static BASE: OnceLock<BaseStore> = OnceLock::new();
    BASE.get_or_init(|| {
        let fs = SimFs::new();
        let storage = Storage::Sim(fs.clone());
        let db = Db::open_on(&storage, "/db", store_options()).expect("a store in a simulation");
        let mut expected = BTreeMap::new();
        for i in 0..400u32 {
            let key = format!("key{i:04}").into_bytes();
            let value =
                vec![(i % 251) as u8; if i % 50 == 0 { 1500 } else { 30 + i as usize % 40 }];
            db.put(&key, &value).expect("a put in a simulation");
            expected.insert(key, value);
        }
        db.close().expect("a close in a simulation");
        Db::open_on(&storage, "/db", store_options())
            .expect("a reopen in a simulation")
            .close()
            .expect("a close in a simulation");
        (fs, expected)
    })
}

/// The options of the store `store_dir` damages, and of the one the seed inputs are cut
/// from (`tests/fuzz_regressions.rs`): small pages and segments, so a small store has many.
pub fn store_options() -> Options {
    Options {
        cache_size: 1 << 20,
        max_page_bytes: Some(1024),
        log_segment_bytes: 32 << 10,
        block_segment_bytes: 64 << 10,
        durability: Durability::None,
        ..Options::default()
    }
}

/// A closed store damaged as `data` says (groups of 6 bytes: a file, an offset, and a byte
/// to XOR there, or a length to cut the file to when the byte is 0), salvaged into a new
/// store (`salvage_dir`), then opened, read, scanned and verified. Every read must be right
/// or an error.
pub fn store_dir(data: &[u8]) {
    let (base, expected) = base_store();
    let image = base.crash_image(base.op_count(), CrashModel::KeepAll, 0);
    let files: Vec<(std::path::PathBuf, u64)> = image
        .snapshot()
        .files
        .into_iter()
        .map(|(path, bytes)| (path, bytes.len() as u64))
        .filter(|(_, len)| *len > 0)
        .collect();
    let storage = Storage::Sim(image);
    for change in data.chunks_exact(6).take(16) {
        let (path, len) = &files[change[0] as usize % files.len()];
        let at = u32::from_le_bytes([change[1], change[2], change[3], change[4]]) as u64 % len;
        let Ok(file) = storage.open(path, &OpenOptions::new(AccessMethod::Syscall)) else {
            continue;
        };
        match change[5] {
            0 => {
                let _ = file.set_len(at);
            }
            flip => {
                let mut byte = [0u8];
                if file.read_at(&mut byte, at).is_ok() {
                    let _ = file.write_at(&[byte[0] ^ flip], at);
                }
            }
        }
    }
    salvage_dir(&storage, expected);
    let Ok(db) = Db::open_on(&storage, "/db", store_options()) else { return };
    for (key, value) in expected {
        if let Ok(found) = db.get(key) {
            assert!(found.is_none() || found.as_ref() == Some(value), "a wrong value for {key:?}");
            assert!(found.is_some(), "{key:?} vanished without an error");
        }
    }
    for entry in db.range(..) {
        match entry {
            Ok((key, value)) => assert_eq!(expected.get(&key[..]), Some(&value), "the scan"),
            Err(_) => break,
        }
    }
    let _ = db.verify();
}

/// Salvages the damaged store in `/db` (mounted read-only) into `/salvaged`: the salvage
/// must succeed, the new store must verify, and each of its entries must be right or lie
/// where the report says something was lost or is in doubt; each key it lacks too.
fn salvage_dir(storage: &Storage, expected: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let Storage::Sim(fs) = storage else { return };
    fs.set_read_only("/db", true);
    let target = Options { read_only: false, ..store_options() };
    let options = crate::SalvageOptions { target, ..crate::SalvageOptions::default() };
    let report = crate::salvage_on(storage, "/db", "/salvaged", options);
    fs.set_read_only("/db", false);
    let report = report.expect("a salvage on a simulation");
    let options = Options { read_only: true, ..store_options() };
    let db = Db::open_on(storage, "/salvaged", options).expect("the salvaged store opens");
    assert!(db.verify().expect("verify the salvaged store").is_clean(), "{report}");
    let mut salvaged = BTreeMap::new();
    for entry in db.range(..) {
        let (key, value) = entry.expect("a salvaged entry");
        let right = expected.get(&key) == Some(&value);
        assert!(right || report.covers(&key), "salvage copied {key:?} wrongly\n{report}");
        salvaged.insert(key, value);
    }
    for key in expected.keys().filter(|key| !salvaged.contains_key(*key)) {
        assert!(report.covers(key), "salvage lost {key:?} without saying so\n{report}");
    }
    drop(db);
}
