//! The on-disk formats of the block store (documented as offset tables in `docs/format.md`):
//! the block header, the segment header, the map checkpoint, and the doublewrite store's files.
//!
//! A segment is one file, `{number:016x}.blk`: a 4 KiB header, then blocks from
//! `BLOCKS_START` on, each at a multiple of `BLOCK_ALIGN`. A block is a 64-byte header and its
//! stored (possibly compressed) payload. Integers are little-endian.
//!
//! Invariants:
//! 1. A block decodes only if its magic, version, flags, codec and lengths are valid and its
//!    crc32c over the header (bytes 0..60) and the stored payload matches. Zeroed space never
//!    decodes: the magic is not zero.
//! 2. Decoding never panics and never allocates more than a length it has checked against a
//!    limit the caller gives (`MAX_BLOCK_BYTES` and the bytes the file holds).
//! 3. The checksum covers the stored bytes, so a block is verified before it is decompressed.

use std::borrow::Cow;

use crate::{BlockId, GroupId};

/// Magic at the start of every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"TKVB";

/// Version of the block and segment format.
pub const FORMAT_VERSION: u8 = 1;

/// Bytes of a block header.
pub const BLOCK_HEADER_BYTES: usize = 64;

/// Blocks start at multiples of this (a cache line).
pub const BLOCK_ALIGN: u64 = 64;

/// Bytes of the segment header; blocks start here.
pub const BLOCKS_START: u64 = 4096;

/// The largest payload a block may carry (raw or stored): 16 MiB. Larger values are split
/// into several blocks by the layer above.
pub const MAX_BLOCK_BYTES: usize = 16 << 20;

/// The most blocks in one group.
pub const MAX_GROUP_BLOCKS: usize = 1 << 20;

/// Magic at the start of every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"TKVBSEG\x01";

/// Magic at the start of a map checkpoint.
pub const MAP_MAGIC: [u8; 8] = *b"TKVBMAP\x01";

/// Bytes of the map checkpoint header; entries follow.
pub const MAP_HEADER_BYTES: usize = 96;

/// Offset of the map checkpoint header's checksum, which covers the bytes before it.
const MAP_HEADER_CRC_OFFSET: usize = 92;

/// Bytes of one map checkpoint entry.
pub const MAP_ENTRY_BYTES: usize = 40;

/// Offset of the block checksum; it covers bytes `0..BLOCK_CRC_OFFSET` and the payload.
const BLOCK_CRC_OFFSET: usize = 60;

/// Header flag: the last block of its group (the seed's flag bit).
pub const FLAG_LAST_IN_GROUP: u8 = 1;
/// Header flag: the block deletes its id (no payload).
pub const FLAG_TOMBSTONE: u8 = 2;
/// Header flag: a copy made by segment cleaning; `version` is the original write's.
pub const FLAG_RELOCATED: u8 = 4;
/// Header flag: a pointer. The block's content was written in the same group into reused
/// free space of an older segment, at `remote`; the pointer in the log carries no payload,
/// and its other fields are those of the block it points at.
pub const FLAG_REMOTE: u8 = 8;
/// Header flag: the block is a piece's mark, not a block of the layer above: its group is
/// a piece of a chain (`BlockStore::begin_chain`), which counts only once a piece marked
/// `FLAG_CHAIN_END` follows. `id` names the chain's first piece (0: this group is it); no
/// payload. Always the last block of its group.
pub const FLAG_CHAIN: u8 = 16;
/// Header flag, with `FLAG_CHAIN`: this piece ends its chain, which counts from here on.
pub const FLAG_CHAIN_END: u8 = 32;
const KNOWN_FLAGS: u8 = FLAG_LAST_IN_GROUP
    | FLAG_TOMBSTONE
    | FLAG_RELOCATED
    | FLAG_REMOTE
    | FLAG_CHAIN
    | FLAG_CHAIN_END;

