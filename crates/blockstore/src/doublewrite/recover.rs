//! `DoublewriteStore`'s recovery (see `doublewrite.rs`'s header): the batch in
//! `doublewrite.dat` redone when complete (`recover_batch`), then every slot of `pages.dat`
//! read and checked to build the index (`scan_slots`).

use std::path::Path;

use tierkv_io::File;

use super::{
    pages_target, slot_offset, Batch, SlotEntry, SlotIndex, BATCH_BYTES_MAX, SCAN_READ_BYTES,
    SLOT_COUNT_MAX,
};
use crate::format::{self, HeaderProblem, BLOCK_HEADER_BYTES, DOUBLEWRITE_HEADER_BYTES};
use crate::stats::RecoveryReport;
use crate::{BlockError, BlockId, GroupId};

/// Recovery's first step: redoes the batch in `doublewrite.dat` if it is complete, leaves
/// `pages.dat` a whole number of slots long, and empties `doublewrite.dat`, each durably.
/// Returns the highest group the batch header named (0 without one).
pub(super) fn recover_batch(
    pages: &File,
    doublewrite: &File,
    slot_bytes: u64,
    report: &mut RecoveryReport,
) -> Result<GroupId, BlockError> {
    let batch = read_batch(doublewrite, doublewrite.path(), slot_bytes, report)?;
    let (batch_group, redo) = match &batch {
        Batch::Absent => (GroupId(0), &[][..]),
        Batch::Incomplete { group, count, offset, detail } => {
            report.stop = Some((doublewrite.path_buf(), *offset, detail.clone()));
            report.discarded_blocks = u64::from(*count);
            report.discarded_bytes = doublewrite.len();
            (group.unwrap_or(GroupId(0)), &[][..])
        }
        Batch::Complete { group, blocks } => (*group, blocks.as_slice()),
    };
    // read_batch checked every id against the slot bound.
    let redo_end =
        redo.iter().map(|(header, _)| header.id.0 * slot_bytes + slot_bytes).max().unwrap_or(0);
    let pages_len = pages.len();
    let target = if redo_end > pages_len {
        pages_target(pages_len, redo_end, slot_bytes)
    } else {
        pages_len.next_multiple_of(slot_bytes)
    };
    if target != pages_len {
        // CRASH: only zeros are added (empty slots). If the new size is lost, the next open
        // sets it again: a slot cut short by a lost size change belongs to the complete batch
        // (invariant 1), which is still in doublewrite.dat.
        pages.set_len(target)?;
    }
    for (header, encoded) in redo {
        assert!(encoded.len() as u64 <= slot_bytes && header.group == batch_group);
        // CRASH: redo writes are pending until the sync below, and the batch stays in
        // doublewrite.dat until then, so a crash here redoes them again.
        pages.write_at(encoded, header.id.0 * slot_bytes)?;
    }
    if !redo.is_empty() || target != pages_len {
        pages.sync_data()?;
    }
    if !redo.is_empty() {
        // CRASH: the group is in place and durable; the batch is no longer needed.
        report.doublewrite_redone = true;
        report.groups_applied = 1;
        report.blocks_applied = redo.len() as u64;
    }
    if !doublewrite.is_empty() {
        // CRASH: pages.dat is durable with the batch (if it was complete) in place. A crash
        // before the truncation is durable leaves the same batch, and the next open decides
        // the same way (invariant 3); after it, no block of this batch can be mistaken for
        // one of a later batch that reuses its group id (invariant 5).
        doublewrite.set_len(0)?;
        doublewrite.sync_data()?;
    }
    Ok(batch_group)
}

