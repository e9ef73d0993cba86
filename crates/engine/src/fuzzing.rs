//! The checks behind the fuzz targets in `fuzz/` (one per on-disk decoder, and one that
//! salvages and opens a damaged store), shared with `tests/fuzz_regressions.rs`, which
//! replays every input kept under `fuzz/regressions/` through them in `cargo test`. Not part
//! of the API.
//!
//! `db_ops` is not a decoder: it reads its bytes as a script of operations on a store (the
//! write path in place, splits, checkpoints in several groups, transactions, a crash).
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
pub const TARGETS: [&str; 12] = [
    "log_record",
    "log_segment",
    "write_batch",
    "block_header",
    "segment_header",
    "map_checkpoint",
    "btree_page",
    "slotted_page",
    "slotted_edits",
    "meta_block",
    "store_dir",
    "db_ops",
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
        "slotted_edits" => slotted_edits(data),
        "meta_block" => meta_block(data),
        "store_dir" => store_dir(data),
        "db_ops" => db_ops(data),
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

/// Edits of a slotted page in place (`page::slotted::edit`), read from `data` as a script
/// of 4-byte steps (what, key, value length, value byte), on a 4 KiB leaf, on an internal
/// page, and on the two halves of a split: after every step the page passes `check` and
/// holds exactly what a sorted map holds; `NoRoom` leaves the page as it was and comes only
/// when the entries with the change would not fit even laid out again.
pub fn slotted_edits(data: &[u8]) {
    use bytes::Bytes;
    use page::slotted::edit::{self, Split, ValueRef};
    use page::slotted::{self, Kind, Slotted};
    let page_bytes = 4096;
    let prefixes: [&[u8]; 4] = [b"user", b"user1", b"us", b""];
    // A key: one of the prefixes, then 0 to 3 bytes, all from one byte of the script.
    let key_of = |byte: u8| {
        let suffix = [byte & 0x0F, byte & 0x07, byte & 0x03];
        [prefixes[usize::from(byte >> 6)], &suffix[..usize::from(byte >> 4 & 3)]].concat()
    };
    let mut leaf = slotted::encode_leaf(&[], 1, 2, page_bytes);
    let mut internal = slotted::encode_internal(1, &[(b"m".to_vec(), 2)], 1, page_bytes);
    let mut leaf_model: BTreeMap<Vec<u8>, page::Value> = BTreeMap::new();
    let mut internal_model: BTreeMap<Vec<u8>, u64> = BTreeMap::from([(b"m".to_vec(), 2)]);
    let entries = |model: &BTreeMap<Vec<u8>, page::Value>| -> Vec<(Bytes, page::Value)> {
        model.iter().map(|(k, v)| (Bytes::from(k.clone()), v.clone())).collect()
    };
    for (number, step) in data.chunks_exact(4).enumerate() {
        // The LSN and link ride through every edit, laid out again or not.
        edit::set_lsn(&mut leaf[..], number as u64);
        edit::set_link(&mut leaf[..], u64::from(step[1]) + 2);
        let key = key_of(step[1]);
        let len = usize::from(step[2]) * 4;
        let value = if step[3] == 0xFF {
            page::Value::Overflow(page::OverflowRef {
                len: 5000,
                first: u64::from(step[2]) + 1,
                blocks: 2,
            })
        } else {
            page::Value::inline(vec![step[3]; len.min(page_bytes / 4)])
        };
        match step[0] % 8 {
            0..=3 => {
                let before = leaf.clone();
                let mut with = leaf_model.clone();
                with.insert(key.clone(), value.clone());
                // Counted in place first: the page laid out again with the put, exactly.
                let relaid = edit::relaid_bytes(&leaf[..], &key, ValueRef::from(&value));
                let put = edit::put_leaf(&mut leaf[..], &key, ValueRef::from(&value));
                if let Some(bytes) = relaid {
                    assert_eq!(bytes, slotted::leaf_bytes(&entries(&with)), "relaid bytes");
                    assert_eq!(bytes <= page_bytes, put.is_ok(), "relaid bytes against the put");
                }
                match put {
                    Ok(_) => leaf_model = with,
                    Err(no_room) => {
                        assert_eq!(leaf, before, "a put without room changed the page");
                        assert!(
                            slotted::leaf_bytes(&entries(&with)) > page_bytes,
                            "room was there"
                        );
                        assert_eq!(no_room.needed, slotted::leaf_bytes(&entries(&with)));
                    }
                }
            }
            4 => assert_eq!(edit::remove(&mut leaf[..], &key), leaf_model.remove(&key).is_some()),
            5 => edit::compact(&mut leaf[..]),
            6 if !key.is_empty() => {
                if edit::put_separator(&mut internal[..], &key, u64::from(step[3]) + 3).is_ok() {
                    internal_model.insert(key, u64::from(step[3]) + 3);
                }
            }
            6 => {}
            _ => {
                if internal_model.len() > 1 && internal_model.contains_key(&key) {
                    assert!(edit::remove(&mut internal[..], &key));
                    internal_model.remove(&key);
                }
            }
        }
        assert_eq!(slotted::check(&leaf, page_bytes), Ok(Kind::Leaf), "an edit broke the leaf");
        let header = Slotted::new(&leaf[..]);
        assert_eq!(
            (header.lsn(), header.link()),
            (Some(number as u64), Some(u64::from(step[1]) + 2))
        );
        assert_eq!(
            slotted::decode_leaf(&leaf),
            Some(entries(&leaf_model)),
            "a leaf edit lost track"
        );
        assert_eq!(slotted::check(&internal, page_bytes), Ok(Kind::Internal));
        let decoded = slotted::decode_internal(internal.as_slice()).expect("an internal page");
        assert_eq!(decoded, (1, internal_model.clone().into_iter().collect()));
    }
    if leaf_model.len() >= 2 {
        let Split { left, right, separator } = edit::split(&leaf[..], 77);
        let (low, high) = (
            slotted::decode_leaf(&left).expect("left"),
            slotted::decode_leaf(&right).expect("right"),
        );
        assert!(
            low.iter().all(|e| e.0[..] < separator[..])
                && high.iter().all(|e| e.0[..] >= separator[..])
        );
        assert_eq!(low.into_iter().chain(high).collect::<Vec<_>>(), entries(&leaf_model));
        let link = Slotted::new(&leaf[..]).link();
        assert_eq!(
            (Slotted::new(&left[..]).link(), Slotted::new(&right[..]).link()),
            (Some(77), link)
        );
        // The tree's split of a leaf: `split_point` (with no change laid over it) names a
        // separator between two of its keys, and `split_at` there keeps every entry, each on
        // its side, in order.
        let separator = edit::split_point(&leaf[..], &[]).expect("two entries make a cut");
        let Split { left, right, .. } = edit::split_at(&leaf[..], 78, &separator);
        assert_eq!(slotted::check(&left, page_bytes), Ok(Kind::Leaf));
        assert_eq!(slotted::check(&right, page_bytes), Ok(Kind::Leaf));
        let (low, high) = (
            slotted::decode_leaf(&left).expect("left"),
            slotted::decode_leaf(&right).expect("right"),
        );
        assert!(!low.is_empty() && !high.is_empty(), "a cut between two keys leaves both");
        assert!(
            low.iter().all(|e| e.0[..] < separator[..])
                && high.iter().all(|e| e.0[..] >= separator[..])
        );
        assert_eq!(low.into_iter().chain(high).collect::<Vec<_>>(), entries(&leaf_model));
        assert_eq!(
            (Slotted::new(&left[..]).link(), Slotted::new(&right[..]).link()),
            (Some(78), link)
        );
    }
    // A full parent's split with the separator it had no room for: one more entry than the
    // page holds, the middle one going up.
    let extra = key_of(data.last().copied().unwrap_or(0x7F) | 0x40);
    if internal_model.len() >= 2 && !extra.is_empty() && !internal_model.contains_key(&extra) {
        let Split { left, right, separator } = edit::split_adding(&internal[..], 77, &extra, 99);
        let (l, r) = (
            slotted::decode_internal(left.as_slice()).expect("left"),
            slotted::decode_internal(right.as_slice()).expect("right"),
        );
        let mut all = internal_model.clone();
        all.insert(extra, 99);
        let mut joined: BTreeMap<Vec<u8>, u64> = l.1.into_iter().chain(r.1).collect();
        joined.insert(separator.clone(), r.0);
        assert_eq!(joined, all, "a split with one more separator lost or moved one");
        assert_eq!(l.0, 1, "the left half keeps the page's first child");
    }
    if internal_model.len() >= 3 {
        let Split { left, right, separator } = edit::split(&internal[..], 77);
        let (l, r) = (
            slotted::decode_internal(left.as_slice()).expect("left"),
            slotted::decode_internal(right.as_slice()).expect("right"),
        );
        assert_eq!(r.0, internal_model[&separator]);
        assert!(l.1.iter().all(|e| e.0 < separator) && r.1.iter().all(|e| e.0 > separator));
        assert_eq!(l.1.len() + r.1.len() + 1, internal_model.len());
    }
}

/// Seed inputs for `slotted_edits`: scripts of puts, removes and compactions that fill the
/// leaf past its room, and separators for the internal page.
pub fn slotted_edits_seeds() -> Vec<(String, Vec<u8>)> {
    // A fixed xorshift, so the seeds are the same on every run.
    let mut state = 0x2026_1126_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut script = |steps: usize, what: &[u8]| -> Vec<u8> {
        (0..steps)
            .flat_map(|_| {
                let r = next().to_le_bytes();
                [what[usize::from(r[0]) % what.len()], r[1], r[2] % 64, r[3]]
            })
            .collect()
    };
    vec![
        ("puts".into(), script(200, &[0, 1, 2, 3])),
        ("mixed".into(), script(400, &[0, 1, 2, 3, 4, 4, 5, 6, 7])),
        ("internal".into(), script(200, &[6, 6, 6, 7])),
    ]
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

/// A script of operations on a store on the simulated file system, 3 bytes a step (what,
/// key, value), against a sorted map: puts (some of overflow size), deletes, two-key
/// batches, `Sync` or `None`; transactions that read a key and write another from it, with a
/// write by the store between (a conflict when it touched what the transaction saw);
/// compare-and-swaps; checkpoints (in groups of 4 pages), snapshots read later, reopens.
/// After every step the touched key reads as the model says; at the end a scan equals the
/// model, `verify` is clean, and a crash that keeps only what was made durable recovers a
/// state of the history at or after the last `Sync` write, with no block named by nothing
/// once checkpointed.
pub fn db_ops(data: &[u8]) {
    type Model = BTreeMap<Vec<u8>, Vec<u8>>;
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let options = || Options {
        cache_size: (64 + 128) << 10,
        write_buffer_size: Some(64 << 10),
        max_page_bytes: Some(1024),
        checkpoint_group_bytes: Some(4 << 10),
        log_segment_bytes: 64 << 10,
        block_segment_bytes: 64 << 10,
        durability: Durability::Sync,
        ..Options::default()
    };
    let mut db = Db::open_on(&storage, "/db", options()).expect("open a new store");
    let mut model = Model::new();
    let mut history: Vec<Model> = vec![Model::new()];
    // The history index of the last write acknowledged as durable.
    let mut durable = 0;
    let mut snapshots: Vec<(crate::Snapshot, Model)> = Vec::new();
    let key = |byte: u8| format!("k{:02}", byte % 40).into_bytes();
    let value = |step: usize, byte: u8| match byte {
        0xF0.. => vec![byte; 300 + usize::from(byte & 0x0F) * 200],
        _ => format!("v{step}-{byte}").into_bytes(),
    };
    for (step, op) in data.chunks_exact(3).take(400).enumerate() {
        let (k, v) = (key(op[1]), value(step, op[2]));
        let sync = op[0] & 0x80 == 0;
        let durability = if sync { Durability::Sync } else { Durability::None };
        let mut wrote = true;
        match op[0] & 0x0F {
            0..=3 => {
                let mut batch = WriteBatch::new();
                batch.put(&k, &v);
                db.write_with(&batch, durability).expect("put");
                model.insert(k.clone(), v);
            }
            4 | 5 => {
                let mut batch = WriteBatch::new();
                batch.delete(&k);
                db.write_with(&batch, durability).expect("delete");
                model.remove(&k);
            }
            6 => {
                let other = key(op[2]);
                let mut batch = WriteBatch::new();
                batch.put(&k, &v).delete(&other);
                db.write_with(&batch, durability).expect("batch");
                model.insert(k.clone(), v);
                model.remove(&other);
            }
            7 => {
                // Reads `k`, writes `k` + 1 from it; the store changes `k` or another key
                // between when `op[2]` says so.
                let next = key(op[1].wrapping_add(1));
                let mut tx = db.transaction();
                let seen = tx.get(&k).expect("a transaction's read");
                assert_eq!(seen.as_ref(), model.get(&k), "a transaction read a wrong value");
                let mut derived = seen.clone().unwrap_or_default();
                derived.extend_from_slice(b"+");
                derived.truncate(200);
                tx.put(&next, &derived);
                let meddle = match op[2] % 3 {
                    0 => None,
                    1 => Some(k.clone()),
                    _ => Some(key(op[2])),
                };
                if let Some(meddle) = &meddle {
                    db.put(meddle, b"meddled").expect("put");
                    model.insert(meddle.clone(), b"meddled".to_vec());
                    history.push(model.clone());
                    durable = history.len() - 1;
                }
                let conflict = meddle.as_ref().is_some_and(|m| {
                    (*m == k && seen.as_deref() != Some(&b"meddled"[..]))
                        || (*m == next
                            && model_before(&history, &next) != Some(b"meddled".to_vec()))
                });
                match tx.commit() {
                    Ok(_) => {
                        assert!(!conflict, "a transaction committed over a change to what it saw");
                        model.insert(next, derived);
                    }
                    Err(crate::Error::Conflict { .. }) => {
                        assert!(conflict, "a transaction refused with nothing changed");
                        wrote = false;
                    }
                    Err(error) => panic!("commit: {error}"),
                }
            }
            8 => {
                let expected =
                    if op[2] & 1 == 0 { model.get(&k).cloned() } else { Some(v.clone()) };
                let swapped = db
                    .compare_and_swap(&k, expected.as_deref(), Some(&v))
                    .expect("compare_and_swap");
                match swapped {
                    Ok(()) => {
                        assert_eq!(expected.as_ref(), model.get(&k), "swapped on a mismatch");
                        model.insert(k.clone(), v);
                    }
                    Err(refused) => {
                        assert_ne!(expected.as_ref(), model.get(&k), "refused a match");
                        assert_eq!(refused.current.as_ref(), model.get(&k));
                        wrote = false;
                    }
                }
            }
            9 | 10 => {
                db.checkpoint().expect("checkpoint");
                wrote = false;
            }
            11 => {
                snapshots.push((db.snapshot(), model.clone()));
                wrote = false;
            }
            12 => {
                if let Some((snapshot, seen)) = snapshots.pop() {
                    let found: Result<Model, _> = snapshot.range(..).collect();
                    match found {
                        Ok(found) => assert_eq!(&found, &seen, "a snapshot changed"),
                        Err(crate::Error::SnapshotTooOld { .. }) => {}
                        Err(error) => panic!("a snapshot's scan: {error}"),
                    }
                }
                wrote = false;
            }
            13 => {
                snapshots.clear();
                drop(db);
                db = Db::open_on(&storage, "/db", options()).expect("reopen");
                durable = history.len() - 1;
                wrote = false;
            }
            _ => {
                assert_eq!(db.get(&k).expect("get").as_ref(), model.get(&k), "get");
                wrote = false;
            }
        }
        assert_eq!(db.get(&k).expect("get").as_ref(), model.get(&k), "step {step}: {op:?}");
        if wrote {
            history.push(model.clone());
            if sync || op[0] & 0x0F == 7 || op[0] & 0x0F == 8 {
                durable = history.len() - 1;
            }
        }
    }
    let found: Model = db.range(..).map(|entry| entry.expect("scan")).collect();
    assert_eq!(found, model, "the scan at the end");
    assert!(db.verify().expect("verify").is_clean(), "verify at the end");
    drop(snapshots);
    // A crash keeping what was made durable (the drop above never ran for `db`).
    let image = fs.crash_image(fs.op_count(), CrashModel::DropAll, 0);
    drop(db);
    let storage = Storage::Sim(image);
    let db = Db::open_on(&storage, "/db", options()).expect("recovery");
    let found: Model = db.range(..).map(|entry| entry.expect("scan")).collect();
    assert!(
        history[durable..].contains(&found),
        "the recovered state is no state of the history after the last durable write"
    );
    for _ in 0..3 {
        db.checkpoint().expect("checkpoint after recovery");
    }
    let report = db.verify().expect("verify after recovery");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.blocks, report.pages + report.overflow_blocks + 1, "leaked blocks");
}

/// What `key` held before the last state of `history` (the value a transaction's write
/// replaced, when a write between changed it).
fn model_before(history: &[BTreeMap<Vec<u8>, Vec<u8>>], key: &[u8]) -> Option<Vec<u8>> {
    let n = history.len();
    (n >= 2).then(|| history[n - 2].get(key).cloned()).flatten()
}
