//! Damaged files: one byte of one file of a closed store flipped, or one file cut short, then
//! the store opened and every key read, the whole store scanned and verified. Each read must
//! return the right value or an error that says where the damage is (a file and an offset);
//! never a wrong value, a key that vanished without an error, a panic or a hang. `verify`
//! must report the damage when a read found it.
//!
//! Every eighth damaged store (`TIERKV_CORRUPTION_SALVAGE_EVERY` changes it; every one on
//! real files) is also salvaged (`tierkv::salvage_on`, the damaged files mounted read-only)
//! into a new store, which must open, verify, and hold every key `get` could still read
//! with the value it read; every entry it holds must be right, or in a key range the report
//! calls lost or in doubt; every key it lacks must be one the report names. The tally
//! counts the keys salvage recovered that `get` could not read (all of them, when the
//! damaged store would not open).
//!
//! On the simulated file system (fast: a copy of the store is a clone of its image), and on
//! real files read through a mapping (where a file cut short would raise SIGBUS).
//! The simulated sweep tries 10,000 single-byte flips (and a truncation for every nine flips)
//! in about 30 seconds (15 without the salvages), in CI too; `TIERKV_CORRUPTION_FLIPS`
//! changes the count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tierkv::{AccessMethod, Db, Durability, Options, SalvageOptions, SalvageReport, WriteBatch};
use tierkv_io::sim::{CrashModel, SimFs};
use tierkv_io::{OpenOptions, Storage};

fn options(read_method: AccessMethod) -> Options {
    Options {
        cache_size: 2 << 20,
        max_page_bytes: Some(4096),
        log_segment_bytes: 64 << 10,
        block_segment_bytes: 64 << 10,
        durability: Durability::None,
        read_method,
        ..Options::default()
    }
}

/// Writes a store with leaves, internal pages, overflow values, deletes, two checkpoints and
/// a clean close; returns what it holds.
fn build(storage: &Storage, dir: &Path, read_method: AccessMethod) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open_on(storage, dir, options(read_method)).expect("open");
    let mut expected = BTreeMap::new();
    for i in 0..1500u32 {
        let key = format!("key{i:05}").into_bytes();
        let len = if i % 97 == 0 { 3000 } else { 40 + (i as usize % 13) * 9 };
        let value: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
        db.put(&key, &value).expect("put");
        expected.insert(key, value);
    }
    db.checkpoint().expect("checkpoint");
    let mut batch = WriteBatch::new();
    for i in (0..1500u32).step_by(5) {
        let key = format!("key{i:05}").into_bytes();
        batch.delete(&key);
        expected.remove(&key);
    }
    db.write(&batch).expect("batch");
    db.close().expect("close");
    // Opened once more: the block store's recovery leaves a map checkpoint behind, so the
    // next opens scan only what follows it, and reads (not the open) meet most damage.
    Db::open_on(storage, dir, options(read_method)).expect("reopen").close().expect("close");
    expected
}

/// How a damaged store fared.
#[derive(Default, Debug)]
struct Tally {
    trials: u64,
    flips: u64,
    truncations: u64,
    open_refused: u64,
    reads_failed: u64,
    verify_found: u64,
    unnoticed: u64,
    /// Salvages whose report says nothing was lost or is in doubt.
    salvages: u64,
    salvage_complete: u64,
    /// Keys the salvaged stores hold that `get` on the damaged store could not read.
    salvage_beyond_get: u64,
    /// Entries copied with a wrong value or that should be gone, each in a range the
    /// report calls in doubt.
    salvage_doubtful_wrong: u64,
    /// Keys the salvaged stores lack, each named lost by the report.
    salvage_missing: u64,
}

/// The damaged store's keys that `get` read: the value it read, for each.
type Readable = BTreeMap<Vec<u8>, Vec<u8>>;

/// Salvages the damaged store in `dir` into `to` with the source mounted read-only (when
/// `sim` is given), and returns the report.
fn salvage(storage: &Storage, sim: Option<&SimFs>, dir: &Path, to: &Path) -> SalvageReport {
    let target =
        Options { cache_size: 2 << 20, durability: Durability::None, ..Options::default() };
    let options = SalvageOptions { target, ..SalvageOptions::default() };
    if let Some(sim) = sim {
        sim.set_read_only(dir, true);
    }
    let report = tierkv::salvage_on(storage, dir, to, options);
    if let Some(sim) = sim {
        sim.set_read_only(dir, false);
    }
    report.expect("salvage")
}

