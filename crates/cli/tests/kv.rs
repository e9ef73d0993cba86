//! The key-value commands as a user meets them: dump and load round-trip any bytes in every
//! format; a load checks a file before it writes, and from stdin says where it stopped and
//! goes on; keys and values in hex and from stdin; no store made where nobody asked for
//! one; the exit code of each kind of failure, and errors as JSON; the remembered log
//! directory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use tierkv::{Db, Options};

fn tierkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv")).args(args).output().expect("run tierkv")
}

fn tierkv_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tierkv");
    child.stdin.take().expect("stdin").write_all(stdin).expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A closed store holding `entries`.
fn make_store(dir: &Path, entries: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open(dir, Options { cache_size: 8 << 20, ..Options::default() }).expect("open");
    let mut batch = tierkv::WriteBatch::new();
    for (key, value) in entries {
        batch.put(key, value);
    }
    db.write(&batch).expect("write");
    db.close().expect("close");
}

fn contents(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let options = Options { read_only: true, cache_size: 8 << 20, ..Options::default() };
    let db = Db::open(dir, options).expect("open read-only");
    db.range(..).map(|entry| entry.expect("entry")).collect()
}

/// Bytes that stress the formats: separators, escapes, invalid UTF-8, UTF-8 text.
fn tricky_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let pieces = prop_oneof![
        Just(b"\t".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\\".to_vec()),
        Just(b"\\x00".to_vec()),
        Just(b"\\t".to_vec()),
        Just(vec![0xff, 0xfe]),
        Just(vec![0]),
        Just("grüße".as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 1..16),
    ];
    proptest::collection::vec(pieces, 0..8).prop_map(move |parts| {
        let mut bytes = parts.concat();
        bytes.truncate(max);
        bytes
    })
}

/// `tierkv::Options::default().max_key_bytes()`: 4,096 bytes with 16 KiB pages.
const MAX_KEY: usize = 4096;

fn entries() -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
    let key = prop_oneof![
        4 => tricky_bytes(200).prop_filter("keys are not empty", |k| !k.is_empty()),
        // The longest key a store of the default page size takes.
        1 => proptest::collection::vec(any::<u8>(), MAX_KEY..=MAX_KEY),
    ];
    let value = prop_oneof![
        4 => tricky_bytes(300),
        1 => Just(Vec::new()),
        1 => proptest::collection::vec(any::<u8>(), 2049..6000),
    ];
    proptest::collection::btree_map(key, value, 1..24)
}

#[test]
fn the_longest_key_here_is_the_limit_of_the_default_page_size() {
    assert_eq!(tierkv::Options::default().max_key_bytes(), MAX_KEY);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Random entries → dump → load into a new store → dump again: the two dumps are
    /// byte-identical and the stores hold the same entries, in every format.
    #[test]
    fn dump_then_load_round_trips_any_bytes(entries in entries()) {
        let root = tempfile::tempdir().expect("dir");
        let first = root.path().join("first");
        make_store(&first, &entries);
        for format in ["tsv", "hex", "jsonl"] {
            let dump = tierkv(&["dump", "--db", path(&first), "--format", format]);
            prop_assert!(dump.status.success(), "{}", stderr(&dump));
            let file = root.path().join(format!("dump.{format}"));
            std::fs::write(&file, &dump.stdout).expect("write the dump");
            let second = root.path().join(format!("second-{format}"));
            let load = tierkv(&["load", "--db", path(&second), path(&file), "--format", format, "--quiet"]);
            prop_assert!(load.status.success(), "{format}: {}", stderr(&load));
            let again = tierkv(&["dump", "--db", path(&second), "--format", format]);
            prop_assert!(again.stdout == dump.stdout, "{}: the second dump differs", format);
            prop_assert_eq!(contents(&second), entries.clone());
        }
    }
}

#[test]
fn a_bad_line_in_a_file_loads_nothing_and_from_stdin_says_where_to_go_on() {
    let root = tempfile::tempdir().expect("dir");
    let db = root.path().join("db");
    let mut input: Vec<u8> =
        (0..25).flat_map(|i| format!("key{i:02}\tvalue\n").into_bytes()).collect();
    input.extend_from_slice(b"no tab on this line\n");
    input.extend_from_slice(b"after\tthe bad line\n");
    let file = root.path().join("in.tsv");
    std::fs::write(&file, &input).expect("write");
    let load = tierkv(&["load", "--db", path(&db), path(&file), "--batch", "10", "--quiet"]);
    assert_eq!(load.status.code(), Some(2), "{}", stderr(&load));
    assert!(stderr(&load).contains("line 26") && stderr(&load).contains("nothing was loaded"));
    assert!(!db.exists(), "a refused load made a store");

    let load =
        tierkv_with_stdin(&["load", "--db", path(&db), "-", "--batch", "10", "--quiet"], &input);
    assert_eq!(load.status.code(), Some(2));
    let message = stderr(&load);
    assert!(message.contains("25 entries") && message.contains("--skip-lines 25"), "{message}");
    assert_eq!(contents(&db).len(), 25, "every entry before the bad line is there");
    let mended = input.replace_line(25, b"mended\tline\n");
    let load = tierkv_with_stdin(
        &["load", "--db", path(&db), "-", "--skip-lines", "25", "--quiet"],
        &mended,
    );
    assert!(load.status.success(), "{}", stderr(&load));
    let loaded = contents(&db);
    assert_eq!(loaded.len(), 27);
    assert_eq!(loaded.get(&b"after"[..]).map(Vec::as_slice), Some(&b"the bad line"[..]));
}

