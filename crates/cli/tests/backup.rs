//! `tierkv backup` and `tierkv restore`, and a kill -9 loop of backups: each backup process
//! is killed with SIGKILL at a random moment (or finishes first); afterwards the source
//! holds everything it held and passes `verify`, and each copy either opens whole (what the
//! source holds) or refuses to open as a store.
//!
//! The loop runs 60 backups in CI; `TIERKV_BACKUP_KILLS=N` runs N.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn tierkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv")).args(args).output().expect("run tierkv")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A source store: 30,000 entries (some over a quarter page), loaded through the CLI.
fn source(root: &Path) -> std::path::PathBuf {
    let db = root.join("source");
    let input = root.join("input.tsv");
    let lines: String = (0..30_000u32)
        .map(|i| {
            let value = if i % 100 == 0 { "L".repeat(3000) } else { format!("value {i}") };
            format!("key{i:06}\t{value}\n")
        })
        .collect();
    std::fs::write(&input, lines).expect("write");
    let load = tierkv(&["load", "--db", path(&db), path(&input), "--quiet"]);
    assert!(load.status.success(), "{}", String::from_utf8_lossy(&load.stderr));
    db
}

fn dump(db: &Path) -> Output {
    tierkv(&["dump", "--db", path(db)])
}

#[test]
fn backup_and_restore_copy_the_store() {
    let root = tempfile::tempdir().expect("dir");
    let db = source(root.path());
    let copy = root.path().join("copy");
    let backup = tierkv(&["backup", "--db", path(&db), path(&copy), "--json"]);
    assert!(backup.status.success(), "{}", String::from_utf8_lossy(&backup.stderr));
    let reply: serde_json::Value = serde_json::from_slice(&backup.stdout).expect("json");
    assert!(reply["sequence"].as_u64().expect("sequence") > 0, "{reply}");
    let original = dump(&db);
    assert_eq!(dump(&copy).stdout, original.stdout);
    let verify = tierkv(&["verify", "--db", path(&copy)]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    let restored = root.path().join("restored");
    let restore = tierkv(&["restore", "--from", path(&copy), "--db", path(&restored)]);
    assert!(restore.status.success(), "{}", String::from_utf8_lossy(&restore.stderr));
    assert_eq!(dump(&restored).stdout, original.stdout);
    // A backup over a store is refused, and changes nothing.
    let again = tierkv(&["backup", "--db", path(&db), path(&copy)]);
    assert_eq!(again.status.code(), Some(6), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(dump(&copy).stdout, original.stdout);
}

#[test]
fn backups_killed_with_sigkill_leave_the_source_whole_and_no_half_copy_that_opens() {
    let kills: usize =
        std::env::var("TIERKV_BACKUP_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let root = tempfile::tempdir().expect("dir");
    let db = source(root.path());
    let original = dump(&db);
    assert!(original.status.success());
    // How long one backup takes here, to kill the others anywhere in it.
    let started = Instant::now();
    let timed = tierkv(&["backup", "--db", path(&db), path(&root.path().join("timed"))]);
    assert!(timed.status.success());
    let span = started.elapsed().mul_f64(1.2);
    let mut rng = fastrand::Rng::with_seed(0x00ba_c0b5);
    let (mut whole, mut refused) = (0, 0);
    for cycle in 0..kills {
        let copy = root.path().join(format!("copy{cycle}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_tierkv"))
            .args(["backup", "--db", path(&db), path(&copy)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_micros(rng.u64(0..span.as_micros() as u64)));
        // SIGKILL, unless it finished first.
        let _ = child.kill();
        let status = child.wait().expect("wait");
        let get = tierkv(&["get", "--db", path(&copy), "key000000"]);
        match get.status.code() {
            Some(0) => {
                assert_eq!(dump(&copy).stdout, original.stdout, "cycle {cycle}: a partial copy");
                whole += 1;
            }
            // No store: an unfinished backup, or one killed before it made anything.
            Some(6) => {
                let stderr = String::from_utf8_lossy(&get.stderr);
                assert!(
                    !copy.exists()
                        || stderr.contains("did not finish")
                        || stderr.contains("empty")
                        || stderr.contains("nothing is there"),
                    "cycle {cycle}: {stderr}"
                );
                assert!(!status.success(), "cycle {cycle}: a finished backup does not open");
                refused += 1;
            }
            other => panic!(
                "cycle {cycle}: the copy gave exit code {other:?}: {}",
                String::from_utf8_lossy(&get.stderr)
            ),
        }
    }
    let verify = tierkv(&["verify", "--db", path(&db)]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    assert_eq!(dump(&db).stdout, original.stdout, "the source changed");
    eprintln!(
        "{kills} backups killed at random: {whole} finished whole, {refused} refused to open"
    );
    assert!(refused > 0, "no backup was killed half-way: the loop tests nothing");
}
