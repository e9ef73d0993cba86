//! The log's part of a salvage: the records after the tree's checkpoint replayed into the
//! new store, up to the first record that is not intact; and, when the log stops early,
//! the records lost after the stop, named by the intact records found past it.
//!
//! Records the checkpoint covers, which the log may still hold (it is truncated by whole
//! segments), also fill the key ranges the tree lost: their puts and deletes in those
//! ranges are applied, in order, once the chain is seen to reach the checkpoint. A chain
//! that holds every record from its first to the checkpoint holds the last write to any
//! key it wrote at all, so what it says of a key is the tree's value for it.
//!
//! The log is read by `Wal::read_only`, which hands over the chain of intact records and
//! stops at the first break. Past a break, records are only looked for (every
//! `RECORD_ALIGN` step, header and checksum), never replayed: a write after a lost one may
//! have been undone or overwritten by it.
//!
//! Must never: write to the log's directory; replay a record whose checksum did not hold,
//! or a record after a gap in the chain.

use std::path::Path;

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};
use tierkv_wal::format as wal_format;
use tierkv_wal::{Backend, Wal, WalError, WalOptions};

use super::report::{KeySpan, LogSalvage, LostRecords};
use super::Target;
use crate::batch::{WriteBatch, BATCH_RECORD};
use crate::Result;

/// What the log pass found, beyond the report's part.
pub(super) struct LogPass {
    /// The report's part.
    pub salvage: LogSalvage,
    /// The first and last intact record of the chain read, when it was read to a clean end
    /// (no damage, no failure): the log then holds every write up to its last record.
    pub clean: Option<(u64, u64)>,
}

/// Replays the records after `after` (every record when `None`: no checkpoint is known)
/// from the log in `dir` into `target`. `backend` is the one the store's identity names,
/// or `None` to try each. Errors are those of the new store; the log's are in the result.
pub(super) fn replay(
    storage: &Storage,
    dir: &Path,
    backend: Option<Backend>,
    after: Option<u64>,
    lost: &[KeySpan],
    target: &mut Target,
) -> Result<LogPass> {
    let mut salvage = LogSalvage { dir: dir.to_path_buf(), ..LogSalvage::default() };
    let floor = after.unwrap_or(0);
    if !storage.exists(dir)? {
        // Every store has a log: whatever it held after the checkpoint is gone.
        salvage.stop = Some(format!("there is no log at {}", dir.display()));
        salvage.lost = Some(LostRecords { first: floor + 1, last: None });
        return Ok(LogPass { salvage, clean: None });
    }
    let backends = match backend {
        Some(backend) => vec![backend],
        None => vec![Backend::File, Backend::Pmem],
    };
    let mut outcome = Err(WalError::InvalidOptions("no backend tried".into()));
    let mut replay = Replay {
        floor,
        lost,
        held: Some(Vec::new()),
        target,
        salvage: &mut salvage,
        bad: None,
        failed: None,
    };
    for backend in backends {
        let options = WalOptions { backend, ..WalOptions::default() };
        outcome = Wal::read_only(storage, dir, &options, |record| replay.record(record));
        // A segment written by the other backend is refused before any record is read.
        if !matches!(outcome, Err(WalError::InvalidOptions(_))) {
            break;
        }
    }
    let (bad, failed) = (replay.bad.take(), replay.failed.take());
    if let Some(error) = failed {
        return Err(error);
    }
    let reached =
        matches!(&outcome, Ok(report) if report.lsn_range.is_some_and(|(_, l)| l.0 >= floor));
    match reached {
        true => replay.release()?,
        false => replay.held = None,
    }
    replay.target.flush()?;
    let mut reasons = Vec::new();
    let last_read = match &outcome {
        Ok(report) => {
            if let Some(stop) = &report.stop {
                let (file, offset) = (stop.file.display(), stop.offset);
                reasons.push(format!("{file} offset {offset}: {}", stop.reason));
            }
            report.lsn_range.map(|(_, last)| last.0)
        }
        Err(error) => {
            reasons.push(format!("the log could not be read: {error}"));
            None
        }
    };
    if let Some((lsn, why)) = &bad {
        reasons.push(format!("record {lsn} {why}"));
    }
    match cut_segments(storage, dir) {
        Ok(cuts) => reasons.extend(cuts),
        Err(error) => reasons.push(format!("the log's segment files cannot be read: {error}")),
    }
    let clean = match (&outcome, reasons.is_empty()) {
        (Ok(report), true) => report.lsn_range.map(|(first, last)| (first.0, last.0)),
        _ => None,
    };
    if !reasons.is_empty() {
        // The first record not replayed: the bad one, or the one after the chain's end.
        let next = bad.map_or_else(|| last_read.map_or(1, |last| last + 1), |(lsn, _)| lsn);
        let first = next.max(floor + 1);
        // A failed read only leaves the end of the loss unknown.
        let highest = highest_intact_lsn(storage, dir).ok().flatten();
        let last = highest.filter(|&found| found >= first);
        // A break among records the checkpoint covers loses nothing, unless intact records
        // after the checkpoint lie past it.
        if last.is_some() || next > floor {
            salvage.lost = Some(LostRecords { first, last });
        }
        salvage.stop = Some(reasons.join("; "));
    }
    if let Some((first, _)) = clean.filter(|_| after.is_some()) {
        if first > floor + 1 {
            salvage.lost = Some(LostRecords { first: floor + 1, last: Some(first - 1) });
        }
    }
    debug_assert!(salvage.replayed.is_none_or(|(first, last)| first <= last && first > floor));
    debug_assert!(salvage.lost.is_none_or(|lost| lost.first > floor));
    Ok(LogPass { salvage, clean })
}

