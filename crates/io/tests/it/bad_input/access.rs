//! Bad input about where and how a file is opened (see `bad_input.rs`'s header): missing
//! paths, read-only handles and file systems, refused access, files changed behind our back,
//! invalid options.

use super::*;

// ---------------------------------------------------------------------------------------------
// Missing paths
// ---------------------------------------------------------------------------------------------

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, Error>, op: Op, path: &Path, what: &str) {
    let error = expect_err(result, what);
    match &error {
        Error::NotFound { op: o, path: reported } => {
            assert_eq!(*o, op, "{what}: {error}");
            assert_eq!(reported, path, "{what}: {error}");
        }
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
    assert!(error.is_not_found());
    assert_message(&error, path, &["no such file or directory", &op.to_string()], what);
}

#[test]
fn missing_paths_are_not_found() {
    for place in places() {
        let label = place.label;
        let missing = place.path("missing");
        let in_missing_dir = place.path("no-such-dir/file");
        for &method in &place.methods {
            let what = format!("{label} {method}: open a missing file");
            assert_not_found(
                place.storage.open(&missing, &existing(method)),
                Op::Open,
                &missing,
                &what,
            );
            let what = format!("{label} {method}: create in a missing directory");
            let result = place.storage.open(&in_missing_dir, &create(method));
            assert_not_found(result, Op::Open, &in_missing_dir, &what);
        }
        let what = format!("{label}: remove");
        assert_not_found(place.storage.remove_file(&missing), Op::Remove, &missing, &what);
        let what = format!("{label}: rename a missing file");
        let to = place.path("to");
        assert_not_found(place.storage.rename(&missing, &to), Op::Rename, &missing, &what);
        let missing_dir = place.path("no-such-dir");
        let what = format!("{label}: sync_dir");
        assert_not_found(place.storage.sync_dir(&missing_dir), Op::SyncDir, &missing_dir, &what);
        let what = format!("{label}: list_dir");
        assert_not_found(place.storage.list_dir(&missing_dir), Op::ListDir, &missing_dir, &what);
        assert!(!place.storage.exists(&missing).expect("exists"), "{label}: exists is no error");
        assert!(!place.storage.exists(&to).expect("exists"), "{label}: no file was made");
        assert!(!place.storage.exists(&missing_dir).expect("exists"), "{label}: nor a directory");
    }
}

/// A rename into a missing directory fails with ENOENT; the message must name the destination,
/// whose directory is missing, not only the source, which exists.
#[test]
fn a_rename_into_a_missing_directory_names_the_destination() {
    for place in places() {
        let from = make_file(&place, "rename-source", 10);
        let to = place.path("no-such-dir/target");
        let what = format!("{}: rename into a missing directory", place.label);
        let error = expect_err(place.storage.rename(&from, &to), &what);
        assert!(error.is_not_found(), "{what}: {error:?}");
        let message = error.to_string();
        assert!(
            message.contains(&to.display().to_string()),
            "{what}: message {message:?} names only the source, which exists; it should name \
             the destination {} whose directory is missing",
            to.display()
        );
        assert!(place.storage.exists(&from).expect("exists"), "{what}: the source is untouched");
    }
}

// ---------------------------------------------------------------------------------------------
// Read-only handles, read-only file systems, refused access
// ---------------------------------------------------------------------------------------------

fn assert_read_only_handle(result: Result<(), Error>, op: Op, path: &Path, what: &str) {
    let error = expect_err(result, what);
    assert!(
        matches!(&error, Error::ReadOnlyHandle { op: o, .. } if *o == op),
        "{what}: expected ReadOnlyHandle {{ op: {op} }}, got {error:?}"
    );
    assert_message(&error, path, &["the file was opened read-only", &op.to_string()], what);
}

#[test]
fn read_only_handles_refuse_every_change_and_still_read() {
    for place in places() {
        for &method in &place.methods {
            let label = format!("{} {method}", place.label);
            let path = make_file(&place, &format!("{method}.ro"), 8192);
            let file = place.open(&path, &existing(method).read_only(true));
            let data = pattern(4096, 9);
            assert_read_only_handle(file.write_at(&data, 0), Op::Write, &path, &label);
            assert_read_only_handle(file.write_at(&data, 1 << 20), Op::Write, &path, &label);
            assert_read_only_handle(file.set_len(0), Op::SetLen, &path, &label);
            assert_read_only_handle(file.set_len(1 << 20), Op::SetLen, &path, &label);
            assert_read_only_handle(file.reserve(1 << 20), Op::Allocate, &path, &label);
            // store_u64: `store_u64_on_a_read_only_handle_is_read_only_whatever_the_offset`.
            let mut back = AlignedBuf::new(8192);
            file.read_at(&mut back, 0).unwrap_or_else(|e| panic!("{label}: read: {e}"));
            assert_eq!(&back[..], &pattern(8192, 7)[..], "{label}: reads still work");
            assert_eq!(file.len(), 8192, "{label}");
            drop(file);
            assert_eq!(place.read_back(&path), &pattern(8192, 7)[..], "{label}: unchanged");
        }
    }
}

/// A store on a read-only handle is `ReadOnlyHandle { op: StoreU64 }` on every backend and
/// method, whatever else is wrong with it, as `write_at`, `set_len` and `reserve` are (the
/// handle is checked first everywhere), so the simulation and the OS agree. Every mismatch is
/// listed at once.
#[test]
fn store_u64_on_a_read_only_handle_is_read_only_whatever_the_offset() {
    let mut wrong = Vec::new();
    for place in places() {
        for &method in &place.methods {
            let path = make_file(&place, &format!("{method}.ro-store"), 8192);
            let file = place.open(&path, &existing(method).read_only(true));
            for offset in [0u64, 4, 1 << 20] {
                match file.store_u64(offset, 1) {
                    Err(Error::ReadOnlyHandle { op: Op::StoreU64, .. }) => {}
                    other => wrong.push(format!(
                        "{} {method}: store_u64({offset}) gave {}",
                        place.label,
                        other.map_or_else(|e| format!("{e:?}"), |()| "Ok".into())
                    )),
                }
            }
        }
    }
    let wrong = wrong.join("\n");
    assert!(wrong.is_empty(), "stores on read-only handles not refused as read-only:\n{wrong}");
}

fn assert_read_only_fs<T: std::fmt::Debug>(result: Result<T, Error>, path: &Path, what: &str) {
    let error = expect_err(result, what);
    assert!(
        matches!(&error, Error::ReadOnlyFileSystem { op: Op::Open, .. }),
        "{what}: expected ReadOnlyFileSystem, got {error:?}"
    );
    assert_message(&error, path, &["the file system is mounted read-only"], what);
}

#[test]
fn read_only_file_systems_are_named() {
    let mount = match Mounted::new("tmpfs", "size=1m") {
        Ok(mount) => mount,
        Err(reason) => return skip("the read-only file system checks", &reason),
    };
    let existing_path = mount.point.join("existing");
    std::fs::write(&existing_path, b"read-only data").expect("write before remounting");
    if let Err(reason) = mount.remount("remount,ro") {
        return skip("the read-only file system checks", &reason);
    }
    let new_path = mount.point.join("new");
    for method in AccessMethod::ALL {
        let what = format!("{method}: open an existing file read-write on a read-only tmpfs");
        let result = Storage::Os.open(&existing_path, &existing(method));
        assert_read_only_fs(result, &existing_path, &what);
        let what = format!("{method}: create a file on a read-only tmpfs");
        assert_read_only_fs(Storage::Os.open(&new_path, &create(method)), &new_path, &what);
        if method == AccessMethod::Direct {
            continue;
        }
        // Read-only handles work there.
        let file = Storage::Os
            .open(&existing_path, &existing(method).read_only(true))
            .unwrap_or_else(|e| panic!("{method}: read-only open on a read-only tmpfs: {e}"));
        let mut back = [0u8; 14];
        file.read_at(&mut back, 0).unwrap_or_else(|e| panic!("{method}: {e}"));
        assert_eq!(&back, b"read-only data");
    }
    assert!(!new_path.exists(), "nothing was created");
}

#[test]
fn refused_access_is_permission_denied() {
    // An immutable file: EPERM for a read-write open, even for root.
    let disk = tempfile::tempdir().expect("tempdir");
    let path = disk.path().join("immutable");
    std::fs::write(&path, b"fixed").expect("write");
    let path_text = path.to_string_lossy().into_owned();
    match run_command("chattr", &["+i", &path_text]) {
        Err(reason) => skip("the immutable file check", &reason),
        Ok(()) => {
            struct Mutable<'a>(&'a str);
            impl Drop for Mutable<'_> {
                fn drop(&mut self) {
                    let _ = run_command("chattr", &["-i", self.0]);
                }
            }
            let _mutable = Mutable(&path_text);
            for method in AccessMethod::ALL {
                let what = format!("{method}: read-write open of an immutable file");
                let error = expect_err(Storage::Os.open(&path, &existing(method)), &what);
                assert!(
                    matches!(&error, Error::PermissionDenied { op: Op::Open, .. }),
                    "{what}: expected PermissionDenied, got {error:?}"
                );
                assert_message(&error, &path, &["permission denied"], &what);
            }
            let file = Storage::Os
                .open(&path, &existing(AccessMethod::Syscall).read_only(true))
                .expect("an immutable file opens read-only");
            assert_eq!(file.len(), 5);
        }
    }

    // A read-only sysfs attribute: EACCES for a read-write open, even for root.
    let attribute = Path::new("/sys/devices/system/cpu/online");
    if attribute.exists() {
        let what = "read-write open of a read-only sysfs attribute";
        let error = expect_err(Storage::Os.open(attribute, &existing(AccessMethod::Syscall)), what);
        match &error {
            Error::PermissionDenied { op: Op::Open, .. } => {
                assert_message(&error, attribute, &["permission denied"], what);
            }
            // In a container that mounts sysfs read-only, EROFS comes first.
            Error::ReadOnlyFileSystem { .. } => skip(what, "sysfs is mounted read-only here"),
            other => panic!("{what}: expected PermissionDenied, got {other:?}"),
        }
    } else {
        skip("the sysfs check", "/sys/devices/system/cpu/online does not exist");
    }

    // /proc/version: root may open it read-write (procfs checks no mode bits for root), but
    // growing it fails, with a typed error naming the file; others are refused at open.
    let proc_version = Path::new("/proc/version");
    match Storage::Os.open(proc_version, &existing(AccessMethod::Syscall)) {
        Ok(file) => {
            assert!(rustix::process::geteuid().is_root(), "only root opens /proc/version rw");
            let error = expect_err(file.write_at(b"x", 0), "write to /proc/version");
            assert_message(&error, proc_version, &["cannot"], "write to /proc/version");
            assert_eq!(error.op(), Some(Op::Allocate), "{error:?}");
        }
        Err(error) => {
            assert!(
                matches!(&error, Error::PermissionDenied { op: Op::Open, .. }),
                "read-write open of /proc/version: expected PermissionDenied, got {error:?}"
            );
            assert_message(&error, proc_version, &["permission denied"], "/proc/version");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Files changed behind our back
// ---------------------------------------------------------------------------------------------

/// Set in the child process that `a_file_shrunk_while_another_is_mapped_is_an_error_not_sigbus`
/// runs: if the SIGBUS guard fails, the child dies, not the whole test binary.
const CHILD_ENV: &str = "TIERKV_IT_SIGBUS_CHILD";

/// A file shrunk by another process while a second file is mapped: the read of the cut range
/// must be `FileShrunk`: every mapping keeps its slot in the SIGBUS guard's registry however
/// many files are opened after it. Runs in a child process, because the failure mode is the
/// process being killed by SIGBUS.
#[test]
fn a_file_shrunk_while_another_is_mapped_is_an_error_not_sigbus() {
    if std::env::var_os(CHILD_ENV).is_some() {
        shrink_with_two_mapped_files();
        return;
    }
    use std::os::unix::process::ExitStatusExt;
    // The harness names a test by its module path less the crate's, then its own name.
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let name = format!("{module}::a_file_shrunk_while_another_is_mapped_is_an_error_not_sigbus");
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD_ENV, "1")
        .output()
        .expect("run the child test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child test failed: {:?} (signal {:?}; 7 is SIGBUS)\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
        output.status.signal()
    );
    assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}");
}