/// Where a pointer's block lies, and the checksum that block must carry. Stored in the
/// header's bytes 48..60: segment (u32), offset / `BLOCK_ALIGN` (u32), crc32c (u32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteRef {
    /// Segment number.
    pub segment: u64,
    /// Byte offset of the block in it.
    pub offset: u64,
    /// The block's crc32c (its bytes 60..64).
    pub crc: u32,
}

impl RemoteRef {
    /// True when the reference fits the header's fields.
    pub fn representable(segment: u64, offset: u64) -> bool {
        segment <= u64::from(u32::MAX)
            && offset.is_multiple_of(BLOCK_ALIGN)
            && offset / BLOCK_ALIGN <= u64::from(u32::MAX)
    }
}

/// How a block's payload is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Codec {
    /// As is.
    #[default]
    None,
    /// LZ4 (lz4_flex block format).
    Lz4,
    /// Zstandard, level 1.
    Zstd,
}

impl Codec {
    /// The byte stored in block headers.
    pub fn code(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
        }
    }

    /// The codec of a header byte, if it is one.
    pub fn from_code(code: u8) -> Option<Codec> {
        match code {
            0 => Some(Codec::None),
            1 => Some(Codec::Lz4),
            2 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The name used in options and output.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd),
            other => Err(format!("unknown codec {other:?} (expected none, lz4 or zstd)")),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Compresses `raw` with `codec`. Returns the codec actually used: `None` when compressing
/// would not save space, so incompressible blocks cost nothing to read. Uncompressed bytes
/// are borrowed, not copied.
pub fn compress(codec: Codec, raw: &[u8]) -> (Codec, Cow<'_, [u8]>) {
    let stored = match codec {
        Codec::None => None,
        Codec::Lz4 => Some(lz4_flex::block::compress(raw)),
        // Level 1: the block store compresses on the write path.
        Codec::Zstd => zstd::bulk::compress(raw, 1).ok(),
    };
    match stored {
        Some(stored) if stored.len() < raw.len() => (codec, Cow::Owned(stored)),
        _ => (Codec::None, Cow::Borrowed(raw)),
    }
}

/// Decompresses a verified payload into exactly `raw_len` bytes.
pub fn decompress(codec: Codec, stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let raw = match codec {
        Codec::None => stored.to_vec(),
        Codec::Lz4 => lz4_flex::block::decompress(stored, raw_len)
            .map_err(|e| format!("lz4 payload does not decompress: {e}"))?,
        Codec::Zstd => zstd::bulk::decompress(stored, raw_len)
            .map_err(|e| format!("zstd payload does not decompress: {e}"))?,
    };
    if raw.len() != raw_len {
        return Err(format!("payload decompresses to {} bytes, header says {raw_len}", raw.len()));
    }
    Ok(raw)
}

/// The fields of a block header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// Flags (`FLAG_*`).
    pub flags: u8,
    /// How the payload is stored.
    pub codec: Codec,
    /// The block's logical id.
    pub id: BlockId,
    /// The group this copy was written in.
    pub group: GroupId,
    /// The group that wrote this content (differs from `group` for a cleaning copy). Between
    /// two copies of one id, the higher version is the newer content.
    pub version: GroupId,
    /// Payload bytes on disk.
    pub stored_len: u32,
    /// Payload bytes after decompression.
    pub raw_len: u32,
    /// Position of the block in its group, from 0.
    pub index: u32,
    /// Blocks in the group.
    pub count: u32,
    /// Set on a pointer (`FLAG_REMOTE`): where the content lies.
    pub remote: Option<RemoteRef>,
}

impl BlockHeader {
    /// Payload bytes that follow this header in its file: none for a pointer.
    pub fn payload_len(&self) -> usize {
        if self.remote.is_some() {
            0
        } else {
            self.stored_len as usize
        }
    }

    /// The header of the block a pointer points at: the same fields, without the pointer.
    pub fn pointee(&self) -> BlockHeader {
        BlockHeader { flags: self.flags & !FLAG_REMOTE, remote: None, ..*self }
    }