trait ReplaceLine {
    fn replace_line(&self, index: usize, with: &[u8]) -> Vec<u8>;
}

impl ReplaceLine for Vec<u8> {
    fn replace_line(&self, index: usize, with: &[u8]) -> Vec<u8> {
        let mut lines: Vec<&[u8]> = self.split_inclusive(|&b| b == b'\n').collect();
        lines[index] = with;
        lines.concat()
    }
}

#[test]
fn keys_and_values_in_hex_and_from_stdin() {
    let root = tempfile::tempdir().expect("dir");
    let db = root.path().join("db");
    let put = tierkv(&["put", "--db", path(&db), "--hex", "fffe01", "00ff0a"]);
    assert!(put.status.success(), "{}", stderr(&put));
    let value = b"line one\nline two\r\n\xff";
    let put = tierkv_with_stdin(&["put", "--db", path(&db), "from-stdin", "--stdin"], value);
    assert!(put.status.success(), "{}", stderr(&put));
    let get = tierkv(&["get", "--db", path(&db), "--hex", "fffe01"]);
    assert_eq!(get.stdout, b"00ff0a\n");
    let get = tierkv(&["get", "--db", path(&db), "from-stdin", "--raw"]);
    assert_eq!(get.stdout, value);
    let get = tierkv(&["get", "--db", path(&db), "from-stdin"]);
    assert_eq!(get.stdout, b"line one\\nline two\\r\\n\\xff\n");
    let bad = tierkv(&["get", "--db", path(&db), "--hex", "xyz"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

#[test]
fn no_store_is_made_where_nobody_asked_for_one() {
    let root = tempfile::tempdir().expect("dir");
    let no_db = tierkv(&["put", "k", "v"]);
    assert_eq!(no_db.status.code(), Some(2), "--db is required: {}", stderr(&no_db));
    let deep = root.path().join("no/such/dir");
    let put = tierkv(&["put", "--db", path(&deep), "k", "v"]);
    assert_eq!(put.status.code(), Some(6), "{}", stderr(&put));
    assert!(!root.path().join("no").exists());
    let app = root.path().join("app");
    std::fs::create_dir(&app).expect("mkdir");
    std::fs::write(app.join("app.sqlite"), b"SQLite format 3\0").expect("write");
    let put = tierkv(&["put", "--db", path(&app), "k", "v"]);
    assert_eq!(put.status.code(), Some(6), "{}", stderr(&put));
    assert!(stderr(&put).contains("app.sqlite"));
    assert_eq!(std::fs::read_dir(&app).expect("list").count(), 1, "files appeared beside it");
    let new = root.path().join("new");
    let empty_key = tierkv(&["put", "--db", path(&new), "", "v"]);
    assert_eq!(empty_key.status.code(), Some(2), "{}", stderr(&empty_key));
    assert!(!new.exists(), "a refused put made a store");
    let get = tierkv(&["get", "--db", path(&new), "k"]);
    assert_eq!(get.status.code(), Some(6));
    assert!(!new.exists(), "a read made a store");
}

#[test]
fn each_kind_of_failure_has_its_exit_code_and_a_json_error() {
    let root = tempfile::tempdir().expect("dir");
    let db = root.path().join("db");
    assert!(tierkv(&["put", "--db", path(&db), "k", "v"]).status.success());
    let code = |args: &[&str]| {
        let text = tierkv(args);
        let mut json_args = args.to_vec();
        json_args.push("--json");
        let json = tierkv(&json_args);
        assert_eq!(text.status.code(), json.status.code(), "{args:?}");
        (text.status.code(), json)
    };
    // Not found.
    let (status, json) = code(&["get", "--db", path(&db), "missing"]);
    assert_eq!(status, Some(1));
    let reply: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert!(reply["value"].is_null());
    let expect_error = |args: &[&str], exit: i32, kind: &str| {
        let (status, json) = code(args);
        assert_eq!(status, Some(exit), "{args:?}");
        let reply: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {:?}", json.stdout));
        assert_eq!(reply["error"]["exit_code"], exit, "{reply}");
        assert_eq!(reply["error"]["kind"], kind, "{reply}");
        assert!(!reply["error"]["message"].as_str().expect("message").is_empty());
    };
    // Usage: a bad hex key; an option the store disagrees with.
    expect_error(&["get", "--db", path(&db), "--hex", "0"], 2, "usage");
    expect_error(
        &["put", "--db", path(&db), "--log-backend", "pmem", "k", "v"],
        2,
        "invalid-input",
    );
    // No store.
    expect_error(&["get", "--db", path(&root.path().join("none")), "k"], 6, "no-store");
    // Busy: this process holds the store open for writing.
    let held = Db::open(&db, Options { cache_size: 8 << 20, ..Options::default() }).expect("open");
    expect_error(&["get", "--db", path(&db), "k"], 4, "busy");
    expect_error(&["put", "--db", path(&db), "k", "v"], 4, "busy");
    held.close().expect("close");
    // Damaged: the identity file's checksum.
    let identity = db.join("TIERKV");
    let good = std::fs::read(&identity).expect("read");
    let mut bad = good.clone();
    bad[24] ^= 0x10;
    std::fs::write(&identity, &bad).expect("damage");
    expect_error(&["get", "--db", path(&db), "k"], 3, "corruption");
    std::fs::write(&identity, &good).expect("mend");
    assert!(tierkv(&["get", "--db", path(&db), "k"]).status.success());
}

#[test]
fn the_store_remembers_its_log_directory() {
    let root = tempfile::tempdir().expect("dir");
    let db = root.path().join("db");
    let log = root.path().join("log-elsewhere");
    let put = tierkv(&["put", "--db", path(&db), "--log-dir", path(&log), "k", "v"]);
    assert!(put.status.success(), "{}", stderr(&put));
    let get = tierkv(&["get", "--db", path(&db), "k"]);
    assert_eq!(get.stdout, b"v\n", "{}", stderr(&get));
    assert!(!db.join("log").exists());
    let other = root.path().join("other-log");
    let put = tierkv(&["put", "--db", path(&db), "--log-dir", path(&other), "k", "w"]);
    assert_eq!(put.status.code(), Some(2));
    assert!(stderr(&put).contains("log_dir"), "{}", stderr(&put));
    assert!(!other.exists(), "a refused open made a log");
    let get = tierkv(&["get", "--db", path(&db), "k"]);
    assert_eq!(get.stdout, b"v\n");
}

/// The writer `stat_counts_every_entry_after_a_kill` kills: 100 acknowledged `Sync` puts into
/// the store named by `TIERKV_TEST_WRITER`, then "ready" on stdout, then it waits to die.
#[test]
fn killed_writer() {
    let Ok(dir) = std::env::var("TIERKV_TEST_WRITER") else { return };
    let db = Db::open(&dir, Options { cache_size: 8 << 20, ..Options::default() }).expect("open");
    for i in 0..100u32 {
        db.put(format!("acked{i:03}"), format!("value {i}")).expect("put");
    }
    println!("TIERKV-WRITER-READY");
    std::io::stdout().flush().expect("flush");
    std::thread::sleep(std::time::Duration::from_secs(600));
}

/// A process killed (SIGKILL) after 100 acknowledged writes, none checkpointed: `stat` and
/// `verify` count all 100, every time, and `scan` prints them.
#[test]
fn stat_counts_every_entry_after_a_kill() {
    use std::io::BufRead;
    let root = tempfile::tempdir().expect("dir");
    let db = root.path().join("db");
    let mut writer = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "killed_writer", "--nocapture", "--test-threads", "1"])
        .env("TIERKV_TEST_WRITER", &db)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the writer");
    let stdout = writer.stdout.take().expect("stdout");
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .any(|line| line.is_ok_and(|l| l.contains("TIERKV-WRITER-READY")));
    assert!(ready, "the writer never said it was ready");
    writer.kill().expect("SIGKILL");
    writer.wait().expect("reap");
    for _ in 0..2 {
        let stat = tierkv(&["stat", "--db", path(&db), "--json"]);
        assert!(stat.status.success(), "{}", stderr(&stat));
        let report: serde_json::Value = serde_json::from_slice(&stat.stdout).expect("json");
        assert_eq!(report["entries"], 100, "{report}");
        // Nothing was checkpointed: the log's records were replayed onto the tree in memory.
        assert_eq!(report["checkpoint_sequence"], 0, "nothing was checkpointed: {report}");
        assert_eq!(report["tree_entries"], 100, "{report}");
        let amplification = report["space_amplification"].as_f64().expect("defined");
        assert!(amplification > 0.5 && amplification < 50.0, "{report}");
        let verify = tierkv(&["verify", "--db", path(&db), "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&verify.stdout).expect("json");
        assert_eq!(report["entries"], 100, "{report}");
    }
    let scan = tierkv(&["scan", "--db", path(&db)]);
    assert_eq!(scan.stdout.iter().filter(|&&b| b == b'\n').count(), 100);
}

/// A new store with five keys, closed, takes at most 4 MiB on disk (`du`): its files are
/// preallocated by the write rate, from small sizes.
#[test]
fn a_small_store_is_small_on_disk() {
    let root = tempfile::tempdir().expect("dir");
    let db = root.path().join("db");
    for i in 0..5 {
        let put = tierkv(&["put", "--db", path(&db), &format!("key{i}"), &format!("value {i}")]);
        assert!(put.status.success(), "{}", stderr(&put));
    }
    let du = Command::new("du").args(["-s", "--block-size=1"]).arg(&db).output().expect("du");
    let bytes: u64 = String::from_utf8_lossy(&du.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("du's figure");
    assert!(bytes <= 4 << 20, "a store with 5 keys takes {bytes} bytes");
    assert!(bytes > 0);
}
