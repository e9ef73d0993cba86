//! Chains (`BlockStore::begin_chain`): one atomic group written in pieces. Each piece is a
//! group of its own in the user stream, written like any other (so it lies whole in one
//! segment and recovery checks it the same way), ending in a mark (`FLAG_CHAIN`) that names
//! the chain's first piece; the last piece's mark also carries `FLAG_CHAIN_END`. Pieces
//! are not applied to the map as they are written: `commit` writes the last piece, waits
//! for a round that makes every piece durable, and then applies the pieces in order, each
//! at its own version, so a later piece's copy of an id wins. Until then the pieces count
//! as written and not applied, so a map checkpoint has recovery scan from the first of
//! them, and cleaning neither takes a segment that holds one nor waits for them
//! (`Inflight::chained`). Recovery keeps a chain's pieces aside and applies them when it
//! meets the ending piece; a chain without one (dropped, or cut by a crash) is left out.
//!
//! Must never: apply a piece to the map before the ending piece is durable; let cleaning
//! delete a segment holding a piece of an open chain.

use std::borrow::Cow;

use super::write::{prepare, validate_group};
use super::{lock, LogStore, Placed, Prepared, Stream};
use crate::format::{Codec, FLAG_CHAIN, FLAG_CHAIN_END, MAX_GROUP_BLOCKS};
use crate::stats::Counters;
use crate::{BlockError, BlockId, BlockWrite, Chain, GroupId};

/// A chain of a `LogStore`: the pieces written so far.
pub(super) struct LogChain<'a> {
    store: &'a LogStore,
    /// Each piece's group and where its blocks went (its mark left out).
    pieces: Vec<(u64, Vec<Placed>)>,
    blocks: u64,
    payload_bytes: u64,
    committed: bool,
}

impl<'a> LogChain<'a> {
    pub(super) fn new(store: &'a LogStore) -> LogChain<'a> {
        LogChain { store, pieces: Vec::new(), blocks: 0, payload_bytes: 0, committed: false }
    }

    /// Writes one piece, its mark last; returns its group.
    fn piece(&mut self, changes: &[BlockWrite<'_>], end: bool) -> Result<u64, BlockError> {
        let shared = &*self.store.shared;
        shared.check_writable()?;
        if !changes.is_empty() {
            validate_group(changes)?;
        }
        if changes.len() >= MAX_GROUP_BLOCKS {
            return Err(BlockError::InvalidGroup(format!(
                "{} blocks and a chain's mark are over the limit of {MAX_GROUP_BLOCKS} per piece",
                changes.len()
            )));
        }
        let (mut prepared, payload_bytes) = prepare(shared.options.codec, changes);
        let first = self.pieces.first().map_or(0, |(group, _)| *group);
        prepared.push(Prepared {
            id: BlockId(first),
            flags: FLAG_CHAIN | if end { FLAG_CHAIN_END } else { 0 },
            codec: Codec::None,
            stored: Cow::Borrowed(&[]),
            raw_len: 0,
            version: None,
        });
        // CRASH: a piece is durable only with a later round, and counts only once the
        // ending piece is durable too; recovery leaves out a chain without one.
        let (group, mut placed) = shared.write_group(&prepared, Stream::User, true)?;
        let mark = placed.pop().expect("invariant: the mark was placed last");
        assert_eq!(mark.id, BlockId(first));
        assert_eq!(placed.len(), changes.len());
        self.pieces.push((group, placed));
        self.blocks += changes.len() as u64;
        self.payload_bytes += payload_bytes;
        Ok(group)
    }
}

impl Chain for LogChain<'_> {
    fn put(&mut self, changes: &[BlockWrite<'_>]) -> Result<(), BlockError> {
        if changes.is_empty() {
            return Ok(());
        }
        self.piece(changes, false).map(|_| ())
    }

    fn commit(mut self: Box<Self>, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        let last = self.piece(changes, true)?;
        let shared = &*self.store.shared;
        // Every piece was written before the last: a round that covers it covers them.
        shared.wait_durable(last)?;
        // CRASH: the ending piece is durable; recovery applies the whole chain from here.
        self.committed = true;
        // Recovery that reads the first piece needs the ending one: its segment is kept
        // from cleaning until a checkpoint's scan starts past the first (before the pieces
        // leave `Inflight::chained`, which keeps their segments until then).
        let (from, end_segment) = {
            let inflight = lock(&shared.inflight);
            let place = |group: &u64| inflight.groups.get(group).map(|&(_, s, o)| (s, o));
            let first = self.pieces.first().and_then(|(group, _)| place(group));
            (first, place(&last).map(|(segment, _)| segment))
        };
        let (Some(from), Some(end_segment)) = (from, end_segment) else {
            unreachable!("a chain's pieces stay in flight until it commits")
        };
        if let Some(info) = shared.write_index().segments.get_mut(&end_segment) {
            info.chain_from = Some(info.chain_from.map_or(from, |old| old.min(from)));
        }
        for (group, placed) in &self.pieces {
            shared.apply(*group, placed);
        }
        debug_assert!(self
            .pieces
            .iter()
            .all(|(g, _)| !lock(&shared.inflight).groups.contains_key(g)));
        Counters::add(&shared.counters.groups, 1);
        Counters::add(&shared.counters.blocks, self.blocks);
        Counters::add(&shared.counters.payload_bytes, self.payload_bytes);
        shared.after_write()?;
        Ok(GroupId(last))
    }
}

impl Drop for LogChain<'_> {
    /// A chain dropped open: its pieces stay in their segments, in no map, and stop holding
    /// scan positions and segments back.
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let mut inflight = lock(&self.store.shared.inflight);
        for (group, _) in &self.pieces {
            inflight.groups.remove(group);
            inflight.chained.remove(group);
        }
    }
}