    /// True for the last block of its group.
    pub fn is_last(&self) -> bool {
        self.flags & FLAG_LAST_IN_GROUP != 0
    }

    /// True for a deletion.
    pub fn is_tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }

    /// For a piece's mark (`FLAG_CHAIN`): the chain's first group, and whether this piece
    /// ends the chain. `None` for a block of the layer above.
    pub fn chain(&self) -> Option<(GroupId, bool)> {
        (self.flags & FLAG_CHAIN != 0).then(|| {
            let first = if self.id.0 == 0 { self.group } else { GroupId(self.id.0) };
            (first, self.flags & FLAG_CHAIN_END != 0)
        })
    }

    /// Bytes the block takes in a segment, padding included.
    pub fn footprint(&self) -> u64 {
        block_footprint(self.payload_len())
    }
}

/// Bytes a block with `stored_len` payload bytes takes in a segment, padding included.
pub fn block_footprint(stored_len: usize) -> u64 {
    ((BLOCK_HEADER_BYTES + stored_len) as u64).next_multiple_of(BLOCK_ALIGN)
}

/// Appends one encoded block (header, payload, zero padding to `BLOCK_ALIGN`) to `out`.
pub fn encode_block(out: &mut Vec<u8>, header: &BlockHeader, stored: &[u8]) {
    encode_header(out, header, stored);
    out.extend_from_slice(stored);
    out.resize(out.len() + padding(stored.len()), 0);
}

/// The CRC-32C of a block: its header's bytes before the checksum, then its payload.
fn block_crc(header: &[u8], payload: &[u8]) -> u32 {
    tierkv_io::crc32c_parts(&[header, payload])
}

/// Zero bytes after a payload of `stored_len` bytes, up to the block's footprint.
pub fn padding(stored_len: usize) -> usize {
    block_footprint(stored_len) as usize - BLOCK_HEADER_BYTES - stored_len
}

