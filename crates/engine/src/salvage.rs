//! `salvage`: copies every entry that can still be read from a damaged store into a new
//! one, and reports what it could not recover, by key range. `tierkv salvage` is its
//! command; RocksDB's `ldb repair`, WiredTiger's `wt salvage` and SQLite's `.recover` are
//! its peers.
//!
//! Sources, in order of trust:
//! 1. **The tree**, from the meta block's root. Every leaf reached and read is the store's
//!    content for its key range. Where a page cannot be read, the separators around it
//!    name the key range lost (`LostRange`).
//! 2. **Loose blocks**, for the ranges the tree lost: leaf pages among the blocks whose
//!    checksums hold that the walk did not reach. With the meta block read, the blocks it
//!    lists as retired (its free list), the orphans of an unfinished checkpoint
//!    (`orphans_from..next_page`) and ids past `next_page` are left out. When the blocks
//!    were read through the block store's map, the meta block is not in doubt and the free
//!    list was read, what is left is exactly the tree's own leaves under the lost pages:
//!    their entries are sure. Otherwise a loose leaf may be a retired copy, holding an older
//!    value or a key since deleted: its entries are copied and the range is reported in
//!    doubt (`DoubtfulRange`). Without a meta block there is no root: every key comes from
//!    loose leaves, all in doubt. Through the map each id is its newest copy (pages change
//!    in place, keeping their ids); a key two leaves hold (moved by a split, or a copy of
//!    an older tree) is taken from the highest id.
//! 3. **The log**: the records after the checkpoint's sequence (every record, without a
//!    meta block) replayed over the result, puts and deletes, up to the first record that
//!    is not intact; the records lost after it are reported. The records the checkpoint
//!    covers that the log still holds fill the lost ranges too (see `log`).
//!
//! Blocks are read through the block store's map (`LogStore::open`, read-only) when it
//! loads; when it does not (a damaged map checkpoint, a damaged sealed segment), or when
//! its recovery cut the log's end at damage before a newer meta block (recovery leaves
//! out everything after the first invalid block of a stream's last segment, complete
//! groups too), through `tierkv_blockstore::scan_segments`, which finds every block whose
//! checksum holds and says where a newer copy of one may have been lost. Such a doubt counts for a page only
//! if the lost copy could be older than the meta block (a published page is never
//! rewritten). A meta block itself in doubt (the scan's doubt, or a block store whose
//! recovery cut its log's end) is weighed against the log: when the log starts past its
//! checkpoint, a later checkpoint finished (the log is truncated only once a checkpoint's
//! group is durable), so the incomplete group left out at the block store's end was
//! written in full and damaged, and a scan that keeps it is used (`take_back`); when the
//! log holds every write since its checkpoint, read to a clean end, the doubt is set
//! aside; otherwise every key is reported in doubt.
//!
//! Values kept in overflow blocks are copied when every block reads; otherwise the key is
//! reported (`LostValue`) and not copied.
//!
//! The damaged store is only read: its identity file (for the page size, the log's place
//! and backend; a damaged one costs only those, which `SalvageOptions::log_dir` can give),
//! its block store and its log are opened read-only, under a shared lock when it has a
//! lock file. The new store is made by `Db::open` in a missing or empty directory (never
//! over a store); it takes the entries in batches of `Durability::None`, and is synced
//! once, by its close. Loose-leaf recovery holds the keys it recovers in memory; the tree
//! and the log are copied as they are read.
//!
//! Must never: write to the damaged store; copy a value whose block or record failed its
//! checksum; copy an entry into a range the report does not name when its source may be
//! out of date; report a salvage complete when anything was lost or is in doubt.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use tierkv_blockstore::{
    scan_segments, scan_segments_with, BlockId, LogStore, ScanOptions, SegmentScan, StoreOptions,
};
use tierkv_io::{FileLock, Storage};
use tierkv_wal::Durability;

