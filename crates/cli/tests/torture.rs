//! `tierkv torture crash` with a few cycles, as CI runs it: children killed with SIGKILL
//! mid-workload, the store reopened and checked each time, with the log on disk and on
//! /dev/shm with the pmem backend. The full runs (hundreds of cycles) are documented in
//! docs/reliability.md.

use std::process::Command;

fn torture(dir: &std::path::Path, extra: &[&str]) -> (bool, String, serde_json::Value) {
    let json = dir.join("torture.json");
    let output = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(["torture", "crash", "--cycles", "4", "--writer-threads", "3", "--keys", "60"])
        .args(["--kill-min", "5ms", "--kill-max", "150ms", "--cache-size", "4m", "--quiet"])
        .args(extra)
        .arg("--path")
        .arg(dir.join("store"))
        .arg("--report")
        .arg(&json)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = std::fs::read_to_string(&json)
        .map(|text| serde_json::from_str(&text).expect("json"))
        .unwrap_or_else(|e| panic!("no report ({e}): {stdout}{stderr}"));
    (output.status.success(), stdout + &stderr, report)
}

fn assert_clean(ok: bool, output: &str, report: &serde_json::Value) {
    assert!(ok, "{output}");
    assert!(output.contains("violations: 0"), "{output}");
    let cycles = report["cycles"].as_array().expect("cycles");
    assert_eq!(cycles.len(), 4, "{output}");
    let acks: u64 = cycles.iter().map(|c| c["acks"].as_u64().expect("acks")).sum();
    assert!(acks > 0, "the children acknowledged nothing: {output}");
    for cycle in cycles {
        assert!(cycle["check"]["violations"].as_array().expect("violations").is_empty());
        assert_eq!(cycle["check"]["keys_checked"].as_u64(), Some(180));
    }
}

#[test]
fn kill_cycles_with_the_log_on_disk_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("dir");
    let (ok, output, report) = torture(dir.path(), &[]);
    assert_clean(ok, &output, &report);
    // A second run on the same store takes up what the first left, and checks it too.
    let (ok, output, _) = torture(dir.path(), &["--seed", "5"]);
    assert!(ok, "{output}");
}

#[test]
fn kill_cycles_with_a_pmem_log_on_shm_lose_nothing_acknowledged() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("no /dev/shm here: the pmem case is not run");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let log = tempfile::tempdir_in(shm).expect("shm dir");
    let log_dir = log.path().join("log");
    let log_arg = format!("--log-dir={}", log_dir.display());
    let (ok, output, report) =
        torture(dir.path(), &["--log-backend", "pmem", &log_arg, "--read-method", "mmap"]);
    assert_clean(ok, &output, &report);
    assert!(report["store"].as_str().expect("store").contains("pmem"), "{report}");
}

#[test]
fn a_store_of_another_workload_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let store = dir.path().join("store");
    let db = tierkv::Db::open(&store, tierkv::Options::default()).expect("open");
    db.put(b"not-ours", b"x").expect("put");
    db.close().expect("close");
    let output = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(["torture", "crash", "--cycles", "1", "--quiet", "--path"])
        .arg(&store)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("holds data this workload did not write"), "{stderr}");
}
