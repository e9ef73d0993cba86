//! The crash replay: walks the op log tracking what is durable and what is still pending, and
//! draws crash images from the pending part with a seeded crash model.
//!
//! Per inode the replay keeps a `durable` image and the ordered pending data ops since it was
//! last made durable; for the namespace, the durable names and the pending namespace ops.
//!
//! Invariants:
//! 1. Per byte, pending ops are applied in program order: a persist moves every pending piece
//!    covering a byte, or none of them, so durable pieces never overtake pending ones on the
//!    same byte.
//! 2. A pending write never reaches past the file size at the time it was made: writes past
//!    the end record their growth first, and a shrinking `set_len` clips earlier pending
//!    writes. Hence a pending size change commutes with earlier pending writes, which lets a
//!    persist make a size change durable ahead of an earlier write's unpersisted piece.
//! 3. Data that was synced, or persisted in a range, is in `durable` and is present in every
//!    crash image, under every model.
//! 4. The same replay position, model and seed give the same image (one `fastrand::Rng` drawn
//!    in a fixed order: inodes by id, ops in log order, then namespace ops).
//!
//! Must never: resurrect data a failed sync lost, or bytes a truncate cut off.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::contents::Contents;
use super::state::{Bytes, DataOp, Image, InodeId, LogOp, Namespace, NsOp};
use super::CrashModel;
use crate::pmem::CACHE_LINE_BYTES;

/// x86-64 stores reach persistent memory in failure-atomic aligned units of 8 bytes.
const ATOM_BYTES: u64 = 8;

/// `CACHE_LINE_BYTES` as a file offset quantity.
const LINE_BYTES: u64 = CACHE_LINE_BYTES as u64;

/// A pending data op, tagged with its index in the log (`seq`) for the `Prefix` and `Subset`
/// models. The pieces of one write split by a persist share a `seq`.
#[derive(Clone, Debug)]
struct Pending {
    seq: u64,
    op: DataOp,
}

#[derive(Clone, Debug, Default)]
struct InodeReplay {
    durable: Contents,
    pending: Vec<Pending>,
}

/// The durable and pending state after a prefix of the log.
#[derive(Clone, Debug)]
pub(crate) struct Replay {
    ns: Namespace,
    ns_pending: Vec<(u64, NsOp)>,
    inodes: BTreeMap<InodeId, InodeReplay>,
}

impl Replay {
    /// A replay positioned before the first op: everything in `base` is durable.
    pub(crate) fn new(base: &Image) -> Replay {
        let inodes = base
            .inodes
            .iter()
            .map(|(inode, contents)| {
                (*inode, InodeReplay { durable: contents.clone(), pending: Vec::new() })
            })
            .collect();
        Replay { ns: base.ns.clone(), ns_pending: Vec::new(), inodes }
    }

    /// Applies log op number `seq`.
    pub(crate) fn apply(&mut self, seq: u64, op: &LogOp) {
        match op {
            LogOp::Ns(ns_op) => {
                if let NsOp::Create { inode, .. } = ns_op {
                    self.inodes.entry(*inode).or_default();
                }
                self.ns_pending.push((seq, ns_op.clone()));
            }
            LogOp::Data { inode, op, .. } => {
                let state = self.inodes.entry(*inode).or_default();
                if let DataOp::SetLen { len, grow: false } = op {
                    clip_pending_writes(&mut state.pending, *len);
                }
                state.pending.push(Pending { seq, op: op.clone() });
            }
            LogOp::Sync { inode, failed, .. } => {
                let state = self.inodes.entry(*inode).or_default();
                let pending = std::mem::take(&mut state.pending);
                // CRASH: a failed fsync marks the pages clean on Linux; what it did not write
                // is lost even if a later fsync succeeds, so a failed sync drops it here.
                if !failed {
                    for entry in &pending {
                        entry.op.apply(&mut state.durable);
                    }
                }
            }
            LogOp::Persist {
                inode, offset, len, granularity_bytes, sizes_durable, failed, ..
            } => {
                let state = self.inodes.entry(*inode).or_default();
                if *failed {
                    state.pending.clear();
                } else {
                    persist_range(state, *offset, *len, *granularity_bytes, *sizes_durable);
                }
            }
            LogOp::SyncDir { path } => self.sync_dir(path),
        }
    }

