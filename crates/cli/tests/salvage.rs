//! `tierkv salvage` as a user meets it: on a store with a damaged leaf it copies the rest
//! into a new store, names the lost key range, exits with 3, and the new store opens and
//! passes `verify`; the same report as JSON; an intact store salvages completely (exit 0);
//! a damaged identity file, which every other command refuses, costs nothing; and a
//! salvage never writes over a store.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;
use tierkv::{Db, Durability, Options, WriteBatch};

fn tierkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv")).args(args).output().expect("run tierkv")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

/// A closed store of 3,000 keys written in batches of 100, in small log segments, so that
/// the checkpoint's truncation leaves the first batches' records out of the log; reopened
/// and closed twice, so that the block store's map checkpoint covers every block (its
/// recovery reads none of them).
fn make_store(dir: &Path) {
    let options = Options {
        cache_size: 4 << 20,
        max_page_bytes: Some(1024),
        log_segment_bytes: 64 << 10,
        block_segment_bytes: 256 << 10,
        durability: Durability::None,
        ..Options::default()
    };
    let db = Db::open(dir, options.clone()).expect("open");
    for batch_start in (0..3000u32).step_by(100) {
        let mut batch = WriteBatch::new();
        for i in batch_start..batch_start + 100 {
            batch.put(key(i), format!("value {i} {}", "v".repeat(i as usize % 30)));
        }
        db.write(&batch).expect("write");
    }
    db.close().expect("close");
    for _ in 0..2 {
        Db::open(dir, options.clone()).expect("reopen").close().expect("close");
    }
}

/// Flips a byte of every copy of `needle` in the store's block files, so that every copy
/// of the leaf holding it fails its checksum.
fn damage_every_copy_of(dir: &Path, needle: &[u8]) {
    let mut damaged = 0;
    for entry in std::fs::read_dir(dir.join("blocks")).expect("blocks") {
        let file = entry.expect("entry").path();
        if file.extension().is_none_or(|e| e != "blk") {
            continue;
        }
        let mut bytes = std::fs::read(&file).expect("read");
        let mut at = 0;
        while let Some(found) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
            bytes[at + found + 3] ^= 0x20;
            damaged += 1;
            at += found + needle.len();
        }
        std::fs::write(&file, &bytes).expect("write");
    }
    assert!(damaged > 0, "no copy of {}", String::from_utf8_lossy(needle));
}

fn store_with_a_damaged_leaf(root: &Path) -> PathBuf {
    let dir = root.join("db");
    make_store(&dir);
    // The leaf keeps key00010's value whole (its key is a suffix after the page's prefix).
    damage_every_copy_of(&dir, format!("value 10 {}", "v".repeat(10)).as_bytes());
    dir
}

#[test]
fn a_damaged_leaf_is_reported_lost_and_the_rest_is_copied_into_a_store_that_verifies() {
    let root = tempfile::tempdir().expect("dir");
    let dir = store_with_a_damaged_leaf(root.path());
    assert_eq!(tierkv(&["verify", "--db", path(&dir)]).status.code(), Some(3));
    let new = root.path().join("new");
    let output = tierkv(&["salvage", "--db", path(&dir), "--to", path(&new)]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("read through the block map"), "{text}");
    let lost: Vec<&str> = text.lines().filter(|line| line.starts_with("LOST keys [")).collect();
    assert_eq!(lost.len(), 1, "{text}");
    assert!(lost[0].contains("cannot be read") && lost[0].contains("checksum"), "{text}");
    assert!(text.ends_with("INCOMPLETE: see LOST and DOUBTFUL above\n"), "{text}");
    // The new store opens, verifies, lacks the lost key and holds the others.
    let verify = tierkv(&["verify", "--db", path(&new)]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    assert_eq!(tierkv(&["get", "--db", path(&new), &key(10)]).status.code(), Some(1));
    let get = tierkv(&["get", "--db", path(&new), &key(2500)]);
    assert_eq!(stdout(&get), format!("value 2500 {}\n", "v".repeat(2500 % 30)));
    // The damaged store was only read: it is as damaged as before.
    assert_eq!(tierkv(&["verify", "--db", path(&dir)]).status.code(), Some(3));
}

#[test]
fn the_report_as_json_names_the_lost_range_and_counts_what_was_copied() {
    let root = tempfile::tempdir().expect("dir");
    let dir = store_with_a_damaged_leaf(root.path());
    let new = root.path().join("new");
    let output = tierkv(&["salvage", "--db", path(&dir), "--to", path(&new), "--json"]);
    assert_eq!(output.status.code(), Some(3));
    let report: Json = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["complete"], false);
    assert_eq!(report["scanned_blocks"], false);
    let lost = report["lost"].as_array().expect("lost");
    assert_eq!(lost.len(), 1, "{report}");
    let (low, high) = (&lost[0]["keys"]["low"], &lost[0]["keys"]["high"]);
    let target = key(10);
    assert!(low.is_null() || low.as_str().is_some_and(|low| low <= target.as_str()), "{low}");
    assert!(high.as_str().is_some_and(|high| target.as_str() < high), "{high}");
    let copied = report["tree_entries"].as_u64().expect("tree entries")
        + report["loose_entries"].as_u64().expect("loose entries")
        + report["log"]["filled"].as_u64().unwrap_or(0);
    let stat = tierkv(&["stat", "--db", path(&new), "--json"]);
    let stat: Json = serde_json::from_slice(&stat.stdout).expect("stat JSON");
    assert_eq!(stat["entries"].as_u64(), Some(copied));
    assert!(copied < 3000 && copied > 2900, "{copied}");
    assert!(report["doubtful"].as_array().is_some_and(Vec::is_empty), "{report}");
}

#[test]
fn an_intact_store_salvages_completely_and_a_store_is_never_written_over() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("db");
    make_store(&dir);
    let new = root.path().join("new");
    let output = tierkv(&["salvage", "--db", path(&dir), "--to", path(&new)]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.ends_with("complete: every entry was copied\n"), "{text}");
    let dump = |dir: &Path| stdout(&tierkv(&["dump", "--db", path(dir)]));
    assert_eq!(dump(&new), dump(&dir));
    // Into a store (the new one, or the damaged one itself): refused, nothing written.
    for target in [&new, &dir] {
        let refused = tierkv(&["salvage", "--db", path(&dir), "--to", path(target)]);
        assert_eq!(refused.status.code(), Some(6), "{}", stdout(&refused));
        assert!(String::from_utf8_lossy(&refused.stderr).contains("already exists"));
    }
    assert_eq!(dump(&new), dump(&dir));
}

#[test]
fn a_damaged_identity_file_that_every_other_command_refuses_costs_the_salvage_nothing() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("db");
    make_store(&dir);
    let identity = dir.join(tierkv::IDENTITY_FILE);
    let mut bytes = std::fs::read(&identity).expect("identity");
    bytes[20] ^= 0x01;
    std::fs::write(&identity, &bytes).expect("damage");
    assert_eq!(tierkv(&["get", "--db", path(&dir), &key(1)]).status.code(), Some(3));
    let new = root.path().join("new");
    let output = tierkv(&["salvage", "--db", path(&dir), "--to", path(&new), "--json"]);
    let report: Json = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert_eq!(report["complete"], true);
    let problems = report["problems"].as_array().expect("problems");
    assert!(problems[0].as_str().is_some_and(|p| p.starts_with("the identity file")), "{report}");
    assert_eq!(report["tree_entries"], 3000);
    assert_eq!(tierkv(&["verify", "--db", path(&new)]).status.code(), Some(0));
}
