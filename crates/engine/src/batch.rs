//! `WriteBatch`: puts and deletes applied atomically, and their log record.
//!
//! A batch is one log record (type `BATCH_RECORD`), so after a crash it is there whole or
//! not at all, and one sequence number, so a reader sees all of it or none. A single `put`
//! or `delete` is a batch of one. The record's layout is in `docs/format.md` ("Engine log
//! records"): a count (u32), then per operation its kind (`1` put, `2` delete), the key's
//! length (u32) and bytes, and for a put the value's length (u32) and bytes; integers
//! little-endian.
//!
//! Must never: decode a record whose lengths run past its end or that has bytes left over.

use crate::Error;

/// The log record type of a batch.
pub const BATCH_RECORD: u8 = 1;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// The largest key of any store, in bytes (a store's own limit, `Options::max_key_bytes`,
/// depends on its page size and may be lower).
pub const MAX_KEY_BYTES: usize = crate::page::MAX_KEY_BYTES;

/// The largest value, in bytes. Values larger than a quarter of a page are kept in overflow
/// blocks.
pub const MAX_VALUE_BYTES: usize = 64 << 20;

/// The largest batch, in bytes of its log record.
pub const MAX_BATCH_BYTES: usize = 256 << 20;

/// Puts and deletes applied together: all of them or none, at one sequence number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Sets `key` to `value`. A later operation on the same key in the batch wins.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.bytes += 1 + 4 + key.len() + 4 + value.len();
        self.ops.push((key.to_vec(), Some(value.to_vec())));
        self
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.bytes += 1 + 4 + key.len();
        self.ops.push((key.to_vec(), None));
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }

    /// The operations in order: a key, and its value or `None` for a delete.
    pub fn ops(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.ops.iter().map(|(key, value)| (key.as_slice(), value.as_deref()))
    }

    /// Bytes of the batch's log record.
    pub(crate) fn record_bytes(&self) -> usize {
        4 + self.bytes
    }

    /// Checks every key and value against the limits, as a write of the batch would, so
    /// that a caller can refuse input before it opens or changes anything.
    ///
    /// # Errors
    ///
    /// `Error::EmptyKey`, `Error::KeyTooLarge`, `Error::ValueTooLarge` or
    /// `Error::BatchTooLarge`, for the first operation over a limit.
    pub fn validate(&self) -> Result<(), Error> {
        for (key, value) in self.ops() {
            check_key(key)?;
            if let Some(value) = value {
                if value.len() > MAX_VALUE_BYTES {
                    return Err(Error::ValueTooLarge { len: value.len(), max: MAX_VALUE_BYTES });
                }
            }
        }
        if self.record_bytes() > MAX_BATCH_BYTES {
            return Err(Error::BatchTooLarge { len: self.record_bytes(), max: MAX_BATCH_BYTES });
        }
        Ok(())
    }

    /// The log record's payload.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.bytes);
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for (key, value) in &self.ops {
            out.push(if value.is_some() { OP_PUT } else { OP_DELETE });
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            if let Some(value) = value {
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
        }
        out
    }

    /// Decodes a log record's payload, checking every length.
    pub(crate) fn decode(bytes: &[u8]) -> Result<WriteBatch, String> {
        let mut reader = Reader { bytes, at: 0 };
        let count = reader.u32()? as usize;
        // Each operation takes at least 5 bytes: a count beyond that is damage.
        if count > bytes.len() / 5 {
            return Err(format!("{count} operations cannot fit in {} bytes", bytes.len()));
        }
        let mut batch = WriteBatch::new();
        for _ in 0..count {
            let op = reader.take(1)?[0];
            let len = reader.u32()? as usize;
            let key = reader.take(len)?;
            match op {
                OP_PUT => {
                    let len = reader.u32()? as usize;
                    let value = reader.take(len)?;
                    batch.put(key, value);
                }
                OP_DELETE => {
                    batch.delete(key);
                }
                other => return Err(format!("unknown operation {other} at byte {}", reader.at)),
            }
        }
        if reader.at != bytes.len() {
            return Err(format!("{} bytes after the last operation", bytes.len() - reader.at));
        }
        Ok(batch)
    }
}

/// Checks a key against the limits: not empty, at most `MAX_KEY_BYTES`.
pub(crate) fn check_key(key: &[u8]) -> Result<(), Error> {
    if key.is_empty() {
        return Err(Error::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::KeyTooLarge { len: key.len(), max: MAX_KEY_BYTES });
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(len).filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("{len} bytes at byte {} run past the end", self.at));
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_and_every_truncation_or_damage_is_an_error_or_harmless() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"1").delete(b"b").put(b"c", vec![7u8; 300]).put(b"a", b"");
        let bytes = batch.encode();
        assert_eq!(WriteBatch::decode(&bytes), Ok(batch.clone()));
        for len in 0..bytes.len() {
            assert!(WriteBatch::decode(&bytes[..len]).is_err(), "a cut at {len} decoded");
        }
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0xff;
            // The log's checksum catches damage; decoding it anyway must not panic.
            let _ = WriteBatch::decode(&damaged);
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(WriteBatch::decode(&long).is_err());
        assert!(WriteBatch::decode(&u32::MAX.to_le_bytes()).is_err());
    }

    #[test]
    fn keys_and_values_over_the_limits_are_refused() {
        let mut batch = WriteBatch::new();
        batch.put(b"", b"v");
        assert!(matches!(batch.validate(), Err(Error::EmptyKey)));
        let mut batch = WriteBatch::new();
        batch.put(vec![1u8; MAX_KEY_BYTES + 1], b"v");
        assert!(matches!(batch.validate(), Err(Error::KeyTooLarge { .. })));
        let mut batch = WriteBatch::new();
        batch.put(vec![1u8; MAX_KEY_BYTES], vec![0u8; MAX_VALUE_BYTES]);
        assert!(batch.validate().is_ok());
        batch.put(b"k", vec![0u8; MAX_VALUE_BYTES + 1]);
        assert!(matches!(batch.validate(), Err(Error::ValueTooLarge { .. })));
    }
}