    /// Makes durable every pending namespace op with an entry in `dir`, together with the
    /// earlier pending ops on the same names, which it depends on (a rename of a file whose
    /// create is still pending would otherwise leave the file under both names).
    fn sync_dir(&mut self, dir: &Path) {
        let mut names: BTreeSet<PathBuf> = BTreeSet::new();
        let mut chosen = vec![false; self.ns_pending.len()];
        for (index, (_, op)) in self.ns_pending.iter().enumerate().rev() {
            let shares_name = op.paths().into_iter().flatten().any(|path| names.contains(path));
            if op.is_in_dir(dir) || shares_name {
                chosen[index] = true;
                names.extend(op.paths().into_iter().flatten().map(Path::to_path_buf));
            }
        }
        let pending = std::mem::take(&mut self.ns_pending);
        for ((seq, op), durable) in pending.into_iter().zip(chosen) {
            if durable {
                op.apply(&mut self.ns);
            } else {
                self.ns_pending.push((seq, op));
            }
        }
    }

    /// The crash image at this point of the replay.
    pub(crate) fn image(&self, model: CrashModel, seed: u64) -> Image {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut chooser = Chooser::new(model, self, &mut rng);
        let mut image = Image { ns: self.ns.clone(), inodes: BTreeMap::new() };
        for (inode, state) in &self.inodes {
            let mut contents = state.durable.clone();
            let store_atoms = chooser.store_atoms(&state.pending, &mut rng);
            for (index, entry) in state.pending.iter().enumerate() {
                match &entry.op {
                    DataOp::Write { offset, bytes, store: true } if chooser.splits_stores() => {
                        for &(from, to) in &store_atoms[index] {
                            let piece = bytes.slice(from, to);
                            contents.write(offset + from as u64, piece.as_slice());
                        }
                    }
                    DataOp::Write { offset, bytes, .. } => {
                        chooser.apply_write(entry.seq, *offset, bytes, &mut contents, &mut rng);
                    }
                    DataOp::SetLen { .. } => {
                        if chooser.keeps(entry.seq, &mut rng) {
                            entry.op.apply(&mut contents);
                        }
                    }
                }
            }
            image.inodes.insert(*inode, contents);
        }
        for (seq, op) in &self.ns_pending {
            if chooser.keeps(*seq, &mut rng) {
                op.apply(&mut image.ns);
            }
        }
        image.ns.prune_unreachable();
        image.collect_garbage();
        image
    }
}

#[cfg(test)]
impl Replay {
    /// Inodes with no pending data op: their image is `durable` under every model.
    pub(crate) fn settled_inodes(&self) -> Vec<InodeId> {
        let settled = self.inodes.iter().filter(|(_, state)| state.pending.is_empty());
        settled.map(|(inode, _)| *inode).collect()
    }
}

/// Clips pending writes to `[0, len)`: after a truncate their bytes past `len` are gone, and
/// no later crash may bring them back.
fn clip_pending_writes(pending: &mut Vec<Pending>, len: u64) {
    pending.retain_mut(|entry| {
        let DataOp::Write { offset, bytes, .. } = &mut entry.op else { return true };
        if *offset >= len {
            return false;
        }
        let keep = len - *offset;
        if (bytes.len() as u64) > keep {
            // keep < bytes.len(), so it fits in usize.
            *bytes = bytes.slice(0, keep as usize);
        }
        true
    });
}