use crate::batch::{WriteBatch, MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::block_pages::OVERFLOW_BLOCK_BYTES;
use crate::identity::{self, Identity, StoreState, BLOCKS_DIR};
use crate::meta::{Meta, META_BLOCK};
use crate::page::{self, OverflowRef, Page, Value};
use crate::{Db, Error, Options, Result};

mod log;
mod report;
#[cfg(test)]
mod tests;

pub use report::{
    DoubtfulRange, KeySpan, LogSalvage, LostRange, LostRecords, LostValue, SalvageReport,
};

/// How to salvage.
#[derive(Clone, Debug, Default)]
pub struct SalvageOptions {
    /// Where the damaged store's log lies, when its identity file cannot say (it is
    /// damaged) or says wrong (the log was moved). `None`: where the identity file says,
    /// else `log` inside the store.
    pub log_dir: Option<PathBuf>,
    /// The new store's options. Its page size is the damaged store's unless set here;
    /// `read_only`, `create_if_missing` and `error_if_exists` are salvage's to set.
    pub target: Options,
}

/// Bytes of a batch written to the new store, about.
const BATCH_BYTES: usize = 1 << 20;

/// Levels of the tree at most: deeper is a cycle or damage.
const MAX_DEPTH: usize = 64;

/// Salvages the store in `from` into a new store in `to` on the OS's file system (see
/// the module header for what is copied and what is reported).
///
/// # Errors
///
/// `Error::NotFound` or `Error::NotADirectory` when there is no directory at `from`;
/// `Error::AlreadyOpen` when a writer holds it; the errors of `Db::open` for `to` (a store
/// or other files there: `Error::AlreadyExists`, `Error::NotAStore`); and I/O errors that
/// keep the new store from being written or the damaged one from being listed. Damage in
/// the damaged store is never an error: it is in the report.
pub fn salvage(
    from: impl AsRef<Path>,
    to: impl AsRef<Path>,
    options: SalvageOptions,
) -> Result<SalvageReport> {
    salvage_on(&Storage::Os, from, to, options)
}

/// `salvage` on `storage` (the simulated file system in tests).
///
/// # Errors
///
/// As [`salvage`].
pub fn salvage_on(
    storage: &Storage,
    from: impl AsRef<Path>,
    to: impl AsRef<Path>,
    options: SalvageOptions,
) -> Result<SalvageReport> {
    let (from, to) = (from.as_ref(), to.as_ref());
    if !storage.exists(from)? {
        return Err(Error::NotFound {
            path: from.to_path_buf(),
            detail: "nothing is there to salvage".into(),
        });
    }
    if !storage.is_dir(from)? {
        return Err(Error::NotADirectory { path: from.to_path_buf() });
    }
    let _lock = shared_lock(storage, from)?;
    let mut report = SalvageReport {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        ..SalvageReport::default()
    };
    let identity = read_identity(storage, from, &mut report);
    let log_dir = options
        .log_dir
        .clone()
        .or_else(|| identity.as_ref().map(|identity| identity.log_dir_in(from)))
        .unwrap_or_else(|| from.join(identity::LOG_DIR));
    let backend = identity.as_ref().map(|identity| identity.log_backend);
    let blocks_dir = from.join(BLOCKS_DIR);
    let mut blocks = open_blocks(storage, &blocks_dir, &mut report);
    let (mut meta, mut meta_doubt) = read_meta(&blocks, &mut report);
    if let Some((found, _)) = meta.filter(|_| meta_doubt.is_some()) {
        if let Some(taken) = take_back(storage, &blocks_dir, &log_dir, backend, &found, &mut report)
        {
            blocks = taken;
            (meta, meta_doubt) = read_meta(&blocks, &mut report);
        }
    }
    let page_bytes = identity
        .as_ref()
        .map(|identity| identity.page_bytes as usize)
        .or(meta.map(|(meta, _)| meta.max_page_bytes as usize));
    let target_options = Options {
        max_page_bytes: options.target.max_page_bytes.or(page_bytes),
        read_only: false,
        create_if_missing: true,
        error_if_exists: true,
        ..options.target.clone()
    };
    let mut target =
        Target { db: Db::open_on(storage, to, target_options)?, batch: WriteBatch::new() };
    let mut walk = Walk {
        blocks: &blocks,
        target: &mut target,
        report: &mut report,
        seen: HashSet::new(),
        overflow: HashSet::new(),
        meta_version: meta.and_then(|(_, version)| version),
        orphans_from: meta.map(|(meta, _)| meta.orphans_from),
    };
    match meta {
        Some((meta, _)) => {
            walk.report.checkpoint = Some((meta.root, meta.sequence));
            walk.page(meta.root, None, None, 1, false)?;
            if !walk.report.lost.is_empty() {
                let excluded = walk.excluded(&meta);
                let sure = matches!(blocks, Blocks::Map(_)) && meta_doubt.is_none();
                let sure = sure && excluded.is_some();
                walk.loose(excluded.unwrap_or_default(), sure)?;
            }
        }
        None => {
            let reason = "the meta block could not be read: there is no root".to_string();
            walk.report.lost.push(LostRange { span: KeySpan::all(), reason, recovered: 0 });
            walk.loose(HashSet::from([META_BLOCK.0]), false)?;
        }
    }
    let sequence = meta.map(|(meta, _)| meta.sequence);
    let lost: Vec<KeySpan> = report.lost.iter().map(|lost| lost.span.clone()).collect();
    let pass = log::replay(storage, &log_dir, backend, sequence, &lost, &mut target)?;
    report.log = pass.salvage;
    settle_meta_doubt(&mut report, meta_doubt, sequence, pass.clean);
    if let Some(lost) = report.log.lost {
        report.doubtful.push(DoubtfulRange {
            span: KeySpan::all(),
            reason: format!(
                "log {lost} could not be replayed: a key they wrote may hold an older value \
                 here, or be here though they deleted it"
            ),
        });
    }
    if identity.as_ref().is_some_and(|identity| identity.state == StoreState::BackupInProgress) {
        report.lost.push(LostRange {
            span: KeySpan::all(),
            reason: "the store is a backup that never finished: what it had not copied yet \
                     is not here"
                .into(),
            recovered: 0,
        });
    }
    target.flush()?;
    target.db.close()?;
    let recovered: u64 = report.lost.iter().map(|lost| lost.recovered).sum();
    assert_eq!(report.loose_entries, recovered, "loose entries outside every lost range");
    assert!(report.checkpoint.is_some() || !report.lost.is_empty(), "no tree, and nothing lost");
    Ok(report)
}

/// Holds the damaged store's lock shared, when it has a lock file, so that no writer
/// changes it during the salvage.
fn shared_lock(storage: &Storage, from: &Path) -> Result<Option<FileLock>> {
    match storage.lock_file_shared(from.join(crate::db::LOCK_FILE)) {
        Ok(lock) => Ok(Some(lock)),
        Err(tierkv_io::Error::NotFound { .. }) => Ok(None),
        Err(tierkv_io::Error::Locked { .. }) => Err(Error::AlreadyOpen { dir: from.to_path_buf() }),
        Err(other) => Err(other.into()),
    }
}

/// The identity file, or `None` (with the problem reported) when it is missing or damaged.
fn read_identity(storage: &Storage, from: &Path, report: &mut SalvageReport) -> Option<Identity> {
    match Identity::read(storage, from) {
        Ok(Some(identity)) => {
            match identity.state {
                StoreState::Ready => {}
                StoreState::Creating => report
                    .problems
                    .push("the identity file says the store's creation never finished".into()),
                StoreState::BackupInProgress => report.problems.push(
                    "the identity file says this is a backup that never finished: its entries \
                     are not all there"
                        .into(),
                ),
            }
            Some(identity)
        }
        Ok(None) => {
            report.problems.push(format!(
                "there is no identity file ({}): the page size comes from the meta block, the \
                 log is looked for where the options say, else in `log`",
                identity::IDENTITY_FILE
            ));
            None
        }
        Err(error) => {
            report.problems.push(format!(
                "the identity file cannot be read ({error}): the page size comes from the \
                 meta block, the log is looked for where the options say, else in `log`"
            ));
            None
        }
    }
}

/// Where blocks are read from.
enum Blocks {
    /// Through the block store's map.
    Map(LogStore),
    /// Through a scan of every segment file.
    Scan(SegmentScan),
    /// Nowhere: there are no blocks.
    None,
}

/// A block's content, with the scan's doubt about it and its version where known.
struct Read {
    bytes: Vec<u8>,
    doubt: Option<tierkv_blockstore::Doubt>,
    version: Option<u64>,
}

impl Blocks {
    /// Why block `id` (a `what`) was not found, in the words of where blocks come from.
    fn absent(&self, what: &str, id: u64) -> String {
        match self {
            Blocks::Map(_) => {
                format!("{what} {id} is missing: the block store holds no such block")
            }
            Blocks::Scan(_) => format!("no intact copy of {what} {id} was found"),
            Blocks::None => format!("{what} {id} is missing: there is no block store"),
        }
    }

    /// Block `id`: `Ok(None)` when there is none (never written, or deleted), `Err` with
    /// what is wrong when it cannot be read.
    fn read(&self, id: u64) -> std::result::Result<Option<Read>, String> {
        match self {
            Blocks::Map(store) => match store.read_versioned(BlockId(id)) {
                Ok(found) => Ok(found.map(|(bytes, version)| Read {
                    bytes,
                    doubt: None,
                    version: version.map(|v| v.0),
                })),
                Err(error) => Err(error.to_string()),
            },
            Blocks::Scan(scan) => {
                let Some(found) = scan.get(BlockId(id)) else { return Ok(None) };
                let (doubt, version) = (found.doubt.clone(), found.version.0);
                match scan.read(BlockId(id)) {
                    Ok(bytes) => {
                        Ok(bytes.map(|bytes| Read { bytes, doubt, version: Some(version) }))
                    }
                    Err(error) => Err(error.to_string()),
                }
            }
            Blocks::None => Ok(None),
        }
    }
}

/// Opens the block store read-only; when its map does not load, scans its segments.
fn open_blocks(storage: &Storage, dir: &Path, report: &mut SalvageReport) -> Blocks {
    match storage.is_dir(dir) {
        Ok(true) => {}
        Ok(false) => {
            report.problems.push(format!("there is no block store ({} is missing)", dir.display()));
            return Blocks::None;
        }
        Err(error) => {
            report.problems.push(format!("the block store cannot be found: {error}"));
            return Blocks::None;
        }
    }
    let options = StoreOptions { read_only: true, ..StoreOptions::default() };
    let why = match LogStore::open(storage, dir, options) {
        Ok(store) => match store.recovery_report().stop.clone() {
            None => return Blocks::Map(store),
            // Recovery cut the log's end at the first invalid block, complete groups after
            // it too: when a scan finds a newer meta block there, the scan is the better
            // source.
            Some((file, offset, reason)) => {
                let scan = match scan_segments(storage, dir) {
                    Ok(scan) => scan,
                    Err(_) => return Blocks::Map(store),
                };
                let newest = |version: Option<u64>| version.unwrap_or(0);
                let mapped = store.read_versioned(META_BLOCK).ok().flatten().and_then(|(_, v)| v);
                let scanned = scan.get(META_BLOCK).map(|block| block.version.0);
                if newest(scanned) <= newest(mapped.map(|v| v.0)) {
                    return Blocks::Map(store);
                }
                let why = format!(
                    "the block store's recovery stopped at {} offset {offset} ({reason}), \
                     before a newer meta block",
                    file.display()
                );
                return scanned_blocks(scan, why, report);
            }
        },
        Err(error) => format!("the block store's map could not be loaded ({error})"),
    };
    match scan_segments(storage, dir) {
        Ok(scan) => scanned_blocks(scan, why, report),
        Err(error) => {
            report
                .problems
                .push(format!("{why}, and the segment files cannot be scanned: {error}"));
            Blocks::None
        }
    }
}

/// Blocks from `scan`, with why the map was not used and what the scan found reported.
fn scanned_blocks(scan: SegmentScan, why: String, report: &mut SalvageReport) -> Blocks {
    const SHOWN: usize = 20;
    report.scanned_blocks = true;
    report.problems.push(format!("{why}: blocks were found by scanning every segment file"));
    for damage in scan.damage().iter().take(SHOWN) {
        report.problems.push(format!("block scan: {damage}"));
    }
    if scan.damage().len() > SHOWN {
        let more = scan.damage().len() - SHOWN;
        report.problems.push(format!("block scan: {more} more damaged places"));
    }
    report.problems.extend(scan.notes().iter().map(|note| format!("block scan: {note}")));
    Blocks::Scan(scan)
}

/// The meta block with its version, or `None` (reported); and why it may be older than
/// one that was lost.
fn read_meta(
    blocks: &Blocks,
    report: &mut SalvageReport,
) -> (Option<(Meta, Option<u64>)>, Option<String>) {
    // A cut end of the block store's log may have held a newer meta block.
    let cut = match blocks {
        Blocks::Map(store) => {
            store.recovery_report().stop.as_ref().map(|(file, offset, reason)| {
                format!(
                    "the block store's recovery stopped at {} offset {offset} ({reason}) and left \
                 what followed out as an unfinished write",
                    file.display()
                )
            })
        }
        _ => None,
    };
    let decoded = match blocks.read(META_BLOCK.0) {
        Ok(Some(read)) => Meta::decode(&read.bytes)
            .map(|meta| (meta, read))
            .map_err(|error| format!("the meta block does not decode: {error}")),
        Ok(None) => Err("the block store holds no meta block".to_string()),
        Err(error) => Err(format!("the meta block cannot be read: {error}")),
    };
    match decoded {
        Ok((meta, read)) => {
            let doubt = match (cut, read.doubt) {
                (Some(cut), _) => Some(cut),
                (None, Some(doubt)) => {
                    Some(format!("the meta block found may be older than a lost one: {doubt}"))
                }
                (None, None) => None,
            };
            (Some((meta, read.version)), doubt)
        }
        Err(problem) => {
            report.problems.extend(cut);
            report.problems.push(problem);
            (None, None)
        }
    }
}

/// For a meta block `found` in doubt: when the log starts past its checkpoint, a later
/// checkpoint finished (the log is truncated only once a checkpoint's group is durable),
/// so a group left out as unfinished was written in full and damaged. A scan that keeps
/// it, when its meta block's checkpoint reaches the log, is the better source.
fn take_back(
    storage: &Storage,
    dir: &Path,
    log_dir: &Path,
    backend: Option<tierkv_wal::Backend>,
    found: &Meta,
    report: &mut SalvageReport,
) -> Option<Blocks> {
    let first = log::first_lsn(storage, log_dir, backend)?;
    if first <= found.sequence + 1 {
        return None;
    }
    let scan = scan_segments_with(storage, dir, ScanOptions { keep_unfinished: true }).ok()?;
    let taken = Meta::decode(&scan.read(META_BLOCK).ok()??).ok()?;
    if taken.sequence + 1 < first || taken.sequence <= found.sequence {
        return None;
    }
    let why = format!(
        "the log starts at record {first}, past the checkpoint of the meta block found \
         (records up to {}): a later checkpoint finished, so the incomplete group at the end \
         of the block store's log was written in full and damaged, and is kept (its meta \
         block covers records up to {})",
        found.sequence, taken.sequence
    );
    Some(scanned_blocks(scan, why, report))
}

/// A meta block in doubt is set aside when the log, read to a clean end, holds every
/// write since its checkpoint; otherwise every key is in doubt.
fn settle_meta_doubt(
    report: &mut SalvageReport,
    doubt: Option<String>,
    sequence: Option<u64>,
    clean: Option<(u64, u64)>,
) {
    let (Some(doubt), Some(sequence)) = (doubt, sequence) else { return };
    match clean {
        Some((first, last)) if first <= sequence + 1 && last >= sequence => {
            report.problems.push(format!(
                "{doubt}; the log holds every write since its checkpoint (records \
                 {first}..={last}), so the tree and the log together are the last state"
            ));
        }
        _ => report.doubtful.push(DoubtfulRange {
            span: KeySpan::all(),
            reason: format!("{doubt}, and the log cannot show it holds every write since"),
        }),
    }
}

/// The new store, taking batches.
pub(crate) struct Target {
    db: Db,
    batch: WriteBatch,
}

impl Target {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch.put(key, value);
        self.flush_if_full()
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.batch.delete(key);
        self.flush_if_full()
    }

    fn flush_if_full(&mut self) -> Result<()> {
        match self.batch.record_bytes() >= BATCH_BYTES {
            true => self.flush(),
            false => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        // CRASH: the new store is synced once, by its close; a crash before leaves a store
        // holding part of the salvage, which a new salvage replaces.
        self.db.write_with(&self.batch, Durability::None)?;
        self.batch.clear();
        Ok(())
    }
}

/// The tree walk and the loose-leaf pass.
struct Walk<'a> {
    blocks: &'a Blocks,
    target: &'a mut Target,
    report: &'a mut SalvageReport,
    /// Pages reached (each at most once).
    seen: HashSet<u64>,
    /// Overflow blocks of the values reached.
    overflow: HashSet<u64>,
    /// The meta block's version: a page's doubt about a newer copy lost after it does
    /// not count (a published page is never rewritten).
    meta_version: Option<u64>,
    /// The meta block's `orphans_from`: ids from there on are not the tree's (orphans of an
    /// unfinished checkpoint, and ids past `next_page`).
    orphans_from: Option<u64>,
}

