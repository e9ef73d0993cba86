//! Recovery: scan the segments in order, hand every complete record to the caller, stop at the
//! first torn or invalid one, and remove what lies after it.
//!
//! The records form one chain: the first record of the log may have any LSN (older segments
//! may have been truncated away), and each later record has the LSN after its predecessor's.
//! Within a segment, records follow each other from `RECORDS_START`. When a segment's records
//! end (unwritten space, or the pmem commit word), the chain goes on in the next segment only
//! if that segment's first record is valid and has the expected LSN (any LSN while every
//! segment before it was empty).
//!
//! Invariants:
//! 1. Every record handed out has a matching checksum, lies inside its segment (below the
//!    commit word on pmem), and has the LSN after the previous one: no gap, no corruption.
//! 2. After recovery nothing past the stop point can decode again: the rest of the stopping
//!    segment is zeroed and made durable (in a recycled segment, every valid record of its
//!    own past the stop: see 4), and later segments are deleted (each deletion made durable
//!    with a directory sync) before any new record is written.
//! 3. A stop is never silent: the report gives the file, offset and reason, and the LSN range
//!    and bytes discarded. (In a recycled segment, bytes past the stop that hold no valid
//!    record of its own are stale or torn and not reported: a torn record of its own whose
//!    checksum fails, with nothing of its own after it, goes unreported there.)
//! 4. A recycled segment (`Segment::recycle`) may hold an earlier segment's records, all
//!    below its header's stale bound, after its own: they never continue the chain (their
//!    LSNs are below the expected one), and they are not discarded bytes. What counts as
//!    discarded there, and is zeroed, is every record of its own past the stop (an LSN at
//!    or above the bound, checksum matching; see `tail_after` for torn ones). A recycled
//!    segment that recovered no record is removed, so that the records the log takes next
//!    (from any LSN) never go below its bound.
//!
//! Must never: allocate by an unchecked length (lengths are checked against the segment first),
//! or read past a segment's end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tierkv_io::Storage;

use crate::format::{self, Backend, Invalid, RECORDS_START, RECORD_ALIGN, RECORD_HEADER_BYTES};
use crate::segment::Segment;
use crate::{Lsn, RecordType, WalError, WalOptions};

/// Bytes read per call while scanning.
const SCAN_WINDOW_BYTES: usize = 1 << 20;

/// A record handed to the recovery callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its LSN.
    pub lsn: Lsn,
    /// Its type.
    pub kind: RecordType,
    /// Its payload.
    pub payload: &'a [u8],
}

/// Where and why recovery stopped before the end of the written bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopPoint {
    /// The segment file.
    pub file: PathBuf,
    /// The offset of the first byte not recovered.
    pub offset: u64,
    /// Why the bytes there are not the next record.
    pub reason: String,
}

/// What recovery found, kept and discarded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment files present at open.
    pub segments_scanned: usize,
    /// Complete records handed to the callback.
    pub records: u64,
    /// Bytes of those records, headers and padding included.
    pub record_bytes: u64,
    /// The first and last recovered LSN.
    pub lsn_range: Option<(Lsn, Lsn)>,
    /// Where the scan stopped, when bytes followed that were not a valid next record.
    pub stop: Option<StopPoint>,
    /// The LSNs of record headers found past the stop point (best effort: headers that still
    /// decode), from the first missing LSN to the highest found.
    pub discarded_lsn_range: Option<(Lsn, Lsn)>,
    /// Non-zero bytes past the stop point that were zeroed or deleted.
    pub discarded_bytes: u64,
    /// Segment files deleted because they followed the stop point.
    pub removed_segments: Vec<PathBuf>,
    /// Leftover `.prepare` files of an interrupted segment preparation, deleted.
    pub removed_prepare_files: usize,
    /// Files of truncated segments kept for recycling (`.wal.free`), deleted.
    pub removed_free_files: usize,
    /// Time the scan and repair took.
    pub elapsed: Duration,
    /// Where the log ends: its last segment and the offset the next record goes at.
    pub end: Option<(PathBuf, u64)>,
}