/// Makes the pending pieces inside `[offset, offset + len)`, widened to the granularity,
/// durable in program order; pieces outside stay pending.
fn persist_range(
    state: &mut InodeReplay,
    offset: u64,
    len: u64,
    granularity_bytes: u64,
    sizes_durable: bool,
) {
    assert!(granularity_bytes > 0, "persist granularity must be positive");
    let low = offset / granularity_bytes * granularity_bytes;
    let high =
        offset.saturating_add(len).div_ceil(granularity_bytes).saturating_mul(granularity_bytes);
    let pending = std::mem::take(&mut state.pending);
    let mut still: Vec<Pending> = Vec::with_capacity(pending.len());
    for entry in pending {
        match &entry.op {
            DataOp::SetLen { .. } if sizes_durable => entry.op.apply(&mut state.durable),
            DataOp::SetLen { .. } => still.push(entry),
            DataOp::Write { offset: start, bytes, store } => {
                let end = start + bytes.len() as u64;
                let (inside_from, inside_to) = ((*start).max(low), end.min(high));
                if inside_from >= inside_to {
                    still.push(entry);
                    continue;
                }
                // Offsets relative to the write; each is at most bytes.len(), so fits usize.
                let (from, to) = ((inside_from - start) as usize, (inside_to - start) as usize);
                let piece = |a: usize, b: usize| Pending {
                    seq: entry.seq,
                    op: DataOp::Write {
                        offset: start + a as u64,
                        bytes: bytes.slice(a, b),
                        store: *store,
                    },
                };
                if from > 0 {
                    still.push(piece(0, from));
                }
                // Invariant 2: a pending size change before this piece happened before it;
                // applying it later would clobber the durable piece, so it goes first.
                still.retain(|earlier| {
                    let is_size = matches!(earlier.op, DataOp::SetLen { .. });
                    if is_size {
                        earlier.op.apply(&mut state.durable);
                    }
                    !is_size
                });
                piece(from, to).op.apply(&mut state.durable);
                if to < bytes.len() {
                    still.push(piece(to, bytes.len()));
                }
            }
        }
    }
    state.pending = still;
}

/// Splits `[offset, offset + len)` at multiples of `unit` (absolute file offsets) and returns
/// the pieces as ranges relative to `offset`.
fn aligned_pieces(offset: u64, len: usize, unit: u64) -> Vec<Piece> {
    assert!(unit > 0, "split unit must be positive");
    let end = offset + len as u64;
    let mut pieces = Vec::with_capacity((len as u64 / unit + 2) as usize);
    let mut at = offset;
    // Bounded: `at` strictly increases to `end`.
    while at < end {
        let next = ((at / unit + 1) * unit).min(end);
        pieces.push(((at - offset) as usize, (next - offset) as usize));
        at = next;
    }
    pieces
}

/// A range `[from, to)` of a write, relative to its offset.
type Piece = (usize, usize);

/// The random choices of one crash model.
enum Chooser {
    KeepAll,
    DropAll,
    /// One coin per op (`seq`), drawn the first time the op is seen.
    Subset(BTreeMap<u64, bool>),
    /// Ops with `seq` below the cut are kept; `None` keeps all.
    Prefix(Option<u64>),
    Torn(u64),
}

impl Chooser {
    fn new(model: CrashModel, replay: &Replay, rng: &mut fastrand::Rng) -> Chooser {
        match model {
            CrashModel::KeepAll => Chooser::KeepAll,
            CrashModel::DropAll => Chooser::DropAll,
            CrashModel::Subset => Chooser::Subset(BTreeMap::new()),
            CrashModel::Prefix => {
                // Stores follow the cache-line model instead, so they take no part in the cut.
                let mut seqs: BTreeSet<u64> =
                    replay.ns_pending.iter().map(|(seq, _)| *seq).collect();
                for state in replay.inodes.values() {
                    for entry in &state.pending {
                        if !matches!(entry.op, DataOp::Write { store: true, .. }) {
                            seqs.insert(entry.seq);
                        }
                    }
                }
                let cut = rng.usize(..=seqs.len());
                Chooser::Prefix(seqs.into_iter().nth(cut))
            }
            CrashModel::Torn(size) => Chooser::Torn(size.bytes()),
        }
    }

    /// True when pmem stores are decided per cache line rather than per op.
    fn splits_stores(&self) -> bool {
        !matches!(self, Chooser::KeepAll | Chooser::DropAll)
    }

    /// Whether a whole op (a size change, a namespace op, an untorn write) survives.
    fn keeps(&mut self, seq: u64, rng: &mut fastrand::Rng) -> bool {
        match self {
            Chooser::KeepAll => true,
            Chooser::DropAll => false,
            Chooser::Subset(coins) => *coins.entry(seq).or_insert_with(|| rng.bool()),
            Chooser::Prefix(cut) => cut.is_none_or(|cut| seq < cut),
            Chooser::Torn(_) => rng.bool(),
        }
    }