/// Reads and checks the batch in `doublewrite.dat`.
fn read_batch(
    file: &File,
    path: &Path,
    slot_bytes: u64,
    report: &mut RecoveryReport,
) -> Result<Batch, BlockError> {
    let len = file.len();
    if len == 0 {
        return Ok(Batch::Absent);
    }
    let incomplete = |group, count, offset, detail: String| {
        Ok(Batch::Incomplete { group, count, offset, detail })
    };
    if len < DOUBLEWRITE_HEADER_BYTES as u64 {
        return incomplete(None, 0, 0, format!("the file has {len} bytes, less than a header"));
    }
    let mut head = vec![0u8; DOUBLEWRITE_HEADER_BYTES];
    file.read_at(&mut head, 0)?;
    report.bytes_scanned += head.len() as u64;
    let header = match format::decode_doublewrite_header(&head) {
        Ok(header) => header,
        Err(detail) => return incomplete(None, 0, 0, detail),
    };
    let (group, count) = (Some(header.group), header.count);
    let body_start = DOUBLEWRITE_HEADER_BYTES as u64;
    if header.body_bytes > BATCH_BYTES_MAX || body_start + header.body_bytes > len {
        return incomplete(
            group,
            count,
            24,
            format!(
                "the header announces {} body bytes; the file has {} after the header",
                header.body_bytes,
                len - body_start
            ),
        );
    }
    if header.body_bytes < u64::from(count) * BLOCK_HEADER_BYTES as u64 {
        return incomplete(
            group,
            count,
            24,
            format!("{} body bytes cannot hold {count} blocks", header.body_bytes),
        );
    }
    let mut body = vec![0u8; header.body_bytes as usize];
    file.read_at(&mut body, body_start)?;
    report.bytes_scanned += body.len() as u64;
    let mut blocks = Vec::with_capacity(count as usize);
    let mut at = 0usize;
    // Bounded by `count` (at most MAX_GROUP_BLOCKS) and by the body's length.
    for index in 0..count {
        let offset = body_start + at as u64;
        let Some(head) = body.get(at..at + BLOCK_HEADER_BYTES) else {
            return incomplete(group, count, offset, format!("the body ends before block {index}"));
        };
        let block = match format::decode_header(head) {
            Ok(block) => block,
            Err(HeaderProblem::Zero) => {
                return incomplete(group, count, offset, format!("block {index} is zero"))
            }
            Err(HeaderProblem::Invalid(detail)) => {
                return incomplete(group, count, offset, format!("block {index}: {detail}"))
            }
        };
        if block.remote.is_some() {
            return incomplete(group, count, offset, format!("block {index} is a pointer"));
        }
        if block.group != header.group || block.index != index || block.count != count {
            return incomplete(
                group,
                count,
                offset,
                format!(
                    "block {index} is position {} of {} in group {}",
                    block.index, block.count, block.group
                ),
            );
        }
        let footprint = block.footprint() as usize;
        let payload_end = at + BLOCK_HEADER_BYTES + block.stored_len as usize;
        let Some(payload) = body.get(at + BLOCK_HEADER_BYTES..payload_end) else {
            return incomplete(group, count, offset, format!("block {index} runs past the body"));
        };
        if let Err(detail) = format::verify_block(head, payload) {
            return incomplete(group, count, offset, format!("block {index}: {detail}"));
        }
        let Some(encoded) = body.get(at..at + footprint) else {
            return incomplete(group, count, offset, format!("block {index} runs past the body"));
        };
        // A complete batch whose block cannot go in a slot was not written with these
        // options: that is not a crash to repair, so it is reported, not ignored.
        if footprint as u64 > slot_bytes || slot_offset(block.id, slot_bytes).is_err() {
            return Err(BlockError::Corruption {
                file: path.to_path_buf(),
                offset,
                block: Some(block.id),
                detail: format!(
                    "a block of {footprint} bytes for id {} does not fit slots of {slot_bytes} \
                     bytes; was the store created with another slot_bytes?",
                    block.id
                ),
            });
        }
        blocks.push((block, encoded.to_vec()));
        at += footprint;
    }
    if at != body.len() {
        return incomplete(
            group,
            count,
            body_start + at as u64,
            format!("{} bytes follow the last block in the body", body.len() - at),
        );
    }
    debug_assert!(blocks.last().is_some_and(|(block, _)| block.is_last()));
    Ok(Batch::Complete { group: header.group, blocks })
}

/// Reads every slot of `pages.dat` and builds the index; returns it and the highest group
/// found. Any slot that is neither empty nor a valid block of its own id is `Corruption`.
pub(super) fn scan_slots(
    file: &File,
    path: &Path,
    slot_bytes: u64,
    report: &mut RecoveryReport,
) -> Result<(SlotIndex, GroupId), BlockError> {
    let len = file.len();
    assert!(len.is_multiple_of(slot_bytes), "recovery left pages.dat at {len} bytes");
    let slot_count = len / slot_bytes;
    if slot_count > SLOT_COUNT_MAX {
        return Err(BlockError::Corruption {
            file: path.to_path_buf(),
            offset: SLOT_COUNT_MAX * slot_bytes,
            block: None,
            detail: format!("{slot_count} slots, more than the {SLOT_COUNT_MAX} ids allowed"),
        });
    }
    let per_read = (SCAN_READ_BYTES / slot_bytes).max(1);
    let mut index = SlotIndex::default();
    let mut max_group = GroupId(0);
    let mut buf = Vec::new();
    let mut first = 0u64;
    // Bounded: `first` grows by at least one slot per round up to `slot_count`.
    while first < slot_count {
        let slots = per_read.min(slot_count - first);
        buf.resize((slots * slot_bytes) as usize, 0);
        file.read_at(&mut buf, first * slot_bytes)?;
        report.bytes_scanned += buf.len() as u64;
        for (k, slot) in (0..slots).zip(buf.chunks_exact(slot_bytes as usize)) {
            let id = BlockId(first + k);
            let offset = id.0 * slot_bytes;
            if let Some((group, entry)) = check_slot(slot, id, path, offset)? {
                max_group = max_group.max(group);
                index.set(id, entry);
            }
        }
        first += slots;
    }
    Ok((index, max_group))
}

/// Checks one slot. `None`: empty; otherwise the group that wrote it, and its entry (`None`
/// for a tombstone).
fn check_slot(
    slot: &[u8],
    id: BlockId,
    path: &Path,
    offset: u64,
) -> Result<Option<(GroupId, Option<SlotEntry>)>, BlockError> {
    let corruption = |detail: String| BlockError::Corruption {
        file: path.to_path_buf(),
        offset,
        block: Some(id),
        detail,
    };
    let header = match format::decode_header(slot) {
        Ok(header) => header,
        Err(HeaderProblem::Zero) => return Ok(None),
        Err(HeaderProblem::Invalid(detail)) => return Err(corruption(detail)),
    };
    if header.remote.is_some() {
        return Err(corruption("a slot holds a pointer".into()));
    }
    if header.id != id {
        return Err(corruption(format!(
            "slot {id} holds block {}; was the store created with another slot_bytes?",
            header.id
        )));
    }
    let payload_end = BLOCK_HEADER_BYTES + header.stored_len as usize;
    let Some(payload) = slot.get(BLOCK_HEADER_BYTES..payload_end) else {
        return Err(corruption(format!(
            "a block of {} stored bytes does not fit a slot of {} bytes",
            header.stored_len,
            slot.len()
        )));
    };
    format::verify_block(&slot[..BLOCK_HEADER_BYTES], payload).map_err(corruption)?;
    let entry = (!header.is_tombstone())
        .then_some(SlotEntry { group: header.group, stored_len: header.stored_len });
    Ok(Some((header.group, entry)))
}
