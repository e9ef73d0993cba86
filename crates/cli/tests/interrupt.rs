//! Ctrl-C in the middle of a run: the process stops its children, removes its scratch
//! directories (and so theirs, inside them) and exits with 130, as a shell reports SIGINT.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The directories under `dir`, `depth` levels down.
fn dirs_at(dir: &Path, depth: usize) -> Vec<std::path::PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..depth {
        level = level
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .collect();
    }
    level
}

#[test]
fn ctrl_c_removes_the_scratch_directories_of_the_run_and_its_children() {
    let dir = tempfile::tempdir().expect("dir");
    // Enough records that the load is still running when the signal comes.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(["bench", "ycsb", "--records", "50000000", "--isolate", "--quiet"])
        .args(["--durability", "none", "--cache-size", "8m", "--path"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    // The parent's scratch directory, the engine's directory in it, and the child's own
    // scratch directory in that: the child is running.
    let started = Instant::now();
    while dirs_at(dir.path(), 3).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(120), "the child never made its store");
        assert!(child.try_wait().expect("wait").is_none(), "the run ended before the signal");
        std::thread::sleep(Duration::from_millis(20));
    }
    let signalled = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    assert!(signalled.expect("kill").success());
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let left: Vec<_> =
        std::fs::read_dir(dir.path()).expect("list").flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