/// Appends the `BLOCK_HEADER_BYTES` of a block's header to `out`, its checksum covering the
/// header and `stored`. The payload and `padding` zero bytes follow it in the file: a writer
/// can write them from where they are (`File::write_vectored_at`) without copying.
pub fn encode_header(out: &mut Vec<u8>, header: &BlockHeader, stored: &[u8]) {
    assert_eq!(header.payload_len(), stored.len(), "stored_len must match the payload");
    assert!(header.stored_len as usize <= MAX_BLOCK_BYTES);
    assert!(header.raw_len as usize <= MAX_BLOCK_BYTES);
    assert!(header.index < header.count && header.flags & !KNOWN_FLAGS == 0);
    assert_eq!(header.flags & FLAG_REMOTE != 0, header.remote.is_some());
    let start = out.len();
    out.extend_from_slice(&BLOCK_MAGIC);
    out.push(FORMAT_VERSION);
    out.push(header.flags);
    out.push(header.codec.code());
    out.push(0);
    out.extend_from_slice(&header.id.0.to_le_bytes());
    out.extend_from_slice(&header.group.0.to_le_bytes());
    out.extend_from_slice(&header.version.0.to_le_bytes());
    out.extend_from_slice(&header.stored_len.to_le_bytes());
    out.extend_from_slice(&header.raw_len.to_le_bytes());
    out.extend_from_slice(&header.index.to_le_bytes());
    out.extend_from_slice(&header.count.to_le_bytes());
    match header.remote {
        Some(remote) => {
            assert!(RemoteRef::representable(remote.segment, remote.offset));
            out.extend_from_slice(&(remote.segment as u32).to_le_bytes());
            out.extend_from_slice(&((remote.offset / BLOCK_ALIGN) as u32).to_le_bytes());
            out.extend_from_slice(&remote.crc.to_le_bytes());
        }
        None => out.extend_from_slice(&[0u8; 12]),
    }
    debug_assert_eq!(out.len() - start, BLOCK_CRC_OFFSET);
    let crc = block_crc(&out[start..], stored);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Why a header does not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderProblem {
    /// All 64 bytes are zero: unwritten space, the normal end of a segment's blocks.
    Zero,
    /// Anything else, with what is wrong.
    Invalid(String),
}

/// Decodes and checks a block header (everything but the checksum, which needs the payload:
/// see `verify_block`).
pub fn decode_header(bytes: &[u8]) -> Result<BlockHeader, HeaderProblem> {
    let Some(bytes) = bytes.get(..BLOCK_HEADER_BYTES) else {
        return Err(HeaderProblem::Invalid(format!(
            "only {} bytes where a {BLOCK_HEADER_BYTES}-byte header belongs",
            bytes.len()
        )));
    };
    if bytes.iter().all(|&b| b == 0) {
        return Err(HeaderProblem::Zero);
    }
    let invalid = |detail: String| Err(HeaderProblem::Invalid(detail));
    if bytes[0..4] != BLOCK_MAGIC {
        return invalid(format!("bad block magic {:02x?}", &bytes[0..4]));
    }
    if bytes[4] != FORMAT_VERSION {
        return invalid(format!("unknown block format version {}", bytes[4]));
    }
    let flags = bytes[5];
    if flags & !KNOWN_FLAGS != 0 {
        return invalid(format!("unknown block flags {flags:#04x}"));
    }
    let Some(codec) = Codec::from_code(bytes[6]) else {
        return invalid(format!("unknown codec {}", bytes[6]));
    };
    let remote = if flags & FLAG_REMOTE != 0 {
        Some(RemoteRef {
            segment: u64::from(u32_at(bytes, 48)),
            offset: u64::from(u32_at(bytes, 52)) * BLOCK_ALIGN,
            crc: u32_at(bytes, 56),
        })
    } else {
        None
    };
    if bytes[7] != 0 || (remote.is_none() && bytes[48..60].iter().any(|&b| b != 0)) {
        return invalid("reserved header bytes are not zero".into());
    }
    let header = BlockHeader {
        flags,
        codec,
        id: BlockId(u64_at(bytes, 8)),
        group: GroupId(u64_at(bytes, 16)),
        version: GroupId(u64_at(bytes, 24)),
        stored_len: u32_at(bytes, 32),
        raw_len: u32_at(bytes, 36),
        index: u32_at(bytes, 40),
        count: u32_at(bytes, 44),
        remote,
    };
    if let Some(remote) = remote {
        if header.is_tombstone() || flags & FLAG_RELOCATED != 0 || remote.offset < BLOCKS_START {
            return invalid(format!("an invalid pointer {remote:?} (flags {flags:#04x})"));
        }
    }
    if header.stored_len as usize > MAX_BLOCK_BYTES || header.raw_len as usize > MAX_BLOCK_BYTES {
        return invalid(format!(
            "block length out of range (stored {}, raw {}, limit {MAX_BLOCK_BYTES})",
            header.stored_len, header.raw_len
        ));
    }
    if header.count == 0 || header.count as usize > MAX_GROUP_BLOCKS || header.index >= header.count
    {
        return invalid(format!(
            "block position {} of {} in its group is out of range",
            header.index, header.count
        ));
    }
    if header.is_last() != (header.index + 1 == header.count) {
        return invalid("the last-in-group flag disagrees with the block's position".into());
    }
    if flags & (FLAG_CHAIN | FLAG_CHAIN_END) != 0 {
        let plain = flags & !(FLAG_CHAIN | FLAG_CHAIN_END) == FLAG_LAST_IN_GROUP;
        if flags & FLAG_CHAIN == 0
            || !plain
            || header.stored_len != 0
            || header.raw_len != 0
            || codec != Codec::None
            || header.id.0 >= header.group.0
            || header.version != header.group
        {
            return invalid(format!(
                "an invalid chain mark (flags {flags:#04x}, id {}, group {})",
                header.id, header.group
            ));
        }
    }
    if header.is_tombstone() && (header.stored_len != 0 || header.raw_len != 0) {
        return invalid("a tombstone with a payload".into());
    }
    if codec == Codec::None && header.stored_len != header.raw_len {
        return invalid("an uncompressed block whose stored and raw lengths differ".into());
    }
    if header.group.0 == 0 || header.version.0 == 0 || header.version > header.group {
        return invalid(format!(
            "group {} and version {} are not a valid pair",
            header.group.0, header.version.0
        ));
    }
    Ok(header)
}

/// Checks the checksum of a block whose header decoded; `payload` is its stored bytes.
pub fn verify_block(header_bytes: &[u8], payload: &[u8]) -> Result<(), String> {
    if header_bytes.len() < BLOCK_HEADER_BYTES {
        return Err(format!(
            "a block header needs {BLOCK_HEADER_BYTES} bytes, not {}",
            header_bytes.len()
        ));
    }
    let stored = u32_at(header_bytes, BLOCK_CRC_OFFSET);
    let actual = block_crc(&header_bytes[..BLOCK_CRC_OFFSET], payload);
    if stored != actual {
        return Err(format!("block checksum {stored:#010x} does not match {actual:#010x}"));
    }
    Ok(())
}

/// The fields of a segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment's number (also its file name).
    pub number: u64,
    /// Its size in bytes when it was created.
    pub capacity: u64,
    /// The stream it belongs to: 0 for groups of the layer above, 1 for cleaning's copies.
    pub stream: u8,
}