/// Checks the salvaged store in `to` against what `get` read and the report's claims.
fn check_salvage(
    storage: &Storage,
    to: &Path,
    report: &SalvageReport,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    readable: &Readable,
    label: &str,
    tally: &mut Tally,
) {
    let verbose = std::env::var("TIERKV_CORRUPTION_DEBUG").is_ok();
    if verbose {
        println!("{label}: salvage:\n{report}");
    }
    let options = Options { read_only: true, cache_size: 2 << 20, ..Options::default() };
    let db = Db::open_on(storage, to, options).expect("the salvaged store opens");
    let verify = db.verify().expect("verify the salvaged store");
    assert!(verify.is_clean(), "{label}: the salvaged store is damaged: {:?}", verify.problems);
    let salvaged: BTreeMap<Vec<u8>, Vec<u8>> =
        db.range(..).map(|entry| entry.expect("a salvaged entry")).collect();
    db.close().expect("close the salvaged store");
    for (key, value) in readable {
        let copied = salvaged.get(key);
        assert!(
            copied == Some(value),
            "{label}: get read key {} but the salvage {}\n{report}",
            String::from_utf8_lossy(key),
            if copied.is_some() { "copied another value" } else { "lost it" }
        );
    }
    for (key, value) in &salvaged {
        if expected.get(key) == Some(value) {
            tally.salvage_beyond_get += u64::from(!readable.contains_key(key));
            continue;
        }
        assert!(
            report.covers(key),
            "{label}: the salvage copied key {} {} without saying it may be out of date\n{report}",
            String::from_utf8_lossy(key),
            if expected.contains_key(key) { "with a wrong value" } else { "that was deleted" }
        );
        tally.salvage_doubtful_wrong += 1;
    }
    for key in expected.keys().filter(|key| !salvaged.contains_key(*key)) {
        assert!(
            report.covers(key),
            "{label}: the salvage lost key {} without saying so\n{report}",
            String::from_utf8_lossy(key)
        );
        tally.salvage_missing += 1;
    }
    tally.salvages += 1;
    tally.salvage_complete += u64::from(report.is_complete());
    if report.is_complete() {
        assert_eq!(&salvaged, expected, "{label}: a complete salvage that is not the store");
    }
}

/// Opens the damaged store and reads everything; panics (with `label`) on a promise broken.
/// Returns what `get` read.
fn examine(
    storage: &Storage,
    dir: &Path,
    read_method: AccessMethod,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    label: &str,
    tally: &mut Tally,
) -> Readable {
    tally.trials += 1;
    let mut readable = Readable::new();
    let db = match Db::open_on(storage, dir, options(read_method)) {
        Ok(db) => db,
        Err(error) => {
            if std::env::var("TIERKV_CORRUPTION_DEBUG").is_ok() {
                println!("{label}: open refused: {error}");
            }
            assert_locates(&error.to_string(), label);
            tally.open_refused += 1;
            return readable;
        }
    };
    let mut failed = 0u64;
    for (key, value) in expected {
        match db.get(key) {
            Ok(Some(found)) => {
                assert!(
                    &found == value,
                    "{label}: key {} read back wrong ({} bytes, {} expected)",
                    String::from_utf8_lossy(key),
                    found.len(),
                    value.len()
                );
                readable.insert(key.clone(), found);
            }
            Ok(None) => {
                panic!("{label}: key {} vanished without an error", String::from_utf8_lossy(key))
            }
            Err(error) => {
                assert_locates(&error.to_string(), label);
                failed += 1;
            }
        }
    }
    let mut scanned = 0usize;
    for entry in db.range(..) {
        match entry {
            Ok((key, value)) => {
                assert_eq!(expected.get(&key[..]), Some(&value), "{label}: the scan read wrong");
                scanned += 1;
            }
            Err(error) => {
                assert_locates(&error.to_string(), label);
                failed += 1;
                break;
            }
        }
    }
    let clean_scan = failed == 0 && scanned == expected.len();
    assert!(failed > 0 || clean_scan, "{label}: the scan saw {scanned} of {} keys", expected.len());
    match db.verify() {
        Ok(report) if report.is_clean() => {
            assert_eq!(failed, 0, "{label}: reads failed, and verify found nothing");
            tally.unnoticed += 1;
        }
        Ok(report) => {
            assert!(report.problems.iter().all(|p| !p.is_empty()));
            tally.verify_found += 1;
        }
        Err(error) => {
            assert_locates(&error.to_string(), label);
            tally.verify_found += 1;
        }
    }
    tally.reads_failed += u64::from(failed > 0);
    readable
}

/// A read error on damage names a file and an offset (or a page, for a page that checks but
/// does not decode).
fn assert_locates(message: &str, label: &str) {
    let located = (message.contains('/') && message.contains("offset")) || message.contains("page");
    assert!(located, "{label}: an error that does not say where: {message}");
}