/// The first record of the log in `dir`, read as `replay` reads it; `None` when there is
/// none or the log cannot be read.
pub(super) fn first_lsn(storage: &Storage, dir: &Path, backend: Option<Backend>) -> Option<u64> {
    if !storage.exists(dir).ok()? {
        return None;
    }
    let backends = match backend {
        Some(backend) => vec![backend],
        None => vec![Backend::File, Backend::Pmem],
    };
    for backend in backends {
        let options = WalOptions { backend, ..WalOptions::default() };
        match Wal::read_only(storage, dir, &options, |_| {}) {
            Ok(report) => return report.lsn_range.map(|(first, _)| first.0),
            Err(WalError::InvalidOptions(_)) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// A put (with its value) or a delete (`None`) of a key.
type Write = (Vec<u8>, Option<Vec<u8>>);

/// The callback's state: records after `floor` go to `target` until one is bad; before,
/// their writes in `lost` ranges are held until the chain reaches `floor`.
struct Replay<'a> {
    floor: u64,
    lost: &'a [KeySpan],
    /// Writes in lost ranges of the records the checkpoint covers, in order; `None` once
    /// released, or given up (a record among them did not decode).
    held: Option<Vec<Write>>,
    target: &'a mut Target,
    salvage: &'a mut LogSalvage,
    /// The first record with a good checksum that is not a batch, and why.
    bad: Option<(u64, String)>,
    /// The first failure of the new store (the callback cannot return it).
    failed: Option<crate::Error>,
}

impl Replay<'_> {
    /// Applies the held writes (the chain reached the checkpoint).
    fn release(&mut self) -> Result<()> {
        for (key, value) in self.held.take().unwrap_or_default() {
            match value {
                Some(value) => self.target.put(&key, &value)?,
                None => self.target.delete(&key)?,
            }
            self.salvage.filled += 1;
        }
        Ok(())
    }

    /// Holds the writes of covered record `lsn` that fall in lost ranges.
    fn hold(&mut self, lsn: u64, payload: &[u8]) {
        let Some(held) = self.held.as_mut() else { return };
        if self.lost.is_empty() {
            return;
        }
        let Ok(batch) = WriteBatch::decode(payload) else {
            // Nothing of it can be trusted to be the last write of its keys.
            self.held = None;
            return;
        };
        for (key, value) in batch.ops() {
            if self.lost.iter().any(|span| span.contains(key)) {
                held.push((key.to_vec(), value.map(<[u8]>::to_vec)));
            }
        }
        debug_assert!(lsn <= self.floor);
    }

    fn record(&mut self, record: tierkv_wal::Record<'_>) {
        let lsn = record.lsn.0;
        if self.bad.is_some() || self.failed.is_some() {
            return;
        }
        if lsn <= self.floor {
            if record.kind.get() == BATCH_RECORD {
                self.hold(lsn, record.payload);
            } else {
                self.held = None;
            }
            return;
        }
        // The chain passed the checkpoint: what it held before is complete.
        if let Err(error) = self.release() {
            self.failed = Some(error);
            return;
        }
        if record.kind.get() != BATCH_RECORD {
            self.bad = Some((lsn, format!("has type {}, not a write batch", record.kind.get())));
            return;
        }
        let batch = match WriteBatch::decode(record.payload) {
            Ok(batch) => batch,
            Err(detail) => {
                self.bad = Some((lsn, format!("does not decode: {detail}")));
                return;
            }
        };
        for (key, value) in batch.ops() {
            let written = match value {
                Some(value) => self.target.put(key, value),
                None => self.target.delete(key),
            };
            if let Err(error) = written {
                self.failed = Some(error);
                return;
            }
            match value {
                Some(_) => self.salvage.puts += 1,
                None => self.salvage.deletes += 1,
            }
        }
        self.salvage.records += 1;
        let first = self.salvage.replayed.map_or(lsn, |(first, _)| first);
        self.salvage.replayed = Some((first, lsn));
    }
}

/// The log's segment files.
fn segment_files(storage: &Storage, dir: &Path) -> Result<Vec<(std::path::PathBuf, File)>> {
    let mut names = storage.list_dir(dir)?;
    names.sort();
    let mut files = Vec::new();
    for name in names.iter().filter(|name| wal_format::parse_segment_file_name(name).is_some()) {
        let path = dir.join(name);
        let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall).read_only(true))?;
        files.push((path, file));
    }
    Ok(files)
}

