//! Reading one block from a file through any access method, checked before it is returned.
//!
//! Must never: return a payload whose checksum was not verified, or allocate more than the
//! length the caller vouches for (a map entry or a decoded header within `MAX_BLOCK_BYTES`).

use std::path::Path;

use tierkv_io::{AlignedBuf, File};

use crate::format::{self, BlockHeader, HeaderProblem, BLOCK_HEADER_BYTES};
use crate::{BlockError, BlockId};

/// Reads `len` bytes at `offset`. With O_DIRECT the read covers the aligned range around them.
pub(crate) fn read_range(file: &File, offset: u64, len: usize) -> Result<Vec<u8>, BlockError> {
    match file.direct_alignment() {
        None => {
            let mut buf = vec![0u8; len];
            file.read_at(&mut buf, offset)?;
            Ok(buf)
        }
        Some(align) => {
            let start = offset - offset % align;
            let end = (offset + len as u64).next_multiple_of(align);
            let mut buf = AlignedBuf::with_align((end - start) as usize, align as usize);
            file.read_at(&mut buf, start)?;
            let from = (offset - start) as usize;
            Ok(buf[from..from + len].to_vec())
        }
    }
}

/// Reads and checks the block at `offset`, which the map says holds `expected` with
/// `stored_len` payload bytes. Returns its header and the whole block (header, then the
/// stored payload).
pub(crate) fn read_block(
    file: &File,
    path: &Path,
    offset: u64,
    expected: BlockId,
    stored_len: u32,
) -> Result<(BlockHeader, Vec<u8>), BlockError> {
    let corruption = |detail: String| BlockError::Corruption {
        file: path.to_path_buf(),
        offset,
        block: Some(expected),
        detail,
    };
    let total = BLOCK_HEADER_BYTES + stored_len as usize;
    if offset + total as u64 > file.len() {
        return Err(corruption(format!(
            "the block's {total} bytes run past the end of the file ({} bytes)",
            file.len()
        )));
    }
    let bytes = read_range(file, offset, total)?;
    let header = check_block(&bytes, expected, stored_len).map_err(corruption)?;
    Ok((header, bytes))
}

/// Checks that `bytes` are one whole block, `expected` with `stored_len` payload bytes, whose
/// checksum holds; returns its header.
pub(crate) fn check_block(
    bytes: &[u8],
    expected: BlockId,
    stored_len: u32,
) -> Result<BlockHeader, String> {
    let header = match format::decode_header(bytes) {
        Ok(header) => header,
        Err(HeaderProblem::Zero) => return Err("the block header is zero".into()),
        Err(HeaderProblem::Invalid(detail)) => return Err(detail),
    };
    if header.remote.is_some() {
        return Err("a pointer where a block belongs".into());
    }
    if header.id != expected || header.stored_len != stored_len {
        return Err(format!(
            "found block {} of {} stored bytes where block {expected} of {stored_len} belongs",
            header.id, header.stored_len
        ));
    }
    if bytes.len() != BLOCK_HEADER_BYTES + stored_len as usize {
        return Err(format!(
            "{} bytes where a block of {stored_len} stored bytes belongs",
            bytes.len()
        ));
    }
    let (head, payload) = bytes.split_at(BLOCK_HEADER_BYTES);
    format::verify_block(head, payload)?;
    Ok(header)
}

/// Decompresses the payload of a verified block, given whole (header, then payload).
pub(crate) fn decode_payload(
    header: &BlockHeader,
    block: Vec<u8>,
    path: &Path,
    offset: u64,
) -> Result<Vec<u8>, BlockError> {
    let corruption = |detail| BlockError::Corruption {
        file: path.to_path_buf(),
        offset,
        block: Some(header.id),
        detail,
    };
    let stored = &block[BLOCK_HEADER_BYTES..];
    if header.codec == format::Codec::None {
        if stored.len() != header.raw_len as usize {
            return Err(corruption(format!(
                "payload of {} bytes, header says {}",
                stored.len(),
                header.raw_len
            )));
        }
        // The payload moves to the front of the buffer it was read into: no second buffer.
        let mut block = block;
        block.drain(..BLOCK_HEADER_BYTES);
        return Ok(block);
    }
    format::decompress(header.codec, stored, header.raw_len as usize).map_err(corruption)
}
