//! One segment file: preparing it off the commit path, and opening it for recovery.
//!
//! Preparing a segment (`Segment::prepare`) creates `{n}.wal.prepare`, sizes it to its
//! capacity, writes the header block and zeros over the whole record area, makes all of that
//! durable, renames it to `{n}.wal` and syncs the directory. Only then may it take records.
//!
//! Recycling one (`Segment::recycle`, file backend) does the same with the file of a
//! segment `truncate_below` let go of (`{k}.wal.free`), without the zero-fill: it renames
//! it to `{n}.wal.prepare`, writes a header that marks it recycled with its stale bound
//! (the next LSN the log would hand out: every record the file holds is below it), zeroes
//! the first block of its record space, syncs, and renames it into place as above. The
//! zero-fill wrote a whole segment of zeros through the page cache and the device for
//! every segment the log filled (a tenth of a YCSB run's samples); a recycled file's
//! blocks are allocated and written already, so commits still write data blocks only.
//!
//! Invariants:
//! 1. A file named `{n}.wal` always has a durable, valid header and record space that is
//!    zeroed, or (recycled) holds records below the header's stale bound, or records of
//!    this segment: the rename happens after the sync, and the log uses the segment only
//!    after the directory sync that makes the name durable.
//! 2. Zero-filling (or recycling a file written before) means the file backend's commit
//!    fdatasync writes data blocks only (no unwritten extents to convert, no size to
//!    journal), and the pmem backend's first store to each page neither allocates nor
//!    faults in a block.
//! 3. The first record of a prepared segment, recycled or not, reads as unwritten space
//!    (zeros) until the segment takes one.
//!
//! Must never: leave a `.wal` name on a file whose header is not durable.

use std::path::{Path, PathBuf};

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};

use crate::format::{self, Backend, SegmentHeader, COMMIT_WORD_OFFSET, RECORDS_START};
use crate::{Lsn, WalError, WalOptions};

/// Bytes of zeros written per call while preparing a segment.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// An open segment.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Its number (and file name).
    pub number: u64,
    /// Its path under its final name.
    pub path: PathBuf,
    /// The open file (for a prepared segment, opened under the prepare name).
    pub file: File,
    /// Bytes available: records may occupy `RECORDS_START..capacity`.
    pub capacity: u64,
    /// Recycled: records in it below this LSN are an earlier segment's (`SegmentHeader`).
    pub recycled: Option<Lsn>,
}

/// The access method a backend writes and reads segments with.
pub(crate) fn method_for(backend: Backend) -> AccessMethod {
    match backend {
        Backend::File => AccessMethod::Mmap,
        Backend::Pmem => AccessMethod::Pmem,
    }
}

fn open_options(options: &WalOptions, method: AccessMethod, capacity: u64) -> OpenOptions {
    OpenOptions::new(method)
        .mode(options.file_mode)
        .pmem_mode(options.pmem_mode)
        // The whole segment is allocated in one growth step.
        .chunk_bytes(capacity)
}

/// The `.prepare` and final names of segment `number` in `dir`, with a `.prepare` file
/// that a crash during an earlier preparation left behind removed.
fn names(storage: &Storage, dir: &Path, number: u64) -> Result<(PathBuf, PathBuf), WalError> {
    let temp = dir.join(format::prepare_file_name(number));
    let path = dir.join(format::segment_file_name(number));
    if storage.exists(&temp)? {
        storage.remove_file(&temp)?;
    }
    debug_assert_ne!(temp, path);
    Ok((temp, path))
}

/// Makes the segment under its `.prepare` name (`make`, which leaves it durable), then
/// renames it to its final name and syncs the directory; on an error removes the
/// `.prepare` file (best effort: a leftover one is removed at the next open anyway).
fn into_place<T>(
    storage: &Storage,
    dir: &Path,
    temp: &Path,
    path: &Path,
    make: impl FnOnce() -> Result<T, WalError>,
) -> Result<T, WalError> {
    let result = make().and_then(|made| {
        // CRASH: before the rename, recovery deletes the `.prepare` file; after it and
        // before the directory sync, the name may or may not survive, and either way the
        // segment holds no record of its own yet.
        storage.rename(temp, path)?;
        storage.sync_dir(dir)?;
        Ok(made)
    });
    if result.is_err() {
        let _ = storage.remove_file(temp);
    }
    result
}

impl Segment {
    /// Prepares segment `number` with `capacity` bytes in `dir` (see the module header).
    pub fn prepare(
        storage: &Storage,
        dir: &Path,
        options: &WalOptions,
        number: u64,
        capacity: u64,
    ) -> Result<Segment, WalError> {
        assert!(capacity >= WalOptions::MIN_SEGMENT_BYTES && capacity.is_multiple_of(4096));
        let (temp, path) = names(storage, dir, number)?;
        // The file backend zero-fills with system calls: through its mapping, every page
        // would be faulted in and count as the process's memory.
        let method = method_for(options.backend);
        let filling = match options.backend {
            Backend::File => AccessMethod::Syscall,
            Backend::Pmem => method,
        };
        let file = into_place(storage, dir, &temp, &path, || {
            let file =
                storage.open(&temp, &open_options(options, filling, capacity).create_new(true))?;
            Self::fill(&file, options.backend, number, capacity)?;
            Ok(file)
        })?;
        let file = match filling == method {
            true => file,
            false => {
                drop(file);
                storage.open(&path, &open_options(options, method, capacity))?
            }
        };
        assert_eq!(file.len(), capacity, "a prepared segment is its capacity");
        Ok(Segment { number, path, file, capacity, recycled: None })
    }

