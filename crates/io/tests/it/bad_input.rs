//! Every bad input to `Storage` and `File` gets a typed error with a message a person can act
//! on, never a panic, never a silent success, and never a change to the file.
//!
//! Covered, for each OS method where it applies (syscall, direct, mmap, pmem; on ext4 and, for
//! the methods that accept it there, tmpfs) and on the simulated backend: reads past the end
//! (`ReadPastEnd` with the numbers), zero-length requests (`ZeroLength`), offsets past the
//! largest file offset (`OffsetTooLarge`), a far write that cannot be allocated, O_DIRECT
//! alignment (`Unaligned`), file systems that refuse O_DIRECT (`DirectIoUnsupported`), unaligned
//! 8-byte stores, missing paths (`NotFound`), read-only handles (`ReadOnlyHandle`), read-only
//! file systems (`ReadOnlyFileSystem`), refused access (`PermissionDenied`) and contradictory
//! options (`InvalidOptions`), and a mapped file shrunk by another process while other files are
//! mapped (`FileShrunk`, not SIGBUS). Every error's `Display` is checked for the path and a
//! phrase that says what went wrong, so messages stay clear as the code changes.
//!
//! Some checks need root (mounting tmpfs, ramfs and a small ext4 image, `chattr +i`). Where the
//! machine does not allow one, that sub-check prints a note and is skipped; the rest still runs.
//! Far writes that allocate run only on small, freshly mounted file systems: on the shared disk
//! a 1 TiB growth would fill it (fallocate allocates every block up to the target); on the disk
//! they use `GrowthStrategy::Truncate`, which makes a sparse file.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;
use tierkv_io::sim::SimFs;
use tierkv_io::{
    AccessMethod, AlignedBuf, AlignedItem, Error, File, Op, OpenOptions, PmemMode, PmemModeRequest,
    Storage, MAX_FILE_END,
};

/// Missing paths, read-only handles and file systems, refused access, files changed behind
/// our back, invalid options.
mod access;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Where test files live: a backend, a directory on it, and the methods that work there.
struct Place {
    label: &'static str,
    storage: Storage,
    dir: PathBuf,
    methods: Vec<AccessMethod>,
    /// The simulated file system, to read files back; `None` on the OS.
    sim: Option<SimFs>,
    /// Keeps the OS directory alive.
    _temp: Option<TempDir>,
}

