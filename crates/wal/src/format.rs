//! The on-disk format of log segments (documented as offset tables in `docs/format.md`).
//!
//! A segment is one file, `{number:016x}.wal`. It starts with a 4 KiB header block and holds
//! records from `RECORDS_START` on, each starting at an 8-byte aligned offset. Integers are
//! little-endian.
//!
//! Invariants:
//! 1. A record decodes only if its type is not 0, its length fits the segment and the limit,
//!    and its crc32c over the header (from byte 4) and the payload matches. Zeroed space never
//!    decodes: type 0 is reserved.
//! 2. Encoding and decoding are exact inverses, and decoding never panics or allocates more
//!    than the length it has checked against the segment's bounds.

use crate::{Lsn, RecordType};

/// Magic bytes at the start of every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"TKVWAL\0\x01";

/// Version of the segment and record format this build writes: 2 added recycled segments
/// (the header's flags and stale bound). Version 1 segments, never recycled, are read too.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest segment format this build reads.
const OLDEST_READ_VERSION: u32 = 1;

/// Header flag: the segment's file held an earlier segment (see `SegmentHeader::recycled`).
const FLAG_RECYCLED: u8 = 1;

/// Bytes of the segment header block; records start here, page-aligned.
pub const RECORDS_START: u64 = 4096;

/// Offset of the pmem backend's commit word: the end offset of the committed records, stored
/// with one 8-byte atomic store on its own cache line.
pub const COMMIT_WORD_OFFSET: u64 = 64;

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 24;

/// Records start at multiples of this.
pub const RECORD_ALIGN: u64 = 8;

/// The largest payload a record may carry (256 MiB). A record larger than the configured
/// segment size gets a segment of its own, sized to fit.
pub const MAX_PAYLOAD_BYTES: usize = 256 << 20;

/// Bytes of the segment header that carry fields (the rest of the 4 KiB block is zero).
const HEADER_FIELDS_BYTES: usize = 64;

/// Offset of the header checksum, which covers bytes `0..HEADER_CRC_OFFSET`.
const HEADER_CRC_OFFSET: usize = 60;

/// Which backend wrote a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// pwrite plus fdatasync, with group commit.
    File,
    /// Copies into a mapping persisted with flush and fence, then a persisted commit word.
    Pmem,
}

impl Backend {
    /// The name used in options, output and errors.
    pub fn name(self) -> &'static str {
        match self {
            Backend::File => "file",
            Backend::Pmem => "pmem",
        }
    }

    fn code(self) -> u8 {
        match self {
            Backend::File => 1,
            Backend::Pmem => 2,
        }
    }

    fn from_code(code: u8) -> Option<Backend> {
        match code {
            1 => Some(Backend::File),
            2 => Some(Backend::Pmem),
            _ => None,
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "file" => Ok(Backend::File),
            "pmem" => Ok(Backend::Pmem),
            _ => Err(format!("unknown log backend {text:?}; expected file or pmem")),
        }
    }
}

/// The fields of a segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment's number, which is also its file name.
    pub number: u64,
    /// The file's size when the segment was prepared.
    pub capacity: u64,
    /// The backend that writes it.
    pub backend: Backend,
    /// `Some(bound)` for a recycled segment: its file held segments truncated earlier, so
    /// its record space may hold their records (stale ones), every one with an LSN below
    /// `bound`; every record it takes as this segment has an LSN at or above it. `None`:
    /// the record space was zero-filled.
    pub recycled: Option<Lsn>,
}

