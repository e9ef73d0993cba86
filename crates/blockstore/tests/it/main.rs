//! Integration tests of `tierkv-blockstore`, one binary.

mod crash;
mod doublewrite;
mod log;

use tierkv_blockstore::BlockId;

/// A payload that names its block and version, of `len` bytes, and compresses somewhat.
pub fn content(id: BlockId, version: u64, len: usize) -> Vec<u8> {
    let mut bytes = format!("block {} version {version};", id.0).into_bytes();
    let mut state = id.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ version;
    while bytes.len() < len {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        // Half the bytes repeat, half are noise: lz4 and zstd both find something to do.
        let byte = if (state >> 60) & 1 == 0 {
            b'a' + (bytes.len() % 7) as u8
        } else {
            (state >> 32) as u8
        };
        bytes.push(byte);
    }
    bytes.truncate(len);
    bytes
}