    /// Applies what survives of a pending (non-store) write.
    fn apply_write(
        &mut self,
        seq: u64,
        offset: u64,
        bytes: &Bytes,
        contents: &mut Contents,
        rng: &mut fastrand::Rng,
    ) {
        if let Chooser::Torn(size_bytes) = *self {
            for (from, to) in aligned_pieces(offset, bytes.len(), size_bytes) {
                if rng.bool() {
                    contents.write(offset + from as u64, bytes.slice(from, to).as_slice());
                }
            }
        } else if self.keeps(seq, rng) {
            contents.write(offset, bytes.as_slice());
        }
    }

    /// For each pending entry, the 8-byte atoms of its stores that survive, as ranges relative
    /// to the store. Per cache line, the survivors are a random prefix, in program order, of
    /// the atoms stored to that line: stores to one line persist in order, lines independently.
    fn store_atoms(&self, pending: &[Pending], rng: &mut fastrand::Rng) -> Vec<Vec<Piece>> {
        let mut kept = vec![Vec::new(); pending.len()];
        if !self.splits_stores() {
            return kept;
        }
        // Line number to (entry index, atom) in program order.
        let mut lines: BTreeMap<u64, Vec<(usize, Piece)>> = BTreeMap::new();
        for (index, entry) in pending.iter().enumerate() {
            if let DataOp::Write { offset, bytes, store: true } = &entry.op {
                for atom in aligned_pieces(*offset, bytes.len(), ATOM_BYTES) {
                    let line = (offset + atom.0 as u64) / LINE_BYTES;
                    lines.entry(line).or_default().push((index, atom));
                }
            }
        }
        for atoms in lines.values() {
            let survivors = rng.usize(..=atoms.len());
            for &(index, atom) in &atoms[..survivors] {
                kept[index].push(atom);
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_pieces_split_at_absolute_offsets() {
        assert_eq!(aligned_pieces(6, 12, 8), vec![(0, 2), (2, 10), (10, 12)]);
        assert_eq!(aligned_pieces(8, 8, 8), vec![(0, 8)]);
        assert_eq!(aligned_pieces(0, 3, 4096), vec![(0, 3)]);
    }

    #[test]
    fn clipping_drops_writes_past_the_new_end_and_shortens_straddlers() {
        let write = |offset: u64, len: usize| Pending {
            seq: offset,
            op: DataOp::Write { offset, bytes: Bytes::new(&vec![1; len]), store: false },
        };
        let mut pending = vec![write(0, 10), write(90, 20), write(100, 5)];
        clip_pending_writes(&mut pending, 100);
        let lens: Vec<(u64, usize)> = pending
            .iter()
            .map(|entry| match &entry.op {
                DataOp::Write { offset, bytes, .. } => (*offset, bytes.len()),
                DataOp::SetLen { .. } => (0, 0),
            })
            .collect();
        assert_eq!(lens, vec![(0, 10), (90, 10)]);
    }

    #[test]
    fn persist_moves_only_the_widened_range_and_keeps_order_per_byte() {
        let mut state = InodeReplay::default();
        let store = |seq: u64, offset: u64, len: usize, value: u8| Pending {
            seq,
            op: DataOp::Write { offset, bytes: Bytes::new(&vec![value; len]), store: true },
        };
        state.pending = vec![store(0, 0, 200, 1), store(1, 60, 10, 2)];
        persist_range(&mut state, 70, 1, 64, false);
        // Line [64, 128) is durable, with the second store over the first.
        assert_eq!(state.durable.len(), 128);
        let mut line = vec![0u8; 64];
        state.durable.read(64, &mut line);
        assert_eq!(&line[..6], &[2; 6]);
        assert!(line[6..].iter().all(|&b| b == 1));
        // Pieces outside stay pending: [0, 64) and [128, 200) of the first, [60, 64) of the
        // second.
        assert_eq!(state.pending.len(), 3);
    }
}