impl SegmentHeader {
    /// The header block: fields, checksum, and zeros up to `RECORDS_START`. The commit word
    /// starts at `RECORDS_START` (nothing committed).
    pub fn encode(&self) -> Vec<u8> {
        let mut block = vec![0u8; RECORDS_START as usize];
        block[0..8].copy_from_slice(&SEGMENT_MAGIC);
        block[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        block[16..24].copy_from_slice(&self.number.to_le_bytes());
        block[24..32].copy_from_slice(&self.capacity.to_le_bytes());
        block[32] = self.backend.code();
        if let Some(bound) = self.recycled {
            block[33] = FLAG_RECYCLED;
            block[40..48].copy_from_slice(&bound.get().to_le_bytes());
        }
        let crc = tierkv_io::crc32c(&block[..HEADER_CRC_OFFSET]);
        block[HEADER_CRC_OFFSET..HEADER_FIELDS_BYTES].copy_from_slice(&crc.to_le_bytes());
        let commit = COMMIT_WORD_OFFSET as usize;
        block[commit..commit + 8].copy_from_slice(&RECORDS_START.to_le_bytes());
        block
    }

    /// Decodes the first `HEADER_FIELDS_BYTES` of a segment; the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, String> {
        if bytes.len() < HEADER_FIELDS_BYTES {
            return Err(format!(
                "the header needs {HEADER_FIELDS_BYTES} bytes, found {}",
                bytes.len()
            ));
        }
        if bytes[0..8] != SEGMENT_MAGIC {
            return Err("bad magic: not a tierkv log segment".into());
        }
        let stored = u32::from_le_bytes(le4(&bytes[HEADER_CRC_OFFSET..]));
        let computed = tierkv_io::crc32c(&bytes[..HEADER_CRC_OFFSET]);
        if stored != computed {
            return Err(format!("header checksum {stored:#010x} != computed {computed:#010x}"));
        }
        let version = u32::from_le_bytes(le4(&bytes[8..]));
        if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!(
                "format version {version}; this build reads versions \
                 {OLDEST_READ_VERSION} to {FORMAT_VERSION}"
            ));
        }
        let backend = Backend::from_code(bytes[32])
            .ok_or_else(|| format!("unknown backend code {}", bytes[32]))?;
        let flags = bytes[33];
        let bound = u64::from_le_bytes(le8(&bytes[40..]));
        let recycled = match (flags, version) {
            (0, _) if bound == 0 => None,
            (FLAG_RECYCLED, 2..) if bound > 0 && backend == Backend::File => Some(Lsn(bound)),
            _ => {
                return Err(format!(
                    "flags {flags:#04x} with stale bound {bound} in a version {version} \
                     {backend} segment"
                ))
            }
        };
        Ok(SegmentHeader {
            number: u64::from_le_bytes(le8(&bytes[16..])),
            capacity: u64::from_le_bytes(le8(&bytes[24..])),
            backend,
            recycled,
        })
    }
}

/// A record header as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// crc32c over header bytes `4..24` and the payload.
    pub crc: u32,
    /// Payload bytes.
    pub len: u32,
    /// The record's log sequence number.
    pub lsn: Lsn,
    /// The caller's record type (never 0).
    pub kind: u8,
}

/// Bytes a record with `payload_len` payload bytes takes in a segment, padding included.
pub fn record_bytes(payload_len: usize) -> u64 {
    (RECORD_HEADER_BYTES as u64 + payload_len as u64).next_multiple_of(RECORD_ALIGN)
}

/// Encodes a record (header, payload, zero padding) into `out`, which is cleared first.
pub fn encode_record(out: &mut Vec<u8>, lsn: Lsn, kind: RecordType, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_PAYLOAD_BYTES);
    out.clear();
    out.resize(record_bytes(payload.len()) as usize, 0);
    out[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    out[8..16].copy_from_slice(&lsn.get().to_le_bytes());
    out[16] = kind.get();
    out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    let crc = record_crc(&out[4..RECORD_HEADER_BYTES], payload);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
}

fn record_crc(header_tail: &[u8], payload: &[u8]) -> u32 {
    tierkv_io::crc32c_parts(&[header_tail, payload])
}