/// The most streams a log store writes.
pub const MAX_STREAMS: u8 = 2;

/// Encodes a segment header into a `BLOCKS_START`-byte block.
pub fn encode_segment_header(header: &SegmentHeader) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCKS_START as usize);
    out.extend_from_slice(&SEGMENT_MAGIC);
    out.extend_from_slice(&u32::from(FORMAT_VERSION).to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&header.number.to_le_bytes());
    out.extend_from_slice(&header.capacity.to_le_bytes());
    out.push(header.stream);
    out.resize(60, 0);
    let crc = tierkv_io::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.resize(BLOCKS_START as usize, 0);
    out
}

/// Decodes and checks a segment header.
pub fn decode_segment_header(bytes: &[u8]) -> Result<SegmentHeader, String> {
    if bytes.len() < 64 {
        return Err(format!("a segment header needs 64 bytes, the file has {}", bytes.len()));
    }
    if bytes[0..8] != SEGMENT_MAGIC {
        return Err(format!("bad segment magic {:02x?}", &bytes[0..8]));
    }
    let crc = tierkv_io::crc32c(&bytes[..60]);
    if crc != u32_at(bytes, 60) {
        return Err("segment header checksum does not match".into());
    }
    let version = u32_at(bytes, 8);
    if version != u32::from(FORMAT_VERSION) {
        return Err(format!("unknown segment format version {version}"));
    }
    let stream = bytes[32];
    if stream >= MAX_STREAMS {
        return Err(format!("unknown segment stream {stream}"));
    }
    Ok(SegmentHeader { number: u64_at(bytes, 16), capacity: u64_at(bytes, 24), stream })
}

/// Where a block lives: what a map entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// Segment number.
    pub segment: u64,
    /// Byte offset of the block header in the segment.
    pub offset: u64,
    /// The group that wrote the content.
    pub version: GroupId,
    /// Payload bytes on disk.
    pub stored_len: u32,
    /// Payload bytes after decompression.
    pub raw_len: u32,
}

impl Location {
    /// Bytes the block takes in its segment.
    pub fn footprint(&self) -> u64 {
        block_footprint(self.stored_len as usize)
    }
}

/// The fields of a map checkpoint header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapHeader {
    /// The checkpoint's sequence number (also its file name).
    pub sequence: u64,
    /// Where recovery's scan starts in each stream, `(segment, offset)` (by stream code):
    /// that stream's segments from this one on, this one from the offset. `(0, 0)` scans
    /// every segment of the stream.
    pub scan: [(u64, u64); MAX_STREAMS as usize],
    /// Every group below this id is reflected in the entries or lies after the scan start.
    pub next_group: GroupId,
    /// Entries that follow.
    pub entries: u64,
}