/// The log as recovery left it: the live segments in order, and where appending resumes.
pub(crate) struct Recovery {
    /// Live segments, oldest first, with the LSN of their first record (None when empty).
    pub segments: Vec<(Segment, Option<Lsn>)>,
    /// The offset in the last segment where the next record goes.
    pub tail: u64,
    /// The last recovered LSN (`Lsn::ZERO` for an empty log).
    pub last_lsn: Lsn,
    /// The report.
    pub report: RecoveryReport,
}

/// How one segment's scan ended.
struct SegmentEnd {
    /// The offset after the last valid record.
    offset: u64,
    /// Why the next bytes are not a record (`None`: the scan reached the segment's limit).
    invalid: Option<String>,
}

/// What recovery may do to the files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Recover for appending: create the directory, remove what follows the stop point and
    /// leftover `.prepare` files, and make the rest durable.
    Repair,
    /// Only read: open every file read-only, change nothing, and report where the records
    /// end (a missing directory is an empty log).
    ReadOnly,
}

/// Recovers the log in `dir` (see `Mode`).
pub(crate) fn recover(
    storage: &Storage,
    dir: &Path,
    options: &WalOptions,
    mode: Mode,
    on_record: &mut dyn FnMut(Record<'_>),
) -> Result<Recovery, WalError> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    match mode {
        Mode::Repair => create_dir_durably(storage, dir)?,
        Mode::ReadOnly if !storage.exists(dir)? => {
            report.elapsed = started.elapsed();
            return Ok(Recovery {
                segments: Vec::new(),
                tail: RECORDS_START,
                last_lsn: Lsn::ZERO,
                report,
            });
        }
        Mode::ReadOnly => {}
    }
    let mut numbers = Vec::new();
    for name in storage.list_dir(dir)? {
        if format::is_prepare_file_name(&name) && mode == Mode::ReadOnly {
            // An interrupted preparation holds no record; the next writer removes it.
        } else if format::is_prepare_file_name(&name) {
            // CRASH: an interrupted preparation; the segment never took a record.
            storage.remove_file(dir.join(&name))?;
            report.removed_prepare_files += 1;
        } else if format::is_free_file_name(&name) && mode == Mode::Repair {
            // A truncated segment's file kept for recycling: no segment's, and the log
            // recycles only files it freed itself (it knows their LSNs are below its own).
            storage.remove_file(dir.join(&name))?;
            report.removed_free_files += 1;
        } else if let Some(number) = format::parse_segment_file_name(&name) {
            numbers.push(number);
        }
    }
    if report.removed_prepare_files + report.removed_free_files > 0 {
        storage.sync_dir(dir)?;
    }
    numbers.sort_unstable();
    report.segments_scanned = numbers.len();
    let mut segments = Vec::with_capacity(numbers.len());
    for &number in &numbers {
        let path = dir.join(format::segment_file_name(number));
        let read_only = mode == Mode::ReadOnly;
        segments.push(Segment::open_existing(storage, &path, options, number, read_only)?);
    }

    let mut scanner = Scanner {
        backend: options.backend,
        window: Vec::new(),
        window_segment: 0,
        window_at: 0,
        window_len: 0,
        expected: None,
    };
    let mut live: Vec<(Segment, Option<Lsn>)> = Vec::new();
    let mut stop_offset = RECORDS_START;
    let mut stopped: Option<String> = None;
    let mut remaining = segments.into_iter().peekable();
    while let Some(segment) = remaining.next() {
        let mut first_lsn = None;
        let end = scanner.scan(&segment, &mut |record| {
            first_lsn.get_or_insert(record.lsn);
            report.records += 1;
            report.record_bytes += format::record_bytes(record.payload.len());
            on_record(record);
        })?;
        let continues = match remaining.peek() {
            Some(next) => scanner.first_record_continues(next)?,
            None => false,
        };
        live.push((segment, first_lsn));
        if !continues {
            stop_offset = end.offset;
            stopped = end.invalid;
            break;
        }
    }
    // A recycled segment with no record of its own goes (invariant 4). Only the first
    // segment scanned can be live and empty, so every live one is then empty.
    let mut later: Vec<Segment> = remaining.collect();
    if mode == Mode::Repair
        && live.last().is_some_and(|(segment, first)| segment.recycled.is_some() && first.is_none())
    {
        assert!(live.iter().all(|(_, first)| first.is_none()), "an empty segment after records");
        assert_eq!(report.records, 0);
        let emptied: Vec<Segment> = live.drain(..).map(|(segment, _)| segment).collect();
        later.splice(0..0, emptied);
        stop_offset = RECORDS_START;
        stopped = None;
    }
    let last_lsn = scanner.expected.map_or(Lsn::ZERO, |next| Lsn(next.0 - 1));
    if report.records > 0 {
        let first = live.iter().find_map(|(_, first)| *first).unwrap_or(last_lsn);
        report.lsn_range = Some((first, last_lsn));
    }

    if mode == Mode::ReadOnly {
        // Nothing is repaired, so nothing past the stop point is counted either: a reader
        // only needs to know where the records end.
        if let (Some((segment, _)), Some(reason)) = (live.last(), &stopped) {
            let stale = match segment.recycled {
                Some(bound) => tail_after(segment, stop_offset, bound)?.0 == 0,
                None => false,
            };
            if reason != Invalid::Empty.describe() && !stale {
                report.stop = Some(StopPoint {
                    file: segment.path.clone(),
                    offset: stop_offset,
                    reason: reason.clone(),
                });
            }
        }
        report.end = live.last().map(|(segment, _)| (segment.path.clone(), stop_offset));
        report.elapsed = started.elapsed();
        return Ok(Recovery { segments: live, tail: stop_offset, last_lsn, report });
    }

    // Everything after the stop point goes: later segments first (newest first), then the
    // tail of the stopping segment.
    let mut found_past_stop: Option<Lsn> = None;
    for segment in later.into_iter().rev() {
        let (bytes, highest) = match segment.recycled {
            Some(bound) => tail_after(&segment, RECORDS_START, bound)?,
            None => nonzero_tail(&segment, RECORDS_START)?,
        };
        report.discarded_bytes += bytes;
        found_past_stop = found_past_stop.max(highest);
        let path = segment.path.clone();
        drop(segment);
        // CRASH: deleting newest first keeps the chain's break where it is.
        storage.remove_file(&path)?;
        storage.sync_dir(dir)?;
        report.removed_segments.push(path);
    }
    if let Some((segment, _)) = live.last() {
        let (bytes, highest) = match segment.recycled {
            Some(bound) => tail_after(segment, stop_offset, bound)?,
            None => nonzero_tail(segment, stop_offset)?,
        };
        report.discarded_bytes += bytes;
        found_past_stop = found_past_stop.max(highest);
        if bytes > 0 || options.backend == Backend::Pmem {
            repair_tail(segment, options.backend, stop_offset, bytes)?;
        }
        // Past a recycled segment's own records lie an earlier segment's: no stop to report.
        let invalid = stopped.as_deref().is_some_and(|reason| reason != Invalid::Empty.describe());
        if bytes > 0 || (invalid && segment.recycled.is_none()) {
            report.stop = Some(StopPoint {
                file: segment.path.clone(),
                offset: stop_offset,
                reason: stopped.clone().unwrap_or_else(|| "the commit word ends here".into()),
            });
        }
    }
    if report.discarded_bytes > 0 {
        let first_missing = last_lsn.next();
        report.discarded_lsn_range =
            Some((first_missing, found_past_stop.unwrap_or(first_missing).max(first_missing)));
    }
    report.end = live.last().map(|(segment, _)| (segment.path.clone(), stop_offset));
    report.elapsed = started.elapsed();
    Ok(Recovery { segments: live, tail: stop_offset, last_lsn, report })
}