/// Why bytes at a record position are not a valid record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Zeroed or never-written space: type 0.
    Empty,
    /// The length runs past the segment's end or the payload limit.
    BadLength,
    /// The checksum does not match.
    BadChecksum,
    /// A reserved byte is not zero.
    BadReserved,
}

impl Invalid {
    /// A short description for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Invalid::Empty => "unwritten space",
            Invalid::BadLength => "a length past the segment's end",
            Invalid::BadChecksum => "a checksum mismatch (torn or corrupt)",
            Invalid::BadReserved => "non-zero reserved bytes",
        }
    }
}

/// Decodes a record header from `bytes` (at least `RECORD_HEADER_BYTES`), where `room` is the
/// number of bytes from the record's start to the end of the segment. Checks everything but
/// the checksum, which needs the payload (`check_payload`).
pub fn decode_header(bytes: &[u8], room: u64) -> Result<RecordHeader, Invalid> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return Err(Invalid::BadLength);
    }
    let header = RecordHeader {
        crc: u32::from_le_bytes(le4(&bytes[0..])),
        len: u32::from_le_bytes(le4(&bytes[4..])),
        lsn: Lsn(u64::from_le_bytes(le8(&bytes[8..]))),
        kind: bytes[16],
    };
    if header.kind == 0 {
        return Err(Invalid::Empty);
    }
    if bytes[17..RECORD_HEADER_BYTES].iter().any(|&b| b != 0) {
        return Err(Invalid::BadReserved);
    }
    if header.len as usize > MAX_PAYLOAD_BYTES || record_bytes(header.len as usize) > room {
        return Err(Invalid::BadLength);
    }
    Ok(header)
}

/// Checks a record's checksum: `header_bytes` are its first `RECORD_HEADER_BYTES`.
pub fn check_payload(
    header_bytes: &[u8],
    header: &RecordHeader,
    payload: &[u8],
) -> Result<(), Invalid> {
    if record_crc(&header_bytes[4..RECORD_HEADER_BYTES], payload) == header.crc {
        Ok(())
    } else {
        Err(Invalid::BadChecksum)
    }
}

/// The file name of segment `number`.
pub fn segment_file_name(number: u64) -> String {
    format!("{number:016x}.wal")
}

/// The segment number a file name stands for, if it is a segment's name.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".wal")?;
    if stem.len() != 16 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(stem, 16).ok()
}

/// The temporary name a segment is prepared under before it is renamed into place.
pub fn prepare_file_name(number: u64) -> String {
    format!("{number:016x}.wal.prepare")
}

/// The name a segment's file takes once `truncate_below` has let go of it, until a
/// preparation recycles it (or recovery removes it).
pub fn free_file_name(number: u64) -> String {
    format!("{number:016x}.wal.free")
}

/// True for names `free_file_name` gives.
pub fn is_free_file_name(name: &str) -> bool {
    name.strip_suffix(".wal.free")
        .is_some_and(|stem| parse_segment_file_name(&format!("{stem}.wal")).is_some())
}

/// True for names of segments left half-prepared by a crash.
pub fn is_prepare_file_name(name: &str) -> bool {
    name.strip_suffix(".wal.prepare")
        .is_some_and(|stem| parse_segment_file_name(&format!("{stem}.wal")).is_some())
}

fn le4(bytes: &[u8]) -> [u8; 4] {
    let mut out = [0u8; 4];
    out.copy_from_slice(&bytes[..4]);
    out
}