/// Why a key of a leaf is not copied, or `None` to copy it.
fn refuse_key(key: &[u8]) -> Option<String> {
    match key.len() {
        0 => Some("an empty key".into()),
        len if len > MAX_KEY_BYTES => Some(format!("a key of {len} bytes")),
        _ => None,
    }
}

impl Walk<'_> {
    /// Copies the subtree at page `id`, whose keys lie in `low..high`, at `depth`.
    /// `in_doubt`: a page above it is in doubt and said so for the whole range.
    fn page(
        &mut self,
        id: u64,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        depth: usize,
        in_doubt: bool,
    ) -> Result<()> {
        let span = || KeySpan::new(low, high);
        let loaded = match depth > MAX_DEPTH {
            true => Err(format!("page {id} lies deeper than {MAX_DEPTH} levels")),
            false => self.load(id),
        };
        let (page, doubt) = match loaded {
            Ok(loaded) => loaded,
            Err(reason) => {
                self.report.lost.push(LostRange { span: span(), reason, recovered: 0 });
                return Ok(());
            }
        };
        let in_doubt = match doubt {
            Some(doubt) if !in_doubt => {
                let reason = format!("page {id} may be older than a lost copy: {doubt}");
                self.report.doubtful.push(DoubtfulRange { span: span(), reason });
                true
            }
            _ => in_doubt,
        };
        match page {
            Page::Leaf(leaf) => {
                let mut outside = 0u64;
                for (key, value) in &leaf.entries {
                    if !span().contains(key) {
                        outside += 1;
                        continue;
                    }
                    if self.copy(key, value, id)? {
                        self.report.tree_entries += 1;
                    }
                }
                if outside > 0 {
                    self.report.problems.push(format!(
                        "leaf {id} holds {outside} keys outside its range {}: left out",
                        span()
                    ));
                }
            }
            Page::Internal(internal) => {
                let mut bound = low.map(<[u8]>::to_vec);
                let mut child = internal.first_child;
                for (separator, next) in &internal.entries {
                    self.page(child, bound.as_deref(), Some(separator), depth + 1, in_doubt)?;
                    bound = Some(separator.clone());
                    child = *next;
                }
                self.page(child, bound.as_deref(), high, depth + 1, in_doubt)?;
            }
        }
        Ok(())
    }

    /// Page `id` of the tree and the scan's doubt about it (one that counts: a newer copy
    /// lost no later than the meta block), or why it cannot be had.
    fn load(
        &mut self,
        id: u64,
    ) -> std::result::Result<(Page, Option<tierkv_blockstore::Doubt>), String> {
        if !self.seen.insert(id) {
            return Err(format!("page {id} is reachable twice: the tree is damaged above it"));
        }
        let read = match self.blocks.read(id) {
            Ok(Some(read)) => read,
            Ok(None) => return Err(self.blocks.absent("page", id)),
            Err(error) => return Err(format!("page {id} cannot be read: {error}")),
        };
        let page = page::decode(&read.bytes)
            .map_err(|error| format!("page {id} does not decode: {error}"))?;
        let meta = self.meta_version;
        let doubt = read.doubt.filter(|d| meta.is_none_or(|meta| d.oldest.0 <= meta));
        Ok((page, doubt))
    }

    /// Copies one entry of leaf `page`; returns whether it was copied.
    fn copy(&mut self, key: &[u8], value: &Value, page: u64) -> Result<bool> {
        if let Some(why) = refuse_key(key) {
            self.report.problems.push(format!("leaf {page} holds {why}: left out"));
            return Ok(false);
        }
        let value = match value {
            Value::Inline(bytes) => bytes.to_vec(),
            Value::Overflow(overflow) => {
                self.overflow.extend(overflow.first..overflow.first + u64::from(overflow.blocks));
                match self.read_overflow(overflow) {
                    Ok(value) => value,
                    Err(reason) => {
                        let reason = format!("leaf {page}: {reason}");
                        self.report.lost_values.push(LostValue { key: key.to_vec(), reason });
                        return Ok(false);
                    }
                }
            }
        };
        self.target.put(key, &value)?;
        Ok(true)
    }

    /// A value's overflow blocks, checked to add up to it.
    fn read_overflow(&mut self, overflow: &OverflowRef) -> std::result::Result<Vec<u8>, String> {
        if overflow.len > MAX_VALUE_BYTES as u64 {
            return Err(format!("an overflow value of {} bytes, over the limit", overflow.len));
        }
        let mut value = Vec::with_capacity(overflow.len as usize);
        for id in overflow.first..overflow.first + u64::from(overflow.blocks) {
            match self.blocks.read(id) {
                Ok(Some(read)) => value.extend_from_slice(&read.bytes),
                Ok(None) => return Err(self.blocks.absent("overflow block", id)),
                Err(error) => return Err(format!("overflow block {id}: {error}")),
            }
            if value.len() as u64 > overflow.len {
                break;
            }
        }
        if value.len() as u64 != overflow.len {
            return Err(format!(
                "the overflow blocks from {} hold {} bytes, not {}",
                overflow.first,
                value.len(),
                overflow.len
            ));
        }
        debug_assert!(value.len() <= overflow.blocks as usize * OVERFLOW_BLOCK_BYTES);
        Ok(value)
    }

    /// The ids that are not the tree's own pages: the meta block, the retired blocks the
    /// free list names and the list's own blocks, orphans, and ids past `next_page`;
    /// `None` when the free list cannot be read (reported).
    fn excluded(&mut self, meta: &Meta) -> Option<HashSet<u64>> {
        let mut excluded = HashSet::from([META_BLOCK.0]);
        let Some(list) = meta.free_list else { return Some(excluded) };
        excluded.extend(list.first..list.first + u64::from(list.blocks));
        let ids = self.read_overflow(&list).and_then(|bytes| match bytes.len().is_multiple_of(8) {
            true => Ok(bytes
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
                .collect::<Vec<u64>>()),
            false => Err(format!("a free list of {} bytes", bytes.len())),
        });
        match ids {
            Ok(ids) => {
                excluded.extend(ids);
                Some(excluded)
            }
            Err(reason) => {
                self.report.problems.push(format!(
                    "the meta block's free list cannot be read ({reason}): loose leaves may be \
                     retired copies"
                ));
                None
            }
        }
    }

    /// Fills the lost ranges from leaf pages the walk did not reach (see the module
    /// header); `sure`: they are the tree's own.
    fn loose(&mut self, excluded: HashSet<u64>, sure: bool) -> Result<()> {
        // Through the map, its live blocks (a page changed in place has one id for all its
        // versions, and the map holds the newest); else what the scan found.
        let ids: Vec<u64> = match &self.blocks {
            Blocks::Map(store) => match tierkv_blockstore::BlockStore::live_ids(store) {
                Ok(ids) => ids.into_iter().map(|id| id.0).collect(),
                Err(error) => {
                    self.report
                        .problems
                        .push(format!("the block map cannot list its blocks: {error}"));
                    return Ok(());
                }
            },
            Blocks::Scan(scan) => scan.blocks().map(|block| block.id.0).collect(),
            Blocks::None => Vec::new(),
        };
        let lost: Vec<KeySpan> = self.report.lost.iter().map(|lost| lost.span.clone()).collect();
        let which = |key: &[u8]| lost.iter().position(|span| span.contains(key));
        // Per key, the entry of the newest page: pages are copied on write to higher ids.
        let mut found: BTreeMap<Bytes, (u64, Value, usize)> = BTreeMap::new();
        let mut pages = HashSet::new();
        for id in ids {
            let skip = excluded.contains(&id)
                || self.seen.contains(&id)
                || self.overflow.contains(&id)
                || self.orphans_from.is_some_and(|orphans_from| id >= orphans_from);
            if skip {
                continue;
            }
            let Ok(Some(read)) = self.blocks.read(id) else { continue };
            let Ok(Page::Leaf(leaf)) = page::decode(&read.bytes) else {
                continue;
            };
            let ranges: Vec<Option<usize>> =
                leaf.entries.iter().map(|(key, _)| which(key)).collect();
            let first = ranges.first().copied().flatten();
            if sure && ranges.iter().any(|range| *range != first || range.is_none()) {
                self.report.problems.push(format!(
                    "loose leaf {id} is not within one lost range: not the tree's own, left out"
                ));
                continue;
            }
            for ((key, value), range) in leaf.entries.into_iter().zip(ranges) {
                let Some(range) = range else { continue };
                if found.get(&key).is_none_or(|(page, _, _)| *page < id) {
                    found.insert(key, (id, value, range));
                    pages.insert(id);
                }
            }
        }
        let mut recovered = vec![0u64; lost.len()];
        let mut used = HashSet::new();
        for (key, (page, value, range)) in found {
            if self.copy(&key, &value, page)? {
                recovered[range] += 1;
                self.report.loose_entries += 1;
                used.insert(page);
            }
        }
        self.report.loose_pages = used.len() as u64;
        debug_assert!(used.is_subset(&pages));
        for (lost, count) in self.report.lost.iter_mut().zip(recovered) {
            lost.recovered = count;
            if count > 0 && !sure {
                self.report.doubtful.push(DoubtfulRange {
                    span: lost.span.clone(),
                    reason: format!(
                        "{count} entries here come from loose blocks that may be retired \
                         copies: a value may be older than the last one written, or a key \
                         deleted since"
                    ),
                });
            }
        }
        Ok(())
    }
}
