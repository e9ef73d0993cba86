//! What a salvage copied, what it could not, and what it copied without being sure of it:
//! [`SalvageReport`], printable as text (`Display`) and read field by field for JSON.
//!
//! Must never: call a salvage complete while a key range, a value or a log record is
//! reported lost or in doubt.

use std::fmt;
use std::path::PathBuf;

/// Keys from `low` (inclusive; `None`: from the first key) up to `high` (exclusive;
/// `None`: to the last key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeySpan {
    /// The first key of the span, or `None` for no lower bound.
    pub low: Option<Vec<u8>>,
    /// The first key after the span, or `None` for no upper bound.
    pub high: Option<Vec<u8>>,
}

impl KeySpan {
    /// Every key.
    pub fn all() -> KeySpan {
        KeySpan { low: None, high: None }
    }

    /// The span from `low` up to `high`.
    pub fn new(low: Option<&[u8]>, high: Option<&[u8]>) -> KeySpan {
        KeySpan { low: low.map(<[u8]>::to_vec), high: high.map(<[u8]>::to_vec) }
    }

    /// Whether `key` lies in the span.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.low.as_deref().is_none_or(|low| key >= low)
            && self.high.as_deref().is_none_or(|high| key < high)
    }

    /// Whether the span covers every key.
    pub fn is_all(&self) -> bool {
        self.low.is_none() && self.high.is_none()
    }
}

impl fmt::Display for KeySpan {
    /// `keys [low, high)`, keys escaped (printable ASCII as is, other bytes `\xNN`), `..`
    /// for a missing bound; or `every key`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            return f.write_str("every key");
        }
        let bound = |key: &Option<Vec<u8>>| key.as_deref().map_or("..".into(), escape);
        write!(f, "keys [{}, {})", bound(&self.low), bound(&self.high))
    }
}

/// A key escaped for one line of text: printable ASCII as is (a backslash doubled), other
/// bytes as `\xNN`.
pub fn escape(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &byte in key {
        match byte {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(byte as char),
            _ => out.push_str(&format!("\\x{byte:02x}")),
        }
    }
    out
}

/// A key range the tree could not give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRange {
    /// The keys the unreadable page held.
    pub span: KeySpan,
    /// Why the tree could not be read there.
    pub reason: String,
    /// Entries in the span recovered from loose blocks (leaf pages the tree walk did not
    /// reach). Keys of the span not among them are lost, unless the log wrote them.
    pub recovered: u64,
}

/// A key range whose copied entries may not be the store's last state: a value older than
/// the last one written, or a key since deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubtfulRange {
    /// The keys in doubt.
    pub span: KeySpan,
    /// Why.
    pub reason: String,
}

/// A value kept in overflow blocks that could not be read; its key was not copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostValue {
    /// The key.
    pub key: Vec<u8>,
    /// Why the value could not be read.
    pub reason: String,
}

/// Log records after the checkpoint that were not replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostRecords {
    /// The first lost record.
    pub first: u64,
    /// The last one, where intact records past the damage tell; `None`: unknown.
    pub last: Option<u64>,
}

impl fmt::Display for LostRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.last {
            Some(last) if last == self.first => write!(f, "record {last}"),
            Some(last) => write!(f, "records {}..={last}", self.first),
            None => write!(f, "records from {} on (how many is unknown)", self.first),
        }
    }
}

/// What the salvage did with the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogSalvage {
    /// Where it was read.
    pub dir: PathBuf,
    /// Records replayed over the tree (those after the checkpoint).
    pub records: u64,
    /// Their puts.
    pub puts: u64,
    /// Their deletes.
    pub deletes: u64,
    /// The first and last record replayed.
    pub replayed: Option<(u64, u64)>,
    /// Puts and deletes in the key ranges the tree lost, taken from records the checkpoint
    /// covers that the log still held (applied after the loose blocks' entries).
    pub filled: u64,
    /// Where and why reading stopped before the log's end.
    pub stop: Option<String>,
    /// Records after the checkpoint that could not be replayed.
    pub lost: Option<LostRecords>,
}