/// The segment files shorter than their header says they were made (their end is gone),
/// one line each.
fn cut_segments(storage: &Storage, dir: &Path) -> Result<Vec<String>> {
    let mut cuts = Vec::new();
    for (path, file) in segment_files(storage, dir)? {
        let len = file.len();
        let mut head = vec![0u8; len.min(64) as usize];
        if !head.is_empty() {
            file.read_at(&mut head, 0)?;
        }
        if let Some(header) =
            wal_format::SegmentHeader::decode(&head).ok().filter(|h| h.capacity > len)
        {
            cuts.push(format!(
                "{} is cut short ({len} of its {} bytes): records in the rest are lost",
                path.display(),
                header.capacity
            ));
        }
    }
    Ok(cuts)
}

/// The highest LSN of an intact record (header and checksum hold) anywhere in the log's
/// segment files, whatever the chain: how far lost records reach.
fn highest_intact_lsn(storage: &Storage, dir: &Path) -> Result<Option<u64>> {
    let mut highest = None;
    for (path, file) in segment_files(storage, dir)? {
        let len = file.len();
        let mut bytes = vec![0u8; len as usize];
        if len > 0 {
            file.read_at(&mut bytes, 0)?;
        }
        let mut at = wal_format::RECORDS_START;
        let header_bytes = wal_format::RECORD_HEADER_BYTES as u64;
        // Bounded: every pass moves `at` on by at least `RECORD_ALIGN`.
        while at + header_bytes <= len {
            let from = at as usize;
            let step = match wal_format::decode_header(&bytes[from..], len - at) {
                Ok(header) => {
                    let start = from + wal_format::RECORD_HEADER_BYTES;
                    let payload = &bytes[start..start + header.len as usize];
                    match wal_format::check_payload(&bytes[from..start], &header, payload) {
                        Ok(()) => {
                            highest = highest.max(Some(header.lsn.0));
                            wal_format::record_bytes(header.len as usize)
                        }
                        Err(_) => wal_format::RECORD_ALIGN,
                    }
                }
                Err(_) => wal_format::RECORD_ALIGN,
            };
            assert!(step >= wal_format::RECORD_ALIGN, "the scan of {} stalled", path.display());
            at += step;
        }
    }
    Ok(highest)
}