/// Encodes a map checkpoint: header, entries, and a crc32c over the entries.
pub fn encode_map(header: &MapHeader, entries: &[(BlockId, Location)]) -> Vec<u8> {
    assert_eq!(header.entries, entries.len() as u64);
    let mut out = Vec::with_capacity(MAP_HEADER_BYTES + entries.len() * MAP_ENTRY_BYTES + 4);
    out.extend_from_slice(&MAP_MAGIC);
    out.extend_from_slice(&u32::from(FORMAT_VERSION).to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&header.sequence.to_le_bytes());
    for (segment, offset) in header.scan {
        out.extend_from_slice(&segment.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    out.extend_from_slice(&header.next_group.0.to_le_bytes());
    out.extend_from_slice(&header.entries.to_le_bytes());
    out.resize(MAP_HEADER_CRC_OFFSET, 0);
    let crc = tierkv_io::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len(), MAP_HEADER_BYTES);
    for (id, location) in entries {
        out.extend_from_slice(&id.0.to_le_bytes());
        out.extend_from_slice(&location.segment.to_le_bytes());
        out.extend_from_slice(&location.offset.to_le_bytes());
        out.extend_from_slice(&location.version.0.to_le_bytes());
        out.extend_from_slice(&location.stored_len.to_le_bytes());
        out.extend_from_slice(&location.raw_len.to_le_bytes());
    }
    let crc = tierkv_io::crc32c(&out[MAP_HEADER_BYTES..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A decoded map checkpoint: its header and entries.
pub type MapContents = (MapHeader, Vec<(BlockId, Location)>);

/// Decodes and checks a map checkpoint. `Err` carries the offset of the problem.
pub fn decode_map(bytes: &[u8]) -> Result<MapContents, (u64, String)> {
    if bytes.len() < MAP_HEADER_BYTES + 4 {
        return Err((0, format!("a map checkpoint of {} bytes is too short", bytes.len())));
    }
    if bytes[0..8] != MAP_MAGIC {
        return Err((0, format!("bad map checkpoint magic {:02x?}", &bytes[0..8])));
    }
    if tierkv_io::crc32c(&bytes[..MAP_HEADER_CRC_OFFSET]) != u32_at(bytes, MAP_HEADER_CRC_OFFSET) {
        return Err((0, "map checkpoint header checksum does not match".into()));
    }
    let version = u32_at(bytes, 8);
    if version != u32::from(FORMAT_VERSION) {
        return Err((8, format!("unknown map checkpoint version {version}")));
    }
    let header = MapHeader {
        sequence: u64_at(bytes, 16),
        scan: [(u64_at(bytes, 24), u64_at(bytes, 32)), (u64_at(bytes, 40), u64_at(bytes, 48))],
        next_group: GroupId(u64_at(bytes, 56)),
        entries: u64_at(bytes, 64),
    };
    let body = (bytes.len() - MAP_HEADER_BYTES - 4) as u64;
    if header.entries.checked_mul(MAP_ENTRY_BYTES as u64) != Some(body) {
        return Err((64, format!("{} entries do not fit {body} bytes", header.entries)));
    }
    let crc_at = bytes.len() - 4;
    if tierkv_io::crc32c(&bytes[MAP_HEADER_BYTES..crc_at]) != u32_at(bytes, crc_at) {
        return Err((MAP_HEADER_BYTES as u64, "map checkpoint entries checksum mismatch".into()));
    }
    let mut entries = Vec::with_capacity(header.entries as usize);
    for (i, entry) in bytes[MAP_HEADER_BYTES..crc_at].chunks_exact(MAP_ENTRY_BYTES).enumerate() {
        let location = Location {
            segment: u64_at(entry, 8),
            offset: u64_at(entry, 16),
            version: GroupId(u64_at(entry, 24)),
            stored_len: u32_at(entry, 32),
            raw_len: u32_at(entry, 36),
        };
        let at = (MAP_HEADER_BYTES + i * MAP_ENTRY_BYTES) as u64;
        if location.offset < BLOCKS_START
            || location.stored_len as usize > MAX_BLOCK_BYTES
            || location.raw_len as usize > MAX_BLOCK_BYTES
            || location.version >= header.next_group
        {
            return Err((at, format!("map entry {i} is out of range: {location:?}")));
        }
        entries.push((BlockId(u64_at(entry, 0)), location));
    }
    Ok((header, entries))
}

/// Magic at the start of the doublewrite store's batch file.
pub const DOUBLEWRITE_MAGIC: [u8; 8] = *b"TKVBDWB\x01";

/// Bytes of the doublewrite batch header; the batch's encoded blocks follow.
pub const DOUBLEWRITE_HEADER_BYTES: usize = 64;

/// The fields of a doublewrite batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoublewriteHeader {
    /// The group the batch holds.
    pub group: GroupId,
    /// Its blocks.
    pub count: u32,
    /// Bytes of encoded blocks after the header.
    pub body_bytes: u64,
}

/// Encodes a doublewrite batch header.
pub fn encode_doublewrite_header(header: &DoublewriteHeader) -> Vec<u8> {
    let mut out = Vec::with_capacity(DOUBLEWRITE_HEADER_BYTES);
    out.extend_from_slice(&DOUBLEWRITE_MAGIC);
    out.extend_from_slice(&u32::from(FORMAT_VERSION).to_le_bytes());
    out.extend_from_slice(&header.count.to_le_bytes());
    out.extend_from_slice(&header.group.0.to_le_bytes());
    out.extend_from_slice(&header.body_bytes.to_le_bytes());
    out.resize(60, 0);
    let crc = tierkv_io::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes and checks a doublewrite batch header.
pub fn decode_doublewrite_header(bytes: &[u8]) -> Result<DoublewriteHeader, String> {
    if bytes.len() < DOUBLEWRITE_HEADER_BYTES {
        return Err(format!("a doublewrite header needs 64 bytes, there are {}", bytes.len()));
    }
    if bytes[0..8] != DOUBLEWRITE_MAGIC {
        return Err(format!("bad doublewrite magic {:02x?}", &bytes[0..8]));
    }
    if tierkv_io::crc32c(&bytes[..60]) != u32_at(bytes, 60) {
        return Err("doublewrite header checksum does not match".into());
    }
    let version = u32_at(bytes, 8);
    if version != u32::from(FORMAT_VERSION) {
        return Err(format!("unknown doublewrite format version {version}"));
    }
    let header = DoublewriteHeader {
        count: u32_at(bytes, 12),
        group: GroupId(u64_at(bytes, 16)),
        body_bytes: u64_at(bytes, 24),
    };
    if header.count == 0 || header.count as usize > MAX_GROUP_BLOCKS || header.group.0 == 0 {
        return Err(format!(
            "doublewrite batch of {} blocks, group {}",
            header.count, header.group.0
        ));
    }
    Ok(header)
}

/// The segment file name for a number.
pub fn segment_file_name(number: u64) -> String {
    format!("{number:016x}.blk")
}

/// The number of a segment file name, if it is one.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    parse_hex_name(name, ".blk")
}

/// The map checkpoint file name for a sequence number.
pub fn map_file_name(sequence: u64) -> String {
    format!("{sequence:016x}.map")
}

/// The sequence number of a map checkpoint file name, if it is one.
pub fn parse_map_file_name(name: &str) -> Option<u64> {
    parse_hex_name(name, ".map")
}

fn parse_hex_name(name: &str, suffix: &str) -> Option<u64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 16 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(stem, 16).ok()
}

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

#[cfg(test)]
mod tests;