/// Creates `dir` and its missing parents, and makes each new entry durable by syncing the
/// directory that holds it.
fn create_dir_durably(storage: &Storage, dir: &Path) -> Result<(), WalError> {
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(path) = cursor {
        if path.as_os_str().is_empty() || storage.exists(path)? {
            break;
        }
        missing.push(path);
        cursor = path.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    storage.create_dir_all(dir)?;
    for path in missing.iter().rev() {
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            storage.sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Reads records out of segments, keeping the LSN chain.
struct Scanner {
    backend: Backend,
    /// Bytes read from segment `window_segment`: `window_len` of them, from `window_at`.
    window: Vec<u8>,
    window_segment: u64,
    window_at: u64,
    window_len: usize,
    /// The LSN the next record must have (`None` before the first record of the log).
    expected: Option<Lsn>,
}

impl Scanner {
    /// The end of the record area: the commit word on pmem, the file's end otherwise.
    fn limit(&self, segment: &Segment) -> Result<u64, WalError> {
        match self.backend {
            Backend::File => Ok(segment.capacity),
            Backend::Pmem => {
                let word = segment.commit_word()?;
                if word < RECORDS_START
                    || word > segment.capacity
                    || !word.is_multiple_of(RECORD_ALIGN)
                {
                    return Err(WalError::Corruption {
                        file: segment.path.clone(),
                        offset: format::COMMIT_WORD_OFFSET,
                        detail: format!(
                            "commit word {word} is outside {RECORDS_START}..={} or unaligned",
                            segment.capacity
                        ),
                    });
                }
                Ok(word)
            }
        }
    }

    /// Scans one segment, handing valid records in chain order to `on_record`.
    fn scan(
        &mut self,
        segment: &Segment,
        on_record: &mut dyn FnMut(Record<'_>),
    ) -> Result<SegmentEnd, WalError> {
        let limit = self.limit(segment)?;
        let mut offset = RECORDS_START;
        let mut header_bytes = [0u8; RECORD_HEADER_BYTES];
        while offset < limit {
            let room = limit - offset;
            if room < RECORD_HEADER_BYTES as u64 {
                // No record starts where no header fits (appends never reserve one there): the
                // segment's end, not an invalid record (a clean reopen reported a stop here).
                return Ok(SegmentEnd { offset, invalid: None });
            }
            header_bytes.copy_from_slice(self.bytes(segment, offset, RECORD_HEADER_BYTES)?);
            let header = match format::decode_header(&header_bytes, room) {
                Ok(header) => header,
                Err(invalid) => {
                    return Ok(SegmentEnd { offset, invalid: Some(invalid.describe().into()) })
                }
            };
            if let Some(expected) = self.expected {
                if header.lsn != expected {
                    let reason = format!("LSN {} where {expected} was expected", header.lsn);
                    return Ok(SegmentEnd { offset, invalid: Some(reason) });
                }
            } else if header.lsn == Lsn::ZERO {
                return Ok(SegmentEnd { offset, invalid: Some("LSN 0".into()) });
            }
            // `decode_header` checked that the record fits in the segment.
            let payload_at = offset + RECORD_HEADER_BYTES as u64;
            let payload = self.bytes(segment, payload_at, header.len as usize)?;
            if let Err(invalid) = format::check_payload(&header_bytes, &header, payload) {
                return Ok(SegmentEnd { offset, invalid: Some(invalid.describe().into()) });
            }
            let kind = RecordType::new(header.kind).expect("decode_header rejects type 0");
            on_record(Record { lsn: header.lsn, kind, payload });
            self.expected = Some(header.lsn.next());
            offset += format::record_bytes(header.len as usize);
        }
        Ok(SegmentEnd { offset, invalid: None })
    }

    /// Bytes `offset..offset + n` of `segment` (inside it), out of the window, which is read
    /// again, `SCAN_WINDOW_BYTES` at a time (or `n`, if more), where it does not hold them:
    /// a scan makes one read a window rather than two a record.
    fn bytes(&mut self, segment: &Segment, offset: u64, n: usize) -> Result<&[u8], WalError> {
        let end = offset + n as u64;
        assert!(end <= segment.capacity, "a read past the segment's end");
        let held = self.window_segment == segment.number
            && offset >= self.window_at
            && end <= self.window_at + self.window_len as u64;
        if !held {
            let len = n.max(SCAN_WINDOW_BYTES).min((segment.capacity - offset) as usize);
            if self.window.len() < len {
                self.window.resize(len, 0);
            }
            self.window_len = 0;
            segment.file.read_at(&mut self.window[..len], offset)?;
            (self.window_segment, self.window_at, self.window_len) = (segment.number, offset, len);
        }
        let from = (offset - self.window_at) as usize;
        debug_assert!(from + n <= self.window_len);
        Ok(&self.window[from..from + n])
    }

    /// True if `next`'s first record is valid and carries the expected LSN. Before any record
    /// (the segments so far were empty) the chain may start at any LSN: a log whose first
    /// record was larger than its first segment left that segment empty and wrote the record
    /// in the next one, grown for it (recovery used to stop at the empty segment and delete
    /// every record after it).
    fn first_record_continues(&mut self, next: &Segment) -> Result<bool, WalError> {
        let limit = self.limit(next)?;
        if limit < RECORDS_START + RECORD_HEADER_BYTES as u64 {
            return Ok(false);
        }
        let mut header_bytes = [0u8; RECORD_HEADER_BYTES];
        header_bytes.copy_from_slice(self.bytes(next, RECORDS_START, RECORD_HEADER_BYTES)?);
        let Ok(header) = format::decode_header(&header_bytes, limit - RECORDS_START) else {
            return Ok(false);
        };
        if self.expected.is_some_and(|expected| header.lsn != expected) {
            return Ok(false);
        }
        let payload_at = RECORDS_START + RECORD_HEADER_BYTES as u64;
        let payload = self.bytes(next, payload_at, header.len as usize)?;
        Ok(format::check_payload(&header_bytes, &header, payload).is_ok())
    }
}

/// The non-zero bytes from `from` to the end of `segment` (counted from `from` to the end of
/// the last non-zero block), and the highest LSN of a record header that still decodes there.
fn nonzero_tail(segment: &Segment, from: u64) -> Result<(u64, Option<Lsn>), WalError> {
    let mut buf = vec![0u8; SCAN_WINDOW_BYTES];
    let mut last_nonzero_end = from;
    let mut offset = from;
    while offset < segment.capacity {
        let len = (segment.capacity - offset).min(SCAN_WINDOW_BYTES as u64) as usize;
        segment.file.read_at(&mut buf[..len], offset)?;
        if let Some(position) = buf[..len].iter().rposition(|&b| b != 0) {
            last_nonzero_end = offset + position as u64 + 1;
        }
        offset += len as u64;
    }
    // Best effort: walk headers that still decode (checksums ignored) to name the LSNs lost.
    let mut highest = None;
    let mut cursor = from.next_multiple_of(RECORD_ALIGN);
    let mut header_bytes = [0u8; RECORD_HEADER_BYTES];
    while cursor + (RECORD_HEADER_BYTES as u64) <= last_nonzero_end {
        segment.file.read_at(&mut header_bytes, cursor)?;
        match format::decode_header(&header_bytes, segment.capacity - cursor) {
            Ok(header) => {
                highest = highest.max(Some(header.lsn));
                cursor += format::record_bytes(header.len as usize);
            }
            Err(_) => break,
        }
    }
    Ok((last_nonzero_end - from, highest))
}

/// The bytes from `from` to the end of a recycled segment whose stale bound is `bound`
/// that hold records of its own (invariant 4): up to the end of the last record found
/// there with an LSN from `bound` on and a matching checksum, and the highest such LSN.
/// Every 8-byte aligned offset is tried, since the segment's own records past a torn one
/// need not follow a readable chain. A record of its own that a crash tore is left: its
/// checksum fails now and stays failing (later records overwrite it whole or not at all;
/// nothing else writes there), so no chain ever takes it, and it is not counted (counting
/// headers without their checksums counted stale bytes and the zeros of a repair beside
/// them as records).
fn tail_after(segment: &Segment, from: u64, bound: Lsn) -> Result<(u64, Option<Lsn>), WalError> {
    assert!(segment.recycled == Some(bound), "only a recycled segment has a stale bound");
    assert!(from >= RECORDS_START && from.is_multiple_of(RECORD_ALIGN));
    // Its own LSNs lie within this of the bound: a stale payload's bytes that decode as a
    // header (type, zero reserved bytes, a length that fits) almost never also land here.
    const OWN_LSN_SPAN: u64 = 1 << 40;
    let mut window = vec![0u8; SCAN_WINDOW_BYTES + RECORD_HEADER_BYTES];
    let mut payload = Vec::new();
    let mut end = from;
    let mut highest = None;
    let mut at = from;
    while at + RECORD_HEADER_BYTES as u64 <= segment.capacity {
        let len = (segment.capacity - at).min(window.len() as u64) as usize;
        segment.file.read_at(&mut window[..len], at)?;
        // Headers that start in this window (the next window starts where they stop).
        let starts = len.saturating_sub(RECORD_HEADER_BYTES - 1).min(SCAN_WINDOW_BYTES);
        for step in (0..starts).step_by(RECORD_ALIGN as usize) {
            let offset = at + step as u64;
            let bytes = &window[step..step + RECORD_HEADER_BYTES];
            let Ok(header) = format::decode_header(bytes, segment.capacity - offset) else {
                continue;
            };
            if header.lsn < bound || header.lsn.0 - bound.0 >= OWN_LSN_SPAN {
                continue;
            }
            payload.resize(header.len as usize, 0);
            if !payload.is_empty() {
                segment.file.read_at(&mut payload, offset + RECORD_HEADER_BYTES as u64)?;
            }
            if format::check_payload(bytes, &header, &payload).is_ok() {
                end = end.max(offset + format::record_bytes(header.len as usize));
                highest = highest.max(Some(header.lsn));
            }
        }
        at += SCAN_WINDOW_BYTES as u64;
    }
    debug_assert!(end >= from && end <= segment.capacity);
    Ok((end - from, highest))
}

/// Zeroes `len` bytes from `from` in the stopping segment and makes it durable; on pmem also
/// sets the commit word to `from`.
fn repair_tail(segment: &Segment, backend: Backend, from: u64, len: u64) -> Result<(), WalError> {
    let zeros = vec![0u8; SCAN_WINDOW_BYTES];
    let mut offset = from;
    let end = from + len;
    while offset < end {
        let step = (end - offset).min(SCAN_WINDOW_BYTES as u64) as usize;
        segment.file.write_at(&zeros[..step], offset)?;
        offset += step as u64;
    }
    match backend {
        Backend::File => {
            if len > 0 {
                segment.file.sync_data()?;
            }
        }
        Backend::Pmem => {
            if len > 0 {
                segment.file.persist(from, len)?;
            }
            if segment.commit_word()? != from {
                // CRASH: the zeroed tail is durable first, so an old commit word past `from`
                // can only cover zeros, which never decode.
                segment.store_commit_word(from)?;
            }
        }
    }
    Ok(())
}