fn shrink_with_two_mapped_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    for method in [AccessMethod::Mmap, AccessMethod::Pmem] {
        let first_path = dir.path().join(format!("{method}.first"));
        let first = Storage::Os.open(&first_path, &create(method)).expect("open the first file");
        first.write_at(&pattern(64 << 10, 5), 0).expect("write 64 KiB");
        // A second mapped file, opened while the first is mapped.
        let second_path = dir.path().join(format!("{method}.second"));
        let second = Storage::Os.open(&second_path, &create(method)).expect("open the second");
        second.write_at(&pattern(4096, 6), 0).expect("write the second file");
        // Another handle (standing for another process) cuts the first file to 8 KiB.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&first_path)
            .and_then(|other| other.set_len(8192))
            .expect("external truncate");
        let mut buf = vec![0u8; 4096];
        let error = expect_err(first.read_at(&mut buf, 32 << 10), "read in the cut range");
        assert!(
            matches!(error, Error::FileShrunk { expected_len: 65536, actual_len: 8192, .. }),
            "{method}: expected FileShrunk, got {error:?}"
        );
        assert_message(&error, &first_path, &["behind tierkv's back"], "shrunk");
        let mut back = vec![0u8; 4096];
        second.read_at(&mut back, 0).expect("the second file is untouched");
        assert_eq!(back, &pattern(4096, 6)[..], "{method}");
    }
}

