//! The commands that only read (`get`, `scan`, `dump`, `stat`, `verify`) change nothing: under
//! strace they make no write to a file, no sync, no allocation, no rename, removal or
//! directory, and open every file read-only, on a store that needs its log replayed. And
//! they work on a copy the user cannot write: run as an unprivileged user on a copy made
//! read-only with `chmod -R a-w`, they print what they print as root on the original,
//! while a write there fails with the permission exit code (5).
//!
//! strace, setpriv and chown must be installed (`.ci/run` installs strace where it is
//! missing); the tests fail, not skip, without them.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tierkv::{Db, Options};

/// The read-only commands, with their arguments (after `--db DIR`).
const READS: &[&[&str]] = &[
    &["get", "key0007"],
    &["get", "log-only-3"],
    &["get", "missing"],
    &["get", "key0001", "--json"],
    &["scan", "--prefix", "key00", "--limit", "5"],
    &["scan", "--reverse", "--limit", "3", "--json"],
    &["dump"],
    &["dump", "--format", "hex"],
    &["stat"],
    &["stat", "--json"],
    &["verify"],
    &["verify", "--json"],
];

/// System calls that change files or make them durable.
const MUTATING: &[&str] = &[
    "pwrite64",
    "pwritev",
    "pwritev2",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "syncfs",
    "fallocate",
    "ftruncate",
    "truncate",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "msync",
    "creat",
];

/// A store whose tree holds entries and whose log holds more, left without a close (as by
/// a process that was killed), so every read must replay the log.
fn store(root: &Path) -> PathBuf {
    let dir = root.join("db");
    let db = Db::open(&dir, Options { cache_size: 8 << 20, ..Options::default() }).expect("open");
    for i in 0..200u32 {
        db.put(format!("key{i:04}"), format!("value {i}")).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    for i in 0..10u32 {
        db.put(format!("log-only-{i}"), vec![b'x'; 3000]).expect("put");
    }
    drop(db);
    dir
}

fn run(binary: &Path, db: &Path, args: &[&str], prefix: &[&str]) -> Output {
    let mut command =
        Command::new(prefix.first().copied().unwrap_or(binary.to_str().expect("path")));
    if !prefix.is_empty() {
        command.args(&prefix[1..]).arg(binary);
    }
    command.arg(args[0]).arg("--db").arg(db).args(&args[1..]).output().expect("run")
}

fn require(tool: &str) {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output();
    assert!(
        found.is_ok_and(|out| out.status.success()),
        "{tool} is not installed; install it (Debian: apt-get install {tool}) to run this test"
    );
}

#[test]
fn read_only_commands_make_no_mutating_system_call() {
    require("strace");
    let root = tempfile::tempdir().expect("dir");
    let db = store(root.path());
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_tierkv"));
    let trace = root.path().join("trace");
    for args in READS {
        let calls = ["openat", "open", "write", "writev"].iter().chain(MUTATING).copied();
        let filter = format!("trace={}", calls.collect::<Vec<_>>().join(","));
        let prefix =
            ["strace", "-f", "-qq", "-o", trace.to_str().expect("path"), "-e", filter.as_str()];
        let output = run(&binary, &db, args, &prefix);
        let code = output.status.code();
        let expected = if args.starts_with(&["get", "missing"]) { Some(1) } else { Some(0) };
        assert_eq!(code, expected, "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        let log = std::fs::read_to_string(&trace).expect("the trace");
        let mut violations = Vec::new();
        let mut opened = 0;
        for line in log.lines() {
            // "[PID ]name(args) = result", or an unfinished/resumed half of one: strace puts
            // the PID first only while it traces more than one thread.
            let call = match line.split_once(' ') {
                // strace pads a short PID with spaces ("5997  openat(...)").
                Some((pid, rest)) if pid.bytes().all(|b| b.is_ascii_digit()) => rest.trim_start(),
                _ => line,
            };
            let name = call.split('(').next().unwrap_or("");
            if call.starts_with("<...") || call.starts_with("+++") || call.starts_with("---") {
                continue;
            }
            let bad = match name {
                "openat" | "open" => {
                    opened += 1;
                    ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"].iter().any(|f| call.contains(f))
                }
                "write" | "writev" => {
                    !(call.starts_with("write(1,")
                        || call.starts_with("write(2,")
                        || call.starts_with("writev(1,")
                        || call.starts_with("writev(2,"))
                }
                name => MUTATING.contains(&name),
            };
            if bad {
                violations.push(line.to_string());
            }
        }
        let head: Vec<&str> = log.lines().take(20).collect();
        assert!(
            opened > 3,
            "{args:?}: the trace saw {opened} opens; is strace tracing? stderr: {}\ntrace:\n{}",
            String::from_utf8_lossy(&output.stderr),
            head.join("\n")
        );
        assert!(violations.is_empty(), "{args:?} changed files:\n{}", violations.join("\n"));
    }
}

#[test]
fn read_only_commands_read_a_copy_the_user_cannot_write() {
    for tool in ["setpriv", "chown", "cp"] {
        require(tool);
    }
    let root = tempfile::tempdir().expect("dir");
    // Others may enter the directories on the way to the copy and the binary.
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let db = store(root.path());
    let binary = root.path().join("tierkv");
    std::fs::copy(env!("CARGO_BIN_EXE_tierkv"), &binary).expect("copy the binary");
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let copy = root.path().join("copy");
    let copied = Command::new("cp").arg("-a").arg(&db).arg(&copy).status().expect("cp");
    assert!(copied.success());
    let root_user = current_uid() == 0;
    let as_user: Vec<&str> = if root_user {
        let owned = Command::new("chown").args(["-R", "65534:65534"]).arg(&copy).status();
        assert!(owned.expect("chown").success());
        vec!["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    } else {
        Vec::new()
    };
    let locked = Command::new("chmod").args(["-R", "a-w"]).arg(&copy).status().expect("chmod");
    assert!(locked.success());
    let before = snapshot(&copy);
    for args in READS {
        let original = run(&binary, &db, args, &[]);
        let on_copy = run(&binary, &copy, args, &as_user);
        let stderr = String::from_utf8_lossy(&on_copy.stderr);
        assert_eq!(on_copy.status.code(), original.status.code(), "{args:?}: {stderr}");
        if args[0] != "stat" {
            assert_eq!(on_copy.stdout, original.stdout, "{args:?}: the copy reads otherwise");
        } else {
            // stat's cache counters depend on the run; its entries and sizes do not.
            let first = |out: &Output| {
                String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
            };
            assert_eq!(first(&on_copy), first(&original), "{args:?}");
        }
    }
    // A write on the copy is refused for want of permission, and changes nothing.
    let put = run(&binary, &copy, &["put", "k", "v"], &as_user);
    let stderr = String::from_utf8_lossy(&put.stderr);
    assert_eq!(put.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
    assert_eq!(snapshot(&copy), before, "the copy changed");
    // Let the temporary directory be removed.
    let _ = Command::new("chmod").args(["-R", "u+w"]).arg(&copy).status();
}

/// This process's user id, from `id -u` (the tests make no system calls of their own).
fn current_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().expect("id");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a uid")
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeSet<(PathBuf, Vec<u8>)> {
    let mut found = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("list") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.insert((path.clone(), std::fs::read(&path).expect("read")));
            }
        }
    }
    found
}