/// What `salvage` copied and what it could not (see the `salvage` module).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// The damaged store.
    pub from: PathBuf,
    /// The new store.
    pub to: PathBuf,
    /// Whether blocks were found by scanning every segment file (the block store's map
    /// could not be loaded) rather than through the map.
    pub scanned_blocks: bool,
    /// The checkpoint the tree came from: its root page and the last log record it
    /// covers; `None` when the meta block could not be read.
    pub checkpoint: Option<(u64, u64)>,
    /// Entries copied from the tree.
    pub tree_entries: u64,
    /// Entries copied from loose blocks into key ranges the tree lost.
    pub loose_entries: u64,
    /// Leaf pages they came from.
    pub loose_pages: u64,
    /// The log.
    pub log: LogSalvage,
    /// Key ranges the tree could not give, in key order.
    pub lost: Vec<LostRange>,
    /// Values that could not be read.
    pub lost_values: Vec<LostValue>,
    /// Key ranges whose copied entries may be out of date.
    pub doubtful: Vec<DoubtfulRange>,
    /// Everything else worth knowing, one line each (a damaged identity file, blocks that
    /// did not check, keys a page held outside its range).
    pub problems: Vec<String>,
}

impl SalvageReport {
    /// Whether everything was copied: nothing lost, nothing in doubt. Problems alone (a
    /// damaged identity file, damage in blocks no longer used) do not make it incomplete.
    pub fn is_complete(&self) -> bool {
        self.lost.is_empty()
            && self.lost_values.is_empty()
            && self.doubtful.is_empty()
            && self.log.lost.is_none()
    }

    /// Entries written to the new store: the tree's, the loose blocks', and the log's
    /// puts (a key the log wrote over counts twice).
    pub fn entries_copied(&self) -> u64 {
        self.tree_entries + self.loose_entries + self.log.puts
    }

    /// Whether `key` lies in a range the report calls lost or in doubt, or its value was
    /// lost, or log records that may have written it were lost: whatever the new store holds
    /// for it, the report has said it may not be the last value written.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.log.lost.is_some()
            || self.lost.iter().any(|lost| lost.span.contains(key))
            || self.doubtful.iter().any(|doubt| doubt.span.contains(key))
            || self.lost_values.iter().any(|lost| lost.key == key)
    }
}

impl fmt::Display for SalvageReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "salvaged {} into {}", self.from.display(), self.to.display())?;
        let blocks = match self.scanned_blocks {
            true => "found by scanning every segment file (the problems below say why)",
            false => "read through the block map",
        };
        writeln!(f, "blocks: {blocks}")?;
        match self.checkpoint {
            Some((root, sequence)) => writeln!(
                f,
                "tree: {} entries copied (root page {root}, checkpoint of log records up to \
                 {sequence})",
                self.tree_entries
            )?,
            None => writeln!(f, "tree: none (the meta block could not be read)")?,
        }
        writeln!(
            f,
            "loose blocks: {} entries copied from {} leaf pages the tree did not reach",
            self.loose_entries, self.loose_pages
        )?;
        let log = &self.log;
        match log.replayed {
            Some((first, last)) => writeln!(
                f,
                "log: records {first}..={last} replayed ({} puts, {} deletes) from {}",
                log.puts,
                log.deletes,
                log.dir.display()
            )?,
            None => writeln!(f, "log: no record to replay in {}", log.dir.display())?,
        }
        if log.filled > 0 {
            writeln!(
                f,
                "log: {} writes in lost key ranges taken from records the checkpoint covers",
                log.filled
            )?;
        }
        if let Some(stop) = &log.stop {
            writeln!(f, "log stopped early: {stop}")?;
        }
        if let Some(lost) = log.lost {
            writeln!(f, "LOST log {lost}: the writes they made are missing")?;
        }
        for lost in &self.lost {
            writeln!(
                f,
                "LOST {}: {}; {} entries recovered there from loose blocks",
                lost.span, lost.reason, lost.recovered
            )?;
        }
        for lost in &self.lost_values {
            writeln!(f, "LOST value of key {}: {}", escape(&lost.key), lost.reason)?;
        }
        for doubt in &self.doubtful {
            writeln!(f, "DOUBTFUL {}: {}", doubt.span, doubt.reason)?;
        }
        for problem in &self.problems {
            writeln!(f, "problem: {problem}")?;
        }
        let verdict = match self.is_complete() {
            true => "complete: every entry was copied",
            false => "INCOMPLETE: see LOST and DOUBTFUL above",
        };
        write!(f, "{} entries copied; {verdict}", self.entries_copied())
    }
}