// ---------------------------------------------------------------------------------------------
// Invalid options
// ---------------------------------------------------------------------------------------------

fn assert_invalid(result: Result<File, Error>, path: &Path, phrase: &str, what: &str) {
    let error = expect_err(result, what);
    match &error {
        Error::InvalidOptions { detail, path: reported } => {
            assert!(detail.contains(phrase), "{what}: detail {detail:?} lacks {phrase:?}");
            assert_eq!(reported, path);
        }
        other => panic!("{what}: expected InvalidOptions, got {other:?}"),
    }
    assert_message(&error, path, &["invalid options for", phrase], what);
}

#[test]
fn contradictory_options_are_refused_before_touching_the_file_system() {
    for place in places() {
        let path = place.path("never-created");
        for &method in &place.methods {
            let label = format!("{} {method}", place.label);
            let open = |options: OpenOptions| place.storage.open(&path, &options);
            let base = OpenOptions::new(method);
            let cases = [
                (base.clone().create(true).chunk_bytes(0), "chunk_bytes is 0"),
                (base.clone().create(true).read_only(true), "read_only cannot be combined"),
                (base.clone().create_new(true).read_only(true), "read_only cannot be combined"),
                (base.clone().create(true).mode(0o70000), "mode has bits outside 0o7777"),
            ];
            for (options, phrase) in cases {
                assert_invalid(open(options), &path, phrase, &format!("{label}: {phrase}"));
            }
            if method != AccessMethod::Pmem {
                let request = PmemModeRequest::Exactly(PmemMode::Msync);
                let options = base.clone().create(true).pmem_mode(request);
                let phrase = "pmem_mode applies only to the pmem access method";
                assert_invalid(open(options), &path, phrase, &label);
            }
            assert!(!place.storage.exists(&path).expect("exists"), "{label}: nothing created");
        }
    }
}

