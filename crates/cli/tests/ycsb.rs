//! `tierkv bench ycsb` as a user runs it: the binary, each engine in a child process of its
//! own, the report read back from its JSON.

use std::process::Command;

/// Runs `tierkv bench ycsb` on a tiny store of `records` with 2 client threads and `extra`
/// options; returns the exit status's success, stdout and the JSON report.
fn ycsb(records: u64, extra: &[&str]) -> (bool, String, serde_json::Value) {
    ycsb_with_threads(records, "2", extra)
}

fn ycsb_with_threads(
    records: u64,
    threads: &str,
    extra: &[&str],
) -> (bool, String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("dir");
    let json = dir.path().join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(["bench", "ycsb", "--records", &records.to_string()])
        .args(["--operations", "200", "--warmup", "50"])
        .args(["--threads", threads, "--workloads", "a,e", "--durability", "none", "--quiet"])
        .args(["--cache-size", "8m", "--path"])
        .arg(dir.path())
        .arg("--report")
        .arg(&json)
        .args(extra)
        .output()
        .expect("run tierkv");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let report = serde_json::from_str(&text).expect("json");
    // Every store's directory is gone; only the report is left.
    let left: Vec<_> =
        std::fs::read_dir(dir.path()).expect("list").map(|e| e.expect("entry").path()).collect();
    assert_eq!(left, [json], "{stdout}");
    (output.status.success(), stdout, report)
}

/// The phases of the report's only engine, by name, with their operation counts.
fn phases(report: &serde_json::Value) -> Vec<(String, u64)> {
    report["engines"][0]["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|phase| {
            (
                phase["phase"].as_str().expect("name").into(),
                phase["operations"].as_u64().expect("count"),
            )
        })
        .collect()
}

#[test]
fn an_isolated_engine_runs_in_a_child_and_its_table_prints() {
    let (ok, stdout, report) = ycsb(300, &["--isolate"]);
    assert!(ok, "{stdout}");
    assert_eq!(report["isolation"], "one process per engine");
    assert_eq!(report["engines"].as_array().expect("engines").len(), 1);
    assert_eq!(report["engines"][0]["engine"], "tierkv");
    assert!(report["engines"][0]["failure"].is_null());
    // The child's report carried the engine's version to the parent's.
    let version = format!("tierkv {}", env!("CARGO_PKG_VERSION"));
    assert_eq!(report["engines"][0]["version"], version.as_str());
    assert!(stdout.contains(&format!("\ntierkv: {version}; ")), "{stdout}");
    // No cgroup, so no group peak; the child's own anonymous memory was sampled.
    assert!(report["engines"][0]["peak_memory_bytes"].is_null());
    assert!(report["engines"][0]["peak_anon_bytes"].as_u64().expect("sampled") > 0);
    assert!(stdout.contains("peak anonymous memory"), "{stdout}");
    // The load inserts every record; each workload runs its 200 requests.
    assert_eq!(phases(&report), [("load".into(), 300), ("a".into(), 200), ("e".into(), 200)]);
    // The parent printed the child's table: a row per phase under the engine's name.
    let table = &stdout[stdout.find("\ntierkv: ").expect("the engine's heading")..];
    for phase in ["load", "a ", "e "] {
        assert!(table.lines().any(|line| line.starts_with(phase)), "{phase}: {stdout}");
    }
}

/// With a memory limit, the child runs in a cgroup where this machine allows one, and its
/// peak and its own (anonymous) peak are recorded; elsewhere the engine is reported failed
/// with the reason, and the command says so in its exit status.
#[test]
fn a_memory_limit_records_the_engine_peak_or_why_it_could_not() {
    // Enough records for the child to live through several of the parent's samples.
    let (ok, stdout, report) = ycsb(3000, &["--memory-limit", "256m"]);
    let run = &report["engines"][0];
    match run["failure"].as_str() {
        None => {
            assert!(ok, "{stdout}");
            assert_eq!(phases(&report).len(), 3);
            let peak = run["peak_memory_bytes"].as_u64().expect("peak");
            let anon = run["peak_anon_bytes"].as_u64().expect("anonymous peak");
            // The engine's process holds some memory of its own, within the group's peak and
            // the limit.
            assert!(anon > 0 && anon <= peak && peak <= 256 << 20, "{anon} {peak}");
            assert!(stdout.contains("MiB its own, the rest page cache"), "{stdout}");
        }
        Some(failure) => {
            assert!(!ok);
            assert!(failure.contains("cgroup"), "{failure}");
            assert!(stdout.contains(&format!("failed: {failure}")), "{stdout}");
        }
    }
}

/// A list of thread counts runs every engine at each, each run in a child of its own here,
/// and the report records the counts and each run's.
#[test]
fn every_engine_runs_at_every_thread_count() {
    let (ok, stdout, report) = ycsb_with_threads(300, "1,3", &["--isolate"]);
    assert!(ok, "{stdout}");
    assert_eq!(report["threads"], serde_json::json!([1, 3]));
    let runs = report["engines"].as_array().expect("engines");
    let counts: Vec<u64> =
        runs.iter().map(|run| run["threads"].as_u64().expect("threads")).collect();
    assert_eq!(counts, [1, 3]);
    for run in runs {
        assert!(run["failure"].is_null(), "{run}");
        assert_eq!(phases(&serde_json::json!({"engines": [run]}))[0], ("load".into(), 300));
    }
    assert!(stdout.contains("tierkv ×1: ") && stdout.contains("tierkv ×3: "), "{stdout}");
}
