//! `tierkv bench tier` with tiny parameters, as a user runs it: every configuration in a
//! process of its own on a copy of one loaded store, the writers experiment, the report and
//! the plots.

use std::process::Command;

#[test]
fn the_tier_bench_runs_every_configuration_small() {
    let dir = tempfile::tempdir().expect("dir");
    let json = dir.path().join("tier.json");
    let plots = dir.path().join("plots");
    // Direct reads where the file system takes them, as the bench runs by default.
    let direct = tierkv_io::file_system_info(dir.path())
        .map(|info| info.direct_alignment.is_some())
        .unwrap_or(false);
    let output = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(["bench", "tier", "--records", "3000", "--cache-size", "4m", "--tier-size", "8m"])
        .args(["--workloads", "c,a", "--duration", "300ms", "--warmup", "300", "--quiet"])
        .args(["--warmup-first", "500"])
        .args(["--read-method", if direct { "direct" } else { "syscall" }])
        .args(["--readers", "2", "--writers", "0,1", "--writers-tier-size", "2m"])
        .args(["--writers-duration", "100ms", "--writers-backing"])
        .arg(dir.path())
        .arg("--path")
        .arg(dir.path())
        .arg("--report")
        .arg(&json)
        .arg("--plot")
        .arg(&plots)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {stderr}")),
    )
    .expect("json");
    let configs = report["configs"].as_array().expect("configs");
    let names: Vec<&str> = configs.iter().map(|c| c["config"].as_str().expect("name")).collect();
    assert_eq!(
        names,
        ["no-tier", "tier-no-bypass", "tier", "tier-exclusive", "all-dram", "os-cache"]
    );
    for config in configs {
        let name = config["config"].as_str().expect("name");
        let run = &config["run"];
        // Each copy was evicted from the OS page cache before its run (tmpfs keeps it all).
        let left = config["os_cache_left"].as_f64().expect("os_cache_left");
        assert!((0.0..=1.0).contains(&left), "{name}: {left}");
        if name == "os-cache" && !run["failure"].is_null() {
            // No writable cgroup hierarchy here: the reason is recorded and the exit fails.
            assert!(run["failure"].as_str().expect("why").contains("failed"), "{run}");
            assert!(!output.status.success());
            continue;
        }
        assert!(run["failure"].is_null(), "{name}: {run}");
        let phases = run["phases"].as_array().expect("phases");
        let letters: Vec<&str> = phases.iter().map(|p| p["phase"].as_str().expect("p")).collect();
        assert_eq!(letters, ["c", "a"], "{name}: no load, the copy holds the records");
        // The first workload's warm-up fills the caches once; the next has its own.
        assert_eq!(phases[0]["warmup_operations"].as_u64(), Some(500), "{name}");
        assert_eq!(phases[1]["warmup_operations"].as_u64(), Some(300), "{name}");
        let tier = &phases[1]["engine_counters"]["tier"];
        if name.starts_with("tier") {
            assert!(tier["lookups"].as_u64().expect("lookups") > 0, "{name}: {tier}");
            assert_eq!(tier["overhead_bypass"].as_bool(), Some(name == "tier"), "{name}");
            assert!(config["command"].as_str().expect("command").contains("--tier-size 8m"));
            // The exclusive tier is filled by demotions, and each hit takes its block out.
            let exclusive = name == "tier-exclusive";
            assert_eq!(tier["inserts_read"].as_u64() == Some(0), exclusive, "{name}: {tier}");
            if exclusive {
                assert!(tier["inserts_evict"].as_u64().expect("inserts") > 0, "{tier}");
                // The counters are read after the clients stop, but the checkpoint thread
                // may be in the middle of a lookup then: `get` counts the block taken
                // before the hit, so that one lookup can show as taken and not yet a hit.
                let (taken, hits) =
                    (tier["taken"].as_u64().expect("taken"), tier["hits"].as_u64().expect("hits"));
                assert!(hits <= taken && taken <= hits + 1, "{tier}");
            }
        } else {
            assert!(tier.is_null(), "{name}: {tier}");
        }
    }
    assert!(configs[4]["command"].as_str().expect("command").contains("--cache-size 12m"));
    assert!(configs[5]["command"].as_str().expect("command").contains("--memory-limit 140m"));
    assert_eq!(report["load"]["operations"].as_u64(), Some(3000));
    assert!(report["data_bytes"].as_u64().expect("bytes") > 0);
    let writers = report["writers"].as_array().expect("writers");
    assert_eq!(writers.len(), 4, "dram and optane, 0 and 1 writer");
    assert!(stdout.contains("readers of the tier against writers"), "{stdout}");
    assert!(plots.join("throughput.svg").exists() && plots.join("readers-vs-writers.svg").exists());
    // Only the report and the plots are left: the stores and their copies are gone.
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["plots", "tier.json"]);
}

/// With `--repeats`, every configuration runs once a round, each round in an order rotated by
/// one, and the table gives medians and the ratios measured in each round.
#[test]
fn rounds_rotate_the_order_and_the_table_gives_medians() {
    let dir = tempfile::tempdir().expect("dir");
    let json = dir.path().join("tier.json");
    let output = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(["bench", "tier", "--records", "2000", "--cache-size", "4m", "--tier-size", "8m"])
        .args(["--workloads", "c", "--duration", "0.2s", "--warmup", "100", "--quiet"])
        .args(["--warmup-first", "200", "--read-method", "syscall", "--readers", "0"])
        .args(["--configs", "no-tier,tier", "--repeats", "3", "--path"])
        .arg(dir.path())
        .arg("--report")
        .arg(&json)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json");
    let runs: Vec<(String, u64)> = report["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .map(|c| (c["config"].as_str().expect("name").into(), c["round"].as_u64().expect("round")))
        .collect();
    let expected = [("no-tier", 0), ("tier", 0), ("tier", 1), ("no-tier", 1), ("no-tier", 2)];
    for (run, (name, round)) in runs.iter().zip(expected) {
        assert_eq!((run.0.as_str(), run.1), (name, round), "{runs:?}");
    }
    assert_eq!(runs.len(), 6);
    assert!(stdout.contains("medians of 3 rounds"), "{stdout}");
    assert!(stdout.contains("ratio to no tier measured in each round"), "{stdout}");
}
