//! Segment files: the store's directory made durably, a segment created (temp file with its
//! header, allocated, zero-filled unless the options say not, synced, renamed, directory
//! synced) or opened (a handle for appends and one for reads by the configured method), and
//! a segment cut at a torn tail and refilled with zeros.
//!
//! Must never: give a segment its name before it is allocated (and zero-filled, if it is to
//! be) and synced. Space allocated and never written reads as zeros, so recovery's scan ends
//! at the first unwritten block either way.

use std::path::Path;
use std::sync::Arc;

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};

use super::{SegmentFile, Stream};
use crate::format::{self, SegmentHeader, BLOCKS_START};
use crate::{BlockError, StoreOptions};

/// Creates `dir` and makes its entry durable in its parent.
pub(super) fn create_dir_durably(storage: &Storage, dir: &Path) -> Result<(), BlockError> {
    if storage.exists(dir)? {
        return Ok(());
    }
    storage.create_dir_all(dir)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        storage.sync_dir(parent)?;
    }
    Ok(())
}

fn segment_open_options(method: AccessMethod, options: &StoreOptions) -> OpenOptions {
    OpenOptions::new(method).mode(options.file_mode).chunk_bytes(1).read_only(options.read_only)
}

/// Opens both handles of an existing segment.
pub(super) fn open_segment(
    storage: &Storage,
    dir: &Path,
    options: &StoreOptions,
    number: u64,
) -> Result<SegmentFile, BlockError> {
    let path = dir.join(format::segment_file_name(number));
    let writer =
        Arc::new(storage.open(&path, &segment_open_options(AccessMethod::Syscall, options))?);
    let reader = storage.open(&path, &segment_open_options(options.read_method, options))?;
    Ok(SegmentFile { number, path, writer, reader })
}

/// Creates a segment: a temp file with its header, allocated to `capacity`, zero-filled if
/// `options.zero_fill_segments` and synced, then renamed into place and the directory synced.
/// Zero-filling costs one write of the segment, but then no block write changes the file's
/// extent map (a write into preallocated, never written space does, and each fdatasync after
/// it writes that metadata too). Returns the segment and the bytes written to make it.
pub(super) fn create_segment(
    storage: &Storage,
    dir: &Path,
    options: &StoreOptions,
    number: u64,
    capacity: u64,
    stream: Stream,
) -> Result<(SegmentFile, u64), BlockError> {
    let name = format::segment_file_name(number);
    let temp = dir.join(format!("{name}.tmp"));
    let file = storage.open(
        &temp,
        &OpenOptions::new(AccessMethod::Syscall)
            .create(true)
            .mode(options.file_mode)
            .chunk_bytes(capacity),
    )?;
    file.set_len(0)?;
    file.reserve(capacity)?;
    if file.len() != capacity {
        file.set_len(capacity)?;
    }
    let header = SegmentHeader { number, capacity, stream: stream as u8 };
    let encoded = format::encode_segment_header(&header);
    file.write_at(&encoded, 0)?;
    let mut written = encoded.len() as u64;
    if options.zero_fill_segments {
        write_zeros(&file, BLOCKS_START, capacity)?;
        written = capacity;
    }
    file.sync_all()?;
    assert_eq!(file.len(), capacity, "segment {number} is not its capacity after the sync");
    drop(file);
    storage.rename(&temp, dir.join(&name))?;
    // CRASH: before this returns the segment may vanish; it holds nothing yet.
    storage.sync_dir(dir)?;
    Ok((open_segment(storage, dir, options, number)?, written))
}

/// Cuts a segment at `cut` and makes it `capacity` bytes again, zero after the cut, durably.
pub(super) fn cut_and_refill(
    file: &SegmentFile,
    cut: u64,
    capacity: u64,
) -> Result<(), BlockError> {
    if file.writer.len() != capacity {
        file.writer.set_len(capacity)?;
    }
    write_zeros(&file.writer, cut, capacity)?;
    file.writer.sync_all()?;
    Ok(())
}

/// Bytes per write of `write_zeros`: one page. Written a page at a time, the file sits in
/// the page cache in small folios, so a later block write dirties only its own pages, and
/// `/proc/self/io` charges only those (large folios are charged whole).
const ZERO_WRITE_BYTES: u64 = 4096;

/// Writes zeros over `from..to`.
fn write_zeros(file: &File, from: u64, to: u64) -> Result<(), BlockError> {
    let zeros = vec![0u8; (to.saturating_sub(from)).min(ZERO_WRITE_BYTES) as usize];
    let mut at = from;
    // Bounded: each pass advances `at` by at least one byte until it reaches `to`.
    while at < to {
        let len = (to - at).min(zeros.len() as u64) as usize;
        file.write_at(&zeros[..len], at)?;
        at += len as u64;
    }
    Ok(())
}
