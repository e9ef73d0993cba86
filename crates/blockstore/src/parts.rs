//! Encoded blocks written from where their payloads are: a writer encodes only the headers
//! of a group into a buffer of its own and writes each block as (header, payload, zero
//! padding) with one vectored write per contiguous range, so that a payload is never copied
//! before it goes to the file.

use std::sync::Arc;

use tierkv_io::File;

use crate::format::{self, BlockHeader, BLOCK_HEADER_BYTES};
use crate::writeback::Hints;

/// Where one block's bytes come from when it is written: its header in the group's header
/// buffer, its payload where the caller keeps it, and zero padding.
pub(crate) struct Part<'a> {
    /// Offset of the header in the header buffer.
    pub(crate) header: usize,
    pub(crate) payload: &'a [u8],
}

/// Zeros for padding (less than `format::BLOCK_ALIGN` bytes).
static ZEROS: [u8; format::BLOCK_ALIGN as usize] = [0; format::BLOCK_ALIGN as usize];

impl<'a> Part<'a> {
    /// Encodes the header of a block with payload `stored` into `headers`.
    pub(crate) fn encode(
        headers: &mut Vec<u8>,
        header: &BlockHeader,
        stored: &'a [u8],
    ) -> Part<'a> {
        let at = headers.len();
        format::encode_header(headers, header, stored);
        Part { header: at, payload: stored }
    }

    /// Bytes the block takes in the file.
    pub(crate) fn footprint(&self) -> u64 {
        format::block_footprint(self.payload.len())
    }

    /// The block's encoded bytes (for a copy that must be contiguous).
    pub(crate) fn slices<'b>(&'b self, headers: &'b [u8]) -> [&'b [u8]; 3] {
        [
            &headers[self.header..self.header + BLOCK_HEADER_BYTES],
            self.payload,
            &ZEROS[..format::padding(self.payload.len())],
        ]
    }
}

/// Writes `prefix` and then `parts` back to back at `offset` with one vectored write, and
/// notes the range for the write-back thread.
pub(crate) fn write_parts(
    file: &Arc<File>,
    prefix: &[u8],
    headers: &[u8],
    parts: &[Part<'_>],
    offset: u64,
    hints: &mut Hints<'_>,
) -> tierkv_io::Result<()> {
    let mut slices: Vec<&[u8]> = Vec::with_capacity(1 + parts.len() * 3);
    slices.push(prefix);
    let mut bytes = prefix.len() as u64;
    for part in parts {
        slices.extend(part.slices(headers));
        bytes += part.footprint();
    }
    file.write_vectored_at(&slices, offset)?;
    hints.written(file, offset, bytes);
    Ok(())
}