impl Place {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The bytes of a closed file as the file system holds them.
    fn read_back(&self, path: &Path) -> Vec<u8> {
        match &self.sim {
            Some(fs) => fs.read_file(path).unwrap_or_else(|e| panic!("{}: {e}", self.label)),
            None => std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", self.label)),
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> File {
        self.storage
            .open(path, options)
            .unwrap_or_else(|e| panic!("{}: open {}: {e}", self.label, path.display()))
    }
}

/// ext4 (every method), tmpfs (every method but direct, which tmpfs may refuse on other
/// kernels) and the simulation (every method).
fn places() -> Vec<Place> {
    let disk = tempfile::tempdir().expect("disk tempdir");
    let shm = tempfile::tempdir_in("/dev/shm").expect("/dev/shm tempdir");
    let sim = SimFs::new();
    vec![
        Place {
            label: "disk",
            storage: Storage::Os,
            dir: disk.path().to_path_buf(),
            methods: AccessMethod::ALL.to_vec(),
            sim: None,
            _temp: Some(disk),
        },
        Place {
            label: "shm",
            storage: Storage::Os,
            dir: shm.path().to_path_buf(),
            methods: vec![AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem],
            sim: None,
            _temp: Some(shm),
        },
        Place {
            label: "sim",
            storage: Storage::Sim(sim.clone()),
            dir: PathBuf::from("/"),
            methods: AccessMethod::ALL.to_vec(),
            sim: Some(sim),
            _temp: None,
        },
    ]
}

fn create(method: AccessMethod) -> OpenOptions {
    OpenOptions::new(method).create(true).chunk_bytes(1)
}

fn existing(method: AccessMethod) -> OpenOptions {
    OpenOptions::new(method).chunk_bytes(1)
}

/// Bytes that are never zero, in a buffer aligned for O_DIRECT.
fn pattern(len: usize, salt: u8) -> AlignedBuf {
    let mut buf = AlignedBuf::new(len);
    for (index, byte) in buf.iter_mut().enumerate() {
        *byte = ((index as u8).wrapping_mul(31).wrapping_add(salt)).max(1);
    }
    buf
}

/// A file of `len` bytes of `pattern(len, 7)`, closed again.
fn make_file(place: &Place, name: &str, len: usize) -> PathBuf {
    let path = place.path(name);
    let file = place.open(&path, &create(AccessMethod::Syscall));
    file.write_at(&pattern(len, 7), 0).unwrap_or_else(|e| panic!("{}: {e}", place.label));
    assert_eq!(file.len(), len as u64, "{}: chunk 1 grows exactly", place.label);
    path
}

/// The error of a call that must fail.
fn expect_err<T: std::fmt::Debug>(result: Result<T, Error>, what: &str) -> Error {
    match result {
        Ok(value) => panic!("{what}: expected an error, got Ok({value:?})"),
        Err(error) => error,
    }
}

/// Checks that the message names `path` and contains every phrase.
fn assert_message(error: &Error, path: &Path, phrases: &[&str], what: &str) {
    let message = error.to_string();
    let shown = path.display().to_string();
    assert!(message.contains(&shown), "{what}: message {message:?} does not name {shown}");
    for phrase in phrases {
        assert!(message.contains(phrase), "{what}: message {message:?} lacks {phrase:?}");
    }
}

/// Runs a command; `Err` carries what it printed, for the skip note.
fn run_command(program: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(program).args(args).output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!("cannot run {program}: {error}")),
    }
}

pub(crate) fn skip(check: &str, reason: &str) {
    eprintln!("note: skipping {check}: {reason}");
}

/// A file system mounted for one test, unmounted on drop even when the test fails, so a
/// failing assertion never leaves a mount behind.
pub(crate) struct Mounted {
    pub(crate) point: PathBuf,
    /// Removed after the unmount (fields drop after `Drop::drop`).
    _dir: TempDir,
}

