//! `tierkv stat` with a tier: the tier's counters, as the command's own reads (its verify)
//! left them, in the text and in the JSON.

use std::process::Command;

fn tierkv(args: &[&str], db: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv")).args(args).arg("--db").arg(db).output().expect("run")
}

#[test]
fn stat_reports_the_tier() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("db");
    let input = dir.path().join("data.tsv");
    let lines: String = (0..20_000).map(|i| format!("key{i:06}\t{}\n", "v".repeat(200))).collect();
    std::fs::write(&input, lines).expect("write");
    let loaded =
        tierkv(&["load", input.to_str().expect("utf-8"), "--cache-size", "2m", "--quiet"], &db);
    assert!(loaded.status.success(), "{}", String::from_utf8_lossy(&loaded.stderr));
    let text = tierkv(
        &["stat", "--cache-size", "2m", "--tier-size", "4m", "--tier-max-overhead", "0"],
        &db,
    );
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    assert!(stdout.contains("tier: ") && stdout.contains("tier lookups: "), "{stdout}");
    assert!(stdout.contains("overhead bypass off"), "{stdout}");
    let json = tierkv(&["stat", "--cache-size", "2MiB", "--tier-size", "4096k", "--json"], &db);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let tier = &report["tier"];
    // The verify read every page past a 2 MiB cache: each was looked up in the tier.
    assert!(tier["lookups"].as_u64().expect("lookups") > 0, "{tier}");
    assert_eq!(tier["overhead_bypass"], true);
    assert_eq!(tier["capacity_bytes"].as_u64(), Some(4 << 20));
    // Without --tier-size there is none.
    let plain = tierkv(&["stat", "--json"], &db);
    let report: serde_json::Value = serde_json::from_slice(&plain.stdout).expect("json");
    assert!(report["tier"].is_null());
}

/// The store's lock holds across processes: while this process has the store open, the
/// `tierkv` tool cannot open it, and says why; once it is closed, the tool can.
#[test]
fn another_process_cannot_open_a_store_this_one_has_open() {
    let dir = tempfile::tempdir().expect("dir");
    let db_dir = dir.path().join("db");
    let db = tierkv::Db::open(&db_dir, tierkv::Options::default()).expect("open");
    db.put(b"k", b"v").expect("put");
    let refused = tierkv(&["get", "k"], &db_dir);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("already open"), "{stderr}");
    db.close().expect("close");
    let read = tierkv(&["get", "k"], &db_dir);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "v");
}
