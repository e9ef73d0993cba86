//! Integration tests of `tierkv-blockstore`, one binary.

mod chain;
mod concurrent;
mod crash;
mod doublewrite;
mod log;
mod scan;

use std::collections::BTreeMap;

use tierkv_blockstore::{BlockId, BlockWrite};
use tierkv_io::sim::CrashModel;

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

/// Crash models cycled over the images of each crash point of the sweeps.
pub const MODELS: [CrashModel; 8] = CrashModel::SWEEP;

pub type Content = BTreeMap<BlockId, Vec<u8>>;

/// One group: its changes as owned bytes (`None` deletes).
#[derive(Clone, Debug)]
pub struct Group {
    pub changes: Vec<(BlockId, Option<Vec<u8>>)>,
}

impl Group {
    pub fn writes(&self) -> Vec<BlockWrite<'_>> {
        self.changes
            .iter()
            .map(|(id, bytes)| match bytes {
                Some(bytes) => BlockWrite::Put(*id, bytes),
                None => BlockWrite::Delete(*id),
            })
            .collect()
    }

    pub fn apply_to(&self, model: &mut Content) {
        for (id, bytes) in &self.changes {
            match bytes {
                Some(bytes) => model.insert(*id, bytes.clone()),
                None => model.remove(id),
            };
        }
    }
}

/// The content after each prefix of the groups: `states[k]` after the first `k`.
pub fn prefix_states(groups: &[Group]) -> Vec<Content> {
    let mut states = vec![Content::new()];
    let mut current = Content::new();
    for group in groups {
        group.apply_to(&mut current);
        states.push(current.clone());
    }
    states
}