impl Mounted {
    /// `mount -t <fs_type> -o <options> none <fresh dir>`.
    pub(crate) fn new(fs_type: &str, options: &str) -> Result<Mounted, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let point = dir.path().join("mnt");
        std::fs::create_dir(&point).map_err(|e| e.to_string())?;
        let point_text = point.to_string_lossy().into_owned();
        run_command("mount", &["-t", fs_type, "-o", options, "none", &point_text])?;
        Ok(Mounted { point, _dir: dir })
    }

    /// A fresh ext4 file system of `size_bytes` in an image file, mounted through a loop
    /// device.
    fn ext4_image(size_bytes: u64) -> Result<Mounted, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("ext4.img");
        std::fs::File::create(&image)
            .and_then(|file| file.set_len(size_bytes))
            .map_err(|e| e.to_string())?;
        let image_text = image.to_string_lossy().into_owned();
        run_command("mkfs.ext4", &["-q", "-F", &image_text])?;
        let point = dir.path().join("mnt");
        std::fs::create_dir(&point).map_err(|e| e.to_string())?;
        let point_text = point.to_string_lossy().into_owned();
        run_command("mount", &["-o", "loop", &image_text, &point_text])?;
        Ok(Mounted { point, _dir: dir })
    }

    fn remount(&self, options: &str) -> Result<(), String> {
        let point_text = self.point.to_string_lossy().into_owned();
        run_command("mount", &["-o", options, &point_text])
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let point_text = self.point.to_string_lossy().into_owned();
        if run_command("umount", &[&point_text]).is_err() {
            // Busy (a handle still open after a failed assertion): detach it lazily.
            let _ = run_command("umount", &["-l", &point_text]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reads past the end
// ---------------------------------------------------------------------------------------------

fn assert_read_past_end(
    file: &File,
    buf: &mut [u8],
    offset: u64,
    file_len: u64,
    path: &Path,
    what: &str,
) {
    let len = buf.len() as u64;
    let error = expect_err(file.read_at(buf, offset), what);
    match &error {
        Error::ReadPastEnd { path: reported, offset: o, len: l, file_len: f } => {
            assert_eq!((*o, *l, *f), (offset, len, file_len), "{what}: {error}");
            assert_eq!(reported, path, "{what}");
        }
        other => panic!("{what}: expected ReadPastEnd, got {other:?}"),
    }
    let numbers = format!("cannot read {len} bytes at offset {offset} of");
    let length = format!("the file is {file_len} bytes long");
    assert_message(&error, path, &[&numbers, &length], what);
}

#[test]
fn reads_past_the_end_report_offset_length_and_file_length() {
    for place in places() {
        for &method in &place.methods {
            // O_DIRECT reads must be whole blocks, so its file and reads are block multiples;
            // the others use an odd length, so the end falls inside a page (and a mapping).
            let (file_len, cases): (u64, [(u64, usize); 3]) = if method == AccessMethod::Direct {
                (8192, [(12288, 4096), (4096, 8192), (8192, 4096)])
            } else {
                (5000, [(6000, 10), (4990, 20), (5000, 1)])
            };
            let path = make_file(&place, &format!("{method}.past"), file_len as usize);
            let file = place.open(&path, &existing(method));
            for (offset, len) in cases {
                let what = format!("{} {method}: read {len} at {offset}", place.label);
                let mut buf = AlignedBuf::new(len);
                assert_read_past_end(&file, &mut buf, offset, file_len, &path, &what);
            }
            // The largest legal end: still a typed ReadPastEnd, not an OS error.
            if method != AccessMethod::Direct {
                let what = format!("{} {method}: read at the largest offset", place.label);
                let mut buf = [0u8; 1];
                assert_read_past_end(&file, &mut buf, MAX_FILE_END - 1, file_len, &path, &what);
            }
            // The handle still reads what is there, and nothing changed.
            let mut head = AlignedBuf::new(4096);
            file.read_at(&mut head, 0).unwrap_or_else(|e| panic!("{} {method}: {e}", place.label));
            assert_eq!(&head[..], &pattern(file_len as usize, 7)[..4096]);
            assert_eq!(file.len(), file_len, "{} {method}", place.label);
        }
    }
}

#[test]
fn reads_of_an_empty_file_are_past_the_end_even_without_a_mapping() {
    for place in places() {
        for &method in &place.methods {
            let path = place.path(&format!("{method}.empty"));
            let file = place.open(&path, &create(method));
            assert!(file.is_empty(), "{} {method}", place.label);
            for (offset, len) in [(0u64, 4096usize), (4096, 4096)] {
                let what = format!("{} {method}: empty file, read {len} at {offset}", place.label);
                let mut buf = AlignedBuf::new(len);
                assert_read_past_end(&file, &mut buf, offset, 0, &path, &what);
            }
            drop(file);
            assert!(place.read_back(&path).is_empty(), "{} {method}", place.label);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Zero lengths and huge offsets
// ---------------------------------------------------------------------------------------------

#[test]
fn zero_length_reads_writes_and_persists_are_refused() {
    for place in places() {
        for &method in &place.methods {
            let path = make_file(&place, &format!("{method}.zero"), 8192);
            let file = place.open(&path, &existing(method));
            let mut buf = AlignedBuf::new(4096);
            let what = |op: &str| format!("{} {method}: zero-length {op}", place.label);
            let zero = |result: Result<(), Error>, op: Op, offset: u64, name: &str| {
                let error = expect_err(result, &what(name));
                assert!(
                    matches!(&error, Error::ZeroLength { op: o, offset: at, .. }
                        if *o == op && *at == offset),
                    "{}: expected ZeroLength {{ op: {op}, offset: {offset} }}, got {error:?}",
                    what(name)
                );
                assert_message(&error, &path, &["zero-length request", &op.to_string()], name);
            };
            zero(file.read_at(&mut buf[..0], 4096), Op::Read, 4096, "read");
            zero(file.write_at(&buf[..0], 100), Op::Write, 100, "write");
            zero(file.write_at(&buf[..0], 1 << 30), Op::Write, 1 << 30, "write past the end");
            zero(file.persist(0, 0), Op::Persist, 0, "persist");
            zero(file.persist(1 << 30, 0), Op::Persist, 1 << 30, "persist past the end");
            assert_eq!(file.len(), 8192, "{} {method}: a refused write grows nothing", place.label);
            drop(file);
            assert_eq!(place.read_back(&path), &pattern(8192, 7)[..], "{} {method}", place.label);
        }
    }
}

/// Asserts `OffsetTooLarge` with the given fields and a message that says so.
fn assert_too_large(
    result: Result<(), Error>,
    op: Op,
    offset: u64,
    len: u64,
    path: &Path,
    what: &str,
) {
    let error = expect_err(result, what);
    match &error {
        Error::OffsetTooLarge { op: o, offset: at, len: l, max, .. } => {
            assert_eq!((*o, *at, *l, *max), (op, offset, len, MAX_FILE_END), "{what}: {error}");
        }
        other => panic!("{what}: expected OffsetTooLarge, got {other:?}"),
    }
    let phrase =
        if len == 0 { "exceeds the largest file size" } else { "exceeds the largest file offset" };
    assert_message(&error, path, &[phrase], what);
}

#[test]
fn offsets_past_the_largest_file_offset_are_refused_and_change_nothing() {
    // (offset, len): past u64, one past the largest end, and an end that overflows u64.
    let ranges =
        [(u64::MAX, 1u64), (i64::MAX as u64, 1), (MAX_FILE_END, 4096), (u64::MAX - 10, 100)];
    for place in places() {
        for &method in &place.methods {
            let path = make_file(&place, &format!("{method}.huge"), 8192);
            let file = place.open(&path, &existing(method));
            let label = format!("{} {method}", place.label);
            for (offset, len) in ranges {
                let mut buf = AlignedBuf::new(len as usize);
                let what = format!("{label}: read {len} at {offset}");
                assert_too_large(
                    file.read_at(&mut buf, offset),
                    Op::Read,
                    offset,
                    len,
                    &path,
                    &what,
                );
                let what = format!("{label}: write {len} at {offset}");
                assert_too_large(file.write_at(&buf, offset), Op::Write, offset, len, &path, &what);
                let what = format!("{label}: persist {len} at {offset}");
                assert_too_large(file.persist(offset, len), Op::Persist, offset, len, &path, &what);
            }
            // 8-byte aligned slots whose end is past the largest offset or overflows.
            for offset in [u64::MAX - 7, MAX_FILE_END - 7] {
                let what = format!("{label}: store_u64 at {offset}");
                let result = file.store_u64(offset, 1);
                assert_too_large(result, Op::StoreU64, offset, 8, &path, &what);
            }
            for len in [u64::MAX, MAX_FILE_END + 1] {
                let what = format!("{label}: set_len({len})");
                assert_too_large(file.set_len(len), Op::SetLen, len, 0, &path, &what);
                let what = format!("{label}: reserve({len})");
                assert_too_large(file.reserve(len), Op::Allocate, len, 0, &path, &what);
            }
            assert_eq!(file.len(), 8192, "{label}: failed calls change nothing");
            drop(file);
            assert_eq!(place.read_back(&path), &pattern(8192, 7)[..], "{label}");
        }
    }
}

/// A write 1 TiB out with chunk 1 (a legal offset, a file far larger than the device):
/// - with `GrowthStrategy::Truncate` on ext4, the file becomes sparse: the write succeeds, reads
///   back, and occupies a few blocks (then the file is removed);
/// - on the simulation, whose files are sparse, it succeeds;
/// - with the default allocation on a 1 MiB tmpfs, the growth cannot be allocated, so it is a
///   typed `NoSpace`/`FileTooLarge` that leaves the file as it was (tmpfs refuses an
///   fallocate larger than the file system before allocating anything).
#[test]
fn a_far_write_is_sparse_or_a_typed_error() {
    use std::os::unix::fs::MetadataExt;
    let far = 1u64 << 40;
    let disk = tempfile::tempdir().expect("disk tempdir");
    for method in [AccessMethod::Syscall, AccessMethod::Mmap] {
        let path = disk.path().join(format!("{method}.sparse"));
        let options = create(method).growth(tierkv_io::GrowthStrategy::Truncate);
        let file = Storage::Os.open(&path, &options).expect("open");
        match file.write_at(b"x", far) {
            Ok(()) => {
                assert_eq!(file.len(), far + 1, "{method}: chunk 1 grows exactly");
                let mut back = [0u8; 1];
                file.read_at(&mut back, far).expect("read the far byte");
                assert_eq!(&back, b"x", "{method}");
                drop(file);
                let metadata = std::fs::metadata(&path).expect("stat");
                assert_eq!(metadata.len(), far + 1, "{method}");
                assert!(metadata.blocks() * 512 < 1 << 20, "{method}: the file is sparse");
                std::fs::remove_file(&path).expect("remove the sparse file");
            }
            Err(error) => assert!(
                matches!(error, Error::FileTooLarge { .. } | Error::NoSpace { .. }),
                "{method}: a far sparse write: expected success or a typed error, got {error:?}"
            ),
        }
    }

    let sim = Storage::Sim(SimFs::new());
    let file = sim.open("/far", &create(AccessMethod::Syscall)).expect("sim open");
    file.write_at(b"x", far).expect("a sparse simulated file can hold a far byte");
    assert_eq!(file.len(), far + 1, "chunk 1 grows exactly to the end of the write");
    let mut back = [0u8; 1];
    file.read_at(&mut back, far).expect("read the far byte");
    assert_eq!(&back, b"x");
    file.set_len(0).expect("truncate");

    let mount = match Mounted::new("tmpfs", "size=1m") {
        Ok(mount) => mount,
        Err(reason) => return skip("the far write on a 1 MiB tmpfs", &reason),
    };
    for method in
        [AccessMethod::Syscall, AccessMethod::Direct, AccessMethod::Mmap, AccessMethod::Pmem]
    {
        let path = mount.point.join(format!("{method}.far"));
        let file = match Storage::Os.open(&path, &create(method)) {
            Ok(file) => file,
            Err(Error::DirectIoUnsupported { .. }) if method == AccessMethod::Direct => continue,
            Err(error) => panic!("{method}: open on tmpfs: {error}"),
        };
        let data = pattern(4096, 3);
        match file.write_at(&data, far) {
            Ok(()) => {
                // A file system that makes holes instead of allocating: then it must read back.
                let mut back = AlignedBuf::new(4096);
                file.read_at(&mut back, far).expect("read the far block");
                assert_eq!(&back[..], &data[..], "{method}");
                drop(file);
                std::fs::remove_file(&path).expect("remove the far file");
            }
            Err(error) => {
                assert!(
                    matches!(
                        &error,
                        Error::NoSpace { op: Op::Allocate, .. }
                            | Error::FileTooLarge { op: Op::Allocate, .. }
                    ),
                    "{method}: expected NoSpace or FileTooLarge while growing, got {error:?}"
                );
                assert_message(&error, &path, &["cannot grow"], &method.to_string());
                assert_eq!(file.len(), 0, "{method}: the handle did not grow");
                drop(file);
                let on_disk = std::fs::metadata(&path).expect("stat").len();
                assert_eq!(on_disk, 0, "{method}: a failed far write leaves the file as it was");
            }
        }
    }
}

/// The same far write on a small ext4, where fallocate allocates block after block until the
/// file system is full and only then fails with ENOSPC. A failed growth must change nothing:
/// the partly allocated range has to be released and the file left at its old size, or one
/// stray far write leaves the device full and the file longer than its handle knows.
#[test]
fn a_far_write_that_fails_with_no_space_leaves_the_file_as_it_was() {
    let mount = match Mounted::ext4_image(32 << 20) {
        Ok(mount) => mount,
        Err(reason) => return skip("the far write on a small ext4", &reason),
    };
    let path = mount.point.join("far");
    let file = Storage::Os.open(&path, &create(AccessMethod::Syscall)).expect("open on ext4");
    let error = expect_err(file.write_at(b"x", 1 << 40), "write 1 TiB out on a 32 MiB ext4");
    assert!(matches!(error, Error::NoSpace { op: Op::Allocate, .. }), "{error:?}");
    assert_message(&error, &path, &["cannot grow", "no space left"], "far write");
    assert_eq!(file.len(), 0, "the handle did not grow");
    drop(file);
    let on_disk = std::fs::metadata(&path).expect("stat").len();
    assert_eq!(
        on_disk, 0,
        "the failed write left the file {on_disk} bytes long (the whole free space of the \
         file system); a failed growth must change nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// Alignment
// ---------------------------------------------------------------------------------------------

/// Asserts an `Unaligned` error with the given fields.
fn assert_unaligned(
    result: Result<(), Error>,
    op: Op,
    item: AlignedItem,
    required: u64,
    path: &Path,
    what: &str,
) -> u64 {
    let error = expect_err(result, what);
    let value = match &error {
        Error::Unaligned { op: o, item: i, required: r, value, .. } => {
            assert_eq!((*o, *i, *r), (op, item, required), "{what}: {error}");
            assert!(!value.is_multiple_of(required), "{what}: {value} is aligned: {error}");
            *value
        }
        other => panic!("{what}: expected Unaligned {item}, got {other:?}"),
    };
    let phrase = format!("{item} {value} is not a multiple of {required} bytes");
    assert_message(&error, path, &[&phrase], what);
    value
}

#[test]
fn unaligned_direct_transfers_are_refused_before_any_system_call() {
    for place in places() {
        if !place.methods.contains(&AccessMethod::Direct) {
            continue;
        }
        let path = place.path("direct.align");
        let file = place.open(&path, &create(AccessMethod::Direct));
        // (memory, offset) alignment: the file system's statx answer, 4096 where it gives
        // none; the simulation always enforces 4096.
        let (memory, offset_align) = match place.sim {
            Some(_) => (4096, 4096),
            None => tierkv_io::file_system_info(&path)
                .expect("file system info")
                .direct_alignment
                .map_or((4096, 4096), |(m, o)| (u64::from(m).max(1), u64::from(o).max(1))),
        };
        let alignment = file.direct_alignment().expect("a direct handle reports its alignment");
        assert_eq!(alignment, memory.max(offset_align), "{}", place.label);
        assert!(memory > 1, "{}: the buffer-address check needs an alignment above 1", place.label);

        let mut buf = AlignedBuf::new(8192);
        let label = place.label;
        let what = |name: &str| format!("{label} direct: {name}");
        let (write, read) = (Op::Write, Op::Read);
        let address = AlignedItem::BufferAddress;
        let value = assert_unaligned(
            file.write_at(&buf[1..4097], 0),
            write,
            address,
            memory,
            &path,
            &what("write from an odd address"),
        );
        assert_eq!(value, buf.as_ptr() as u64 + 1, "{label}: the address is reported");
        assert_unaligned(
            file.read_at(&mut buf[1..4097], 0),
            read,
            address,
            memory,
            &path,
            &what("read into an odd address"),
        );
        // The offset and length rules: on this machine (and the simulation) the offset
        // alignment is the largest, so it is what `direct_alignment` reports.
        let offset = AlignedItem::Offset;
        let length = AlignedItem::Length;
        for (op, result) in
            [(write, file.write_at(&buf[..4096], 100)), (read, file.read_at(&mut buf[..4096], 100))]
        {
            let value = assert_unaligned(result, op, offset, offset_align, &path, &what("offset"));
            assert_eq!(value, 100);
        }
        for (op, result) in
            [(write, file.write_at(&buf[..1000], 0)), (read, file.read_at(&mut buf[..1000], 0))]
        {
            let value = assert_unaligned(result, op, length, offset_align, &path, &what("length"));
            assert_eq!(value, 1000);
        }
        assert_eq!(offset_align, alignment, "{label}: required matches direct_alignment()");
        let error = expect_err(file.write_at(&buf[..1000], 0), &what("message"));
        assert_message(&error, &path, &["O_DIRECT on this file"], &what("message"));
        assert!(file.is_empty(), "{label}: refused writes grow nothing");
        drop(file);
        assert!(place.read_back(&path).is_empty(), "{label}: nothing reached the file");
    }
}

#[test]
fn store_u64_needs_an_eight_byte_aligned_offset() {
    for place in places() {
        for &method in &place.methods {
            let path = place.path(&format!("{method}.store"));
            let file = place.open(&path, &create(method));
            let label = format!("{} {method}", place.label);
            for offset in [4u64, 1001, 4095] {
                let what = format!("{label}: store_u64 at {offset}");
                let result = file.store_u64(offset, 0xFFFF);
                let op = Op::StoreU64;
                let value = assert_unaligned(result, op, AlignedItem::Offset, 8, &path, &what);
                assert_eq!(value, offset, "{what}");
                let error = expect_err(file.store_u64(offset, 0xFFFF), &what);
                assert_message(&error, &path, &["an atomic 8-byte store"], &what);
            }
            if method == AccessMethod::Direct {
                // An 8-byte transfer can never satisfy O_DIRECT, even at an aligned offset.
                let required = file.direct_alignment().expect("direct alignment");
                let what = format!("{label}: store_u64 at 0");
                let length = AlignedItem::Length;
                let value = assert_unaligned(
                    file.store_u64(0, 1),
                    Op::StoreU64,
                    length,
                    required,
                    &path,
                    &what,
                );
                assert_eq!(value, 8);
            }
            assert!(file.is_empty(), "{label}: refused stores grow nothing");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// File systems that refuse O_DIRECT
// ---------------------------------------------------------------------------------------------

fn assert_direct_unsupported(result: Result<File, Error>, fs_type: &str, path: &Path) {
    let what = format!("O_DIRECT on {fs_type}");
    let error = expect_err(result, &what);
    match &error {
        Error::DirectIoUnsupported { fs_type: found, path: reported } => {
            assert_eq!(found, fs_type, "{error}");
            assert_eq!(reported, path);
        }
        other => panic!("{what}: expected DirectIoUnsupported, got {other:?}"),
    }
    let refuses = format!("the {fs_type} file system refuses direct I/O");
    assert_message(&error, path, &["with O_DIRECT", &refuses, "use the syscall method"], &what);
}

#[test]
fn file_systems_that_refuse_o_direct_are_named() {
    let proc_version = Path::new("/proc/version");
    let options = OpenOptions::new(AccessMethod::Direct).read_only(true);
    assert_direct_unsupported(Storage::Os.open(proc_version, &options), "proc", proc_version);
    // The same file opens without O_DIRECT: it is the method that is refused, not the file.
    let plain = OpenOptions::new(AccessMethod::Syscall).read_only(true);
    Storage::Os.open(proc_version, &plain).expect("/proc/version opens with the syscall method");

    let mount = match Mounted::new("ramfs", "mode=0700") {
        Ok(mount) => mount,
        Err(reason) => return skip("O_DIRECT on ramfs", &reason),
    };
    let created = mount.point.join("created");
    let result = Storage::Os.open(&created, &create(AccessMethod::Direct));
    assert_direct_unsupported(result, "ramfs", &created);
    let existing_path = mount.point.join("existing");
    std::fs::write(&existing_path, b"data").expect("write a ramfs file");
    let result = Storage::Os.open(&existing_path, &existing(AccessMethod::Direct));
    assert_direct_unsupported(result, "ramfs", &existing_path);
    let file = Storage::Os.open(&existing_path, &existing(AccessMethod::Syscall)).expect("syscall");
    let mut back = [0u8; 4];
    file.read_at(&mut back, 0).expect("ramfs reads without O_DIRECT");
    assert_eq!(&back, b"data");
}