    /// Prepares segment `number` in `dir` from `free`, the file of a segment truncated
    /// earlier (file backend; see the module header): every record it holds has an LSN
    /// below `stale_bound`, and every record the segment will take is at or above it. Its
    /// capacity is the file's length. On an error the free file may be gone (a leftover
    /// `.prepare` name is removed at the next open).
    pub fn recycle(
        storage: &Storage,
        dir: &Path,
        options: &WalOptions,
        free: &Path,
        number: u64,
        stale_bound: Lsn,
    ) -> Result<Segment, WalError> {
        assert_eq!(options.backend, Backend::File, "only the file backend recycles");
        assert!(stale_bound > Lsn::ZERO);
        let (temp, path) = names(storage, dir, number)?;
        // CRASH: a `.prepare` name is removed at recovery; the free file was no segment.
        storage.rename(free, &temp)?;
        let capacity = into_place(storage, dir, &temp, &path, || {
            let file = storage
                .open(&temp, &OpenOptions::new(AccessMethod::Syscall).mode(options.file_mode))?;
            let capacity = file.len();
            if capacity < WalOptions::MIN_SEGMENT_BYTES || !capacity.is_multiple_of(4096) {
                return Err(WalError::Corruption {
                    file: temp.clone(),
                    offset: 0,
                    detail: format!("a free segment of {capacity} bytes cannot be recycled"),
                });
            }
            let header = SegmentHeader {
                number,
                capacity,
                backend: Backend::File,
                recycled: Some(stale_bound),
            };
            let mut block = header.encode();
            // The header block, then the first block of record space zeroed: the segment
            // reads as empty until it takes its first record.
            block.resize(2 * RECORDS_START as usize, 0);
            file.write_at(&block, 0)?;
            file.sync_data()?;
            Ok(capacity)
        })?;
        let file =
            storage.open(&path, &open_options(options, method_for(Backend::File), capacity))?;
        assert_eq!(file.len(), capacity, "a recycled segment keeps its file's length");
        Ok(Segment { number, path, file, capacity, recycled: Some(stale_bound) })
    }

    fn fill(file: &File, backend: Backend, number: u64, capacity: u64) -> Result<(), WalError> {
        file.reserve(capacity)?;
        let header = SegmentHeader { number, capacity, backend, recycled: None };
        file.write_at(&header.encode(), 0)?;
        let zeros = vec![0u8; ZERO_FILL_BYTES];
        let mut offset = RECORDS_START;
        while offset < capacity {
            let len = (capacity - offset).min(ZERO_FILL_BYTES as u64) as usize;
            file.write_at(&zeros[..len], offset)?;
            offset += len as u64;
        }
        if backend == Backend::Pmem {
            file.persist(0, capacity)?;
        }
        // The size and allocation are metadata: fsync, not fdatasync.
        file.sync_all()?;
        Ok(())
    }

    /// Opens an existing segment for recovery and checks its header. A `read_only` segment
    /// is read with system calls whatever the backend: it is never written, and a pmem
    /// segment's bytes are in the file either way.
    pub fn open_existing(
        storage: &Storage,
        path: &Path,
        options: &WalOptions,
        number: u64,
        read_only: bool,
    ) -> Result<Segment, WalError> {
        let probe = match read_only {
            true => OpenOptions::new(AccessMethod::Syscall).read_only(true),
            false => OpenOptions::new(method_for(options.backend)).pmem_mode(options.pmem_mode),
        };
        let file = storage.open(path, &probe)?;
        let corrupt = |offset: u64, detail: String| WalError::Corruption {
            file: path.to_path_buf(),
            offset,
            detail,
        };
        let len = file.len();
        if len < RECORDS_START {
            return Err(corrupt(
                0,
                format!("{len} bytes, shorter than the {RECORDS_START}-byte header"),
            ));
        }
        let mut block = vec![0u8; 64];
        file.read_at(&mut block, 0)?;
        let header = SegmentHeader::decode(&block).map_err(|detail| corrupt(0, detail))?;
        if header.number != number {
            return Err(corrupt(
                16,
                format!("the header says segment {}, the name says {number}", header.number),
            ));
        }
        if header.backend != options.backend {
            return Err(WalError::InvalidOptions(format!(
                "{} was written by the {} backend; open the log with that backend",
                path.display(),
                header.backend
            )));
        }
        Ok(Segment {
            number,
            path: path.to_path_buf(),
            file,
            capacity: len,
            recycled: header.recycled,
        })
    }

    /// The pmem commit word: the end offset of the committed records.
    pub fn commit_word(&self) -> Result<u64, WalError> {
        let mut word = [0u8; 8];
        self.file.read_at(&mut word, COMMIT_WORD_OFFSET)?;
        Ok(u64::from_le_bytes(word))
    }

    /// Stores and persists the pmem commit word.
    pub fn store_commit_word(&self, end: u64) -> Result<(), WalError> {
        self.file.store_u64(COMMIT_WORD_OFFSET, end)?;
        self.file.persist(COMMIT_WORD_OFFSET, 8)?;
        Ok(())
    }
}