#[test]
fn dax_map_sync_without_dax_is_invalid_options_naming_map_sync() {
    let disk = tempfile::tempdir().expect("disk tempdir");
    let shm = tempfile::tempdir_in("/dev/shm").expect("/dev/shm tempdir");
    for dir in [disk.path(), shm.path()] {
        let info = tierkv_io::file_system_info(dir).expect("file system info");
        if info.dax {
            skip("the MAP_SYNC refusal", &format!("{} is on DAX", dir.display()));
            continue;
        }
        let path = dir.join("pmem");
        std::fs::write(&path, [0u8; 4096]).expect("write");
        let request = PmemModeRequest::Exactly(PmemMode::DaxMapSync);
        let options = existing(AccessMethod::Pmem).pmem_mode(request);
        let what = format!("dax_map_sync on {}", info.fs_type);
        let result = Storage::Os.open(&path, &options);
        let phrase = format!("this {} file system refuses MAP_SYNC", info.fs_type);
        assert_invalid(result, &path, &phrase, &what);
        // Auto falls back instead of failing.
        let auto = existing(AccessMethod::Pmem);
        let file = Storage::Os.open(&path, &auto).unwrap_or_else(|e| panic!("{what}: auto: {e}"));
        assert_ne!(file.pmem_mode(), Some(PmemMode::DaxMapSync), "{what}");
    }
}
