//! Reads of a located block: where the map has a block now (`locate`), and the block read
//! and checked against the map's version.
//!
//! Must never: return a block that is not the map's version (a reader whose block moved
//! on and whose space was reused looks it up again).

use std::path::Path;
use std::sync::Arc;

use super::{SegmentFile, Shared};
use crate::format::{self, BlockHeader, Location};
use crate::read;
use crate::{BlockError, BlockId};

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
}