fn le8(bytes: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[..8]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(value: u8) -> RecordType {
        RecordType::new(value).expect("a non-zero type")
    }

    #[test]
    fn records_round_trip_and_reject_every_single_bit_flip() {
        let mut buf = Vec::new();
        encode_record(&mut buf, Lsn(42), kind(7), b"hello, log");
        assert_eq!(buf.len() as u64, record_bytes(10));
        assert_eq!(buf.len() % 8, 0);
        let header = decode_header(&buf, buf.len() as u64).expect("valid");
        assert_eq!((header.lsn, header.kind, header.len), (Lsn(42), 7, 10));
        let payload = &buf[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 10];
        check_payload(&buf, &header, payload).expect("checksum");
        assert_eq!(payload, b"hello, log");
        let covered = RECORD_HEADER_BYTES + 10;
        for bit in 0..covered * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let verdict = decode_header(&bad, bad.len() as u64).and_then(|h| {
                check_payload(
                    &bad,
                    &h,
                    &bad[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + h.len as usize],
                )
            });
            assert!(verdict.is_err(), "bit {bit} flipped and the record still decoded");
        }
    }

    #[test]
    fn zeros_and_overlong_lengths_do_not_decode() {
        assert_eq!(decode_header(&[0u8; 64], 64), Err(Invalid::Empty));
        let mut buf = Vec::new();
        encode_record(&mut buf, Lsn(1), kind(1), &[9u8; 100]);
        assert_eq!(decode_header(&buf, buf.len() as u64 - 8), Err(Invalid::BadLength));
        buf[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_header(&buf, u64::MAX), Err(Invalid::BadLength));
        assert_eq!(decode_header(&buf[..10], 100), Err(Invalid::BadLength));
    }

    #[test]
    fn segment_headers_round_trip_and_reject_damage() {
        let header = SegmentHeader {
            number: 0x1234,
            capacity: 1 << 26,
            backend: Backend::Pmem,
            recycled: None,
        };
        let recycled = SegmentHeader { backend: Backend::File, recycled: Some(Lsn(77)), ..header };
        assert_eq!(SegmentHeader::decode(&recycled.encode()), Ok(recycled));
        let mut pmem_recycled = recycled;
        pmem_recycled.backend = Backend::Pmem;
        assert!(SegmentHeader::decode(&pmem_recycled.encode()).is_err(), "pmem never recycles");
        let block = header.encode();
        assert_eq!(block.len() as u64, RECORDS_START);
        assert_eq!(SegmentHeader::decode(&block), Ok(header));
        // A version 1 header (no flags) still reads; one with the recycled flag does not.
        let version_1 = |block: &[u8]| {
            let mut old = block.to_vec();
            old[8..12].copy_from_slice(&1u32.to_le_bytes());
            let crc = tierkv_io::crc32c(&old[..HEADER_CRC_OFFSET]);
            old[HEADER_CRC_OFFSET..HEADER_FIELDS_BYTES].copy_from_slice(&crc.to_le_bytes());
            old
        };
        assert_eq!(SegmentHeader::decode(&version_1(&block)), Ok(header));
        assert!(SegmentHeader::decode(&version_1(&recycled.encode())).is_err());
        let commit = COMMIT_WORD_OFFSET as usize;
        assert_eq!(u64::from_le_bytes(le8(&block[commit..])), RECORDS_START);
        for byte in 0..HEADER_CRC_OFFSET + 4 {
            let mut bad = block.clone();
            bad[byte] ^= 0x10;
            assert!(SegmentHeader::decode(&bad).is_err(), "byte {byte}");
        }
        assert!(SegmentHeader::decode(&block[..10]).is_err());
    }

    #[test]
    fn segment_names_round_trip() {
        assert_eq!(segment_file_name(0xab), "00000000000000ab.wal");
        assert_eq!(parse_segment_file_name("00000000000000ab.wal"), Some(0xab));
        assert_eq!(parse_segment_file_name("ab.wal"), None);
        assert_eq!(parse_segment_file_name("00000000000000ab.wal.prepare"), None);
        assert!(is_prepare_file_name(&prepare_file_name(3)));
        assert!(!is_prepare_file_name("LOCK"));
        assert!(is_free_file_name(&free_file_name(3)));
        assert!(!is_free_file_name(&prepare_file_name(3)));
        assert_eq!(parse_segment_file_name(&free_file_name(3)), None);
    }
}