/// Salvage every this many trials (a salvage makes a store and opens it again: it costs
/// about seven trials).
fn salvage_every() -> u64 {
    std::env::var("TIERKV_CORRUPTION_SALVAGE_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&every| every > 0)
        .unwrap_or(8)
}

fn flips_wanted() -> u64 {
    std::env::var("TIERKV_CORRUPTION_FLIPS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

#[test]
fn single_byte_flips_and_truncations_never_return_wrong_data() {
    let base = SimFs::new();
    let storage = Storage::Sim(base.clone());
    let dir = Path::new("/db");
    let expected = build(&storage, dir, AccessMethod::Syscall);
    let files: Vec<(PathBuf, u64)> = base
        .snapshot()
        .files
        .into_iter()
        .filter(|(_, bytes)| !bytes.is_empty())
        .map(|(path, bytes)| (path, bytes.len() as u64))
        .collect();
    assert!(files.len() >= 4, "{files:?}");
    let seed = tierkv_io::sim::seed_from_env(0x00c0_4405);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut tally = Tally::default();
    let ops = base.op_count();
    let wanted = flips_wanted();
    let salvage_every = salvage_every();
    let mut trial = 0u64;
    while tally.flips < wanted {
        trial += 1;
        let image = base.crash_image(ops, CrashModel::KeepAll, 0);
        let damaged = Storage::Sim(image);
        // Any file, then any byte of it: small files (maps, the meta block's segment
        // headers, log headers) are hit as often as large ones.
        let (path, len) = &files[rng.usize(..files.len())];
        let file = damaged.open(path, &OpenOptions::new(AccessMethod::Syscall)).expect("open");
        // Half the flips land anywhere in the file, half where it holds data (before its
        // preallocated zeros).
        let used = base.read_file(path).expect("read").iter().rposition(|&b| b != 0).unwrap_or(0);
        let label = if rng.u32(0..10) == 0 {
            let cut = rng.u64(..*len);
            file.set_len(cut).expect("truncate");
            tally.truncations += 1;
            format!("seed {seed:#x} trial {trial}: {} cut to {cut} of {len} bytes", path.display())
        } else {
            tally.flips += 1;
            let at = if rng.bool() { rng.u64(..*len) } else { rng.u64(..=used as u64) };
            let mut byte = [0u8];
            file.read_at(&mut byte, at).expect("read");
            let flip = rng.u8(1..=255);
            file.write_at(&[byte[0] ^ flip], at).expect("write");
            format!(
                "seed {seed:#x} trial {trial}: {} byte {at} of {len} ^ {flip:#04x}",
                path.display()
            )
        };
        drop(file);
        let Storage::Sim(sim) = &damaged else { unreachable!("a simulated image") };
        let to = Path::new("/salvaged");
        let report =
            trial.is_multiple_of(salvage_every).then(|| salvage(&damaged, Some(sim), dir, to));
        let readable = examine(&damaged, dir, AccessMethod::Syscall, &expected, &label, &mut tally);
        if let Some(report) = report {
            check_salvage(&damaged, to, &report, &expected, &readable, &label, &mut tally);
        }
    }
    println!("{tally:?}");
    assert_eq!(tally.trials, tally.flips + tally.truncations);
    // The sweep reached the data: reads met damage, and opens refused some.
    assert!(tally.reads_failed > 0 && tally.open_refused > 0, "{tally:?}");
}

/// Real files read through a mapping: a block file cut short under a mapping would raise
/// SIGBUS; the engine reads the file's real size first, and the signal handler stands guard.
#[test]
fn damaged_real_files_read_through_a_mapping_never_crash() {
    let base = tempfile::tempdir().expect("dir");
    let store = base.path().join("db");
    let expected = build(&Storage::Os, &store, AccessMethod::Mmap);
    let mut files = Vec::new();
    let mut stack = vec![store.clone()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("list") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::metadata(&path).expect("stat").len() > 0 {
                files.push(path);
            }
        }
    }
    let mut rng = fastrand::Rng::with_seed(tierkv_io::sim::seed_from_env(0x0515_7b05));
    let mut tally = Tally::default();
    for trial in 0..40 {
        let copy = base.path().join(format!("copy{trial}"));
        copy_tree(&store, &copy);
        let original = &files[rng.usize(..files.len())];
        let path = copy.join(original.strip_prefix(&store).expect("inside"));
        let len = std::fs::metadata(&path).expect("stat").len();
        let mut bytes = std::fs::read(&path).expect("read");
        let label = if trial % 2 == 0 {
            let cut = rng.u64(..len) as usize;
            bytes.truncate(cut);
            tally.truncations += 1;
            format!("trial {trial}: {} cut to {cut} of {len}", path.display())
        } else {
            let at = rng.usize(..bytes.len());
            bytes[at] ^= 0x5a;
            tally.flips += 1;
            format!("trial {trial}: {} byte {at} ^ 0x5a", path.display())
        };
        std::fs::write(&path, &bytes).expect("write");
        let to = base.path().join(format!("salvaged{trial}"));
        let report = salvage(&Storage::Os, None, &copy, &to);
        let readable =
            examine(&Storage::Os, &copy, AccessMethod::Mmap, &expected, &label, &mut tally);
        check_salvage(&Storage::Os, &to, &report, &expected, &readable, &label, &mut tally);
        std::fs::remove_dir_all(&copy).expect("remove");
        std::fs::remove_dir_all(&to).expect("remove");
    }
    println!("{tally:?}");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
