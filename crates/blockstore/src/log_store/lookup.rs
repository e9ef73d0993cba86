//! Reads of a located block: where the map has a block now (`locate`), the block read and
//! checked against the map's version, and the tier: a lookup there before the file, its
//! key for a block's content, and demotion of a block the layer above let go of.
//!
//! Must never: return a block that is not the map's version (a reader whose block moved
//! on and whose space was reused looks it up again), or admit to the tier a version the map
//! no longer holds.

use std::path::Path;
use std::sync::Arc;

use tierkv_tiercache::{AdmitSource, TierCache, TierKey};

use super::{SegmentFile, Shared};
use crate::format::{self, BlockHeader, Location, BLOCK_HEADER_BYTES, FLAG_LAST_IN_GROUP};
use crate::read;
use crate::stats::Counters;
use crate::{BlockError, BlockId, GroupId};

/// The error for a map entry whose segment does not exist.
pub(super) fn missing_segment(dir: &Path, id: BlockId, location: &Location) -> BlockError {
    BlockError::Corruption {
        file: dir.join(format::segment_file_name(location.segment)),
        offset: location.offset,
        block: Some(id),
        detail: "the map points into a segment that does not exist".into(),
    }
}

/// Reads the block at `location` and returns its decompressed content.
pub(super) fn read_located(
    file: &SegmentFile,
    id: BlockId,
    location: &Location,
) -> Result<Vec<u8>, BlockError> {
    let (header, block) = read_located_block(file, id, location)?;
    read::decode_payload(&header, block, &file.path, location.offset)
}

/// Reads and checks the block at `location`: the whole block (header, then payload) and its
/// header.
pub(super) fn read_located_block(
    file: &SegmentFile,
    id: BlockId,
    location: &Location,
) -> Result<(BlockHeader, Vec<u8>), BlockError> {
    let (header, block) =
        read::read_block(&file.reader, &file.path, location.offset, id, location.stored_len)?;
    if header.is_tombstone() || header.version != location.version {
        return Err(BlockError::Corruption {
            file: file.path.clone(),
            offset: location.offset,
            block: Some(id),
            detail: format!(
                "found version {} (tombstone: {}) where the map expects version {}",
                header.version,
                header.is_tombstone(),
                location.version
            ),
        });
    }
    Ok((header, block))
}

/// The tier's key for the content at `location`.
pub(super) fn tier_key(id: BlockId, location: &Location) -> TierKey {
    TierKey { id: id.0, version: location.version.0 }
}

impl Shared {
    /// Where the map has `id` now, with its segment file.
    pub(super) fn locate(
        &self,
        id: BlockId,
    ) -> Result<Option<(Location, Arc<SegmentFile>)>, BlockError> {
        let index = self.read_index();
        let Some(location) = index.map.get(&id) else {
            return Ok(None);
        };
        let Some(info) = index.segments.get(&location.segment) else {
            return Err(missing_segment(&self.dir, id, location));
        };
        Ok(Some((*location, Arc::clone(&info.file))))
    }

    /// The block at `location` from the tier, checked as a read from the file is; `None`
    /// when the tier does not hold it. A copy that fails its check is dropped from the tier
    /// and counted (`tier_rejected`): the file has the block.
    pub(super) fn read_from_tier(
        &self,
        tier: &TierCache,
        id: BlockId,
        location: &Location,
        file: &SegmentFile,
    ) -> Option<Vec<u8>> {
        let key = tier_key(id, location);
        let mut block = Vec::new();
        if !tier.get(key, &mut block) {
            return None;
        }
        let header = read::check_block(&block, id, location.stored_len)
            .ok()
            .filter(|header| header.version == location.version && !header.is_tombstone());
        let raw = header.and_then(|header| {
            read::decode_payload(&header, block, &file.path, location.offset).ok()
        });
        if raw.is_none() {
            tier.invalidate(key);
            Counters::add(&self.counters.tier_rejected, 1);
        }
        raw
    }

    /// Offers the tier block `id`'s content at `version`, `raw` (decompressed), which the
    /// layer above's cache let go of: rebuilt in its stored form (compressed as the store
    /// compresses, under a header of its own) and admitted, if the tier takes it and the map
    /// still holds that version. The bytes are built only once the tier has said it would
    /// take them (Overhead Bypass refuses most offers while it is in force).
    ///
    /// A version's content never changes, so an entry is never stale: if the map moves on
    /// while this runs, the entry is unreachable (reads look up the map's version) and is
    /// invalidated here, as the write that replaced it may have invalidated before it came.
    pub(super) fn demote(&self, tier: &TierCache, id: BlockId, version: GroupId, raw: &[u8]) {
        let key = TierKey { id: id.0, version: version.0 };
        let current = |location: &Location| location.version == version;
        let Ok(Some((location, _))) = self.locate(id) else { return };
        if !current(&location) || location.raw_len as usize != raw.len() {
            return;
        }
        let len = BLOCK_HEADER_BYTES + location.stored_len as usize;
        if tier.admission(key, len, AdmitSource::Evict).is_some() {
            return;
        }
        let (codec, stored) = format::compress(self.options.codec, raw);
        if stored.len() != location.stored_len as usize {
            // The store compressed it otherwise when it wrote it (another codec then).
            return;
        }
        let header = BlockHeader {
            flags: FLAG_LAST_IN_GROUP,
            codec,
            id,
            group: version,
            version,
            stored_len: location.stored_len,
            raw_len: location.raw_len,
            index: 0,
            count: 1,
            remote: None,
        };
        let mut head = Vec::with_capacity(BLOCK_HEADER_BYTES);
        format::encode_header(&mut head, &header, &stored);
        tier.admit(key, &[&head, &stored], AdmitSource::Evict);
        if !matches!(self.locate(id), Ok(Some((location, _))) if current(&location)) {
            tier.invalidate(key);
        }
    }
}
