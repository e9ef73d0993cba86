//! The identity file `TIERKV`: what makes a directory a tierkv store, which format version
//! wrote it, whether it is ready, and the settings every later open must share (the log's
//! place and backend, the page size).
//!
//! Layout (little-endian; `docs/format.md` has the table and its history):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 16 | magic `tierkv\0store\r\n\x1a\n` |
//! | 16 | 4 | format version (2) |
//! | 20 | 4 | state: 1 ready, 2 being created, 3 a backup being written |
//! | 24 | 4 | page bytes |
//! | 28 | 1 | log backend: 0 file, 1 pmem |
//! | 29 | 1 | flags: bit 0, the log lies outside the store at the path below |
//! | 30 | 2 | length `n` of the log's path (at most 4,096) |
//! | 32 | 8 | for a backup, the sequence number of the source it copies; else 0 |
//! | 40 | n | the log's path (bytes), absolute |
//! | 40 + n | 4 | CRC-32C of bytes 0 to 40 + n |
//!
//! The magic is checked first, then the checksum (in every version the file's last four
//! bytes, over all before them), then the version and every field, so that "not a tierkv
//! store", "damaged" and "written by a newer tierkv" are told apart.
//!
//! Invariants:
//! 1. The file is replaced whole: written to `TIERKV.tmp`, synced, renamed over `TIERKV`,
//!    and the directory synced. A reader sees the old or the new file, never a mix.
//! 2. A store is *ready* only once everything it needs exists and is durable; a crash
//!    before leaves the *creating* state (nothing was acknowledged yet: the store is made
//!    again) or the *backup* state (a half-made copy, which never opens as a store).
//!
//! Must never: be written by a read-only open.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use tierkv_io::{AccessMethod, OpenOptions, Storage};
use tierkv_wal::Backend;

use crate::{Error, Result};

/// The identity file's name in a store's directory.
pub const IDENTITY_FILE: &str = "TIERKV";

/// The temporary name the identity file is written under before its rename.
const IDENTITY_TEMP: &str = "TIERKV.tmp";

/// The first bytes of every identity file.
const MAGIC: [u8; 16] = *b"tierkv\0store\r\n\x1a\n";

/// The format this code writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 2;

/// Bytes before the log's path.
const FIXED_BYTES: usize = 40;

/// The longest log path the file holds.
const MAX_PATH_BYTES: usize = 4096;

/// Flag: the log lies outside the store, at the path the file gives.
const FLAG_LOG_OUTSIDE: u8 = 1;

/// Where a store is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreState {
    /// Made, and open to reads and writes.
    Ready,
    /// Being made: no write was acknowledged yet.
    Creating,
    /// A backup being written: its entries are not all there.
    BackupInProgress,
}

impl StoreState {
    fn code(self) -> u32 {
        match self {
            StoreState::Ready => 1,
            StoreState::Creating => 2,
            StoreState::BackupInProgress => 3,
        }
    }

    fn from_code(code: u32) -> Option<StoreState> {
        match code {
            1 => Some(StoreState::Ready),
            2 => Some(StoreState::Creating),
            3 => Some(StoreState::BackupInProgress),
            _ => None,
        }
    }
}

/// What the identity file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The store's state.
    pub state: StoreState,
    /// Bytes of a page (the B+tree's pages split beyond it).
    pub page_bytes: u32,
    /// How the log persists appends.
    pub log_backend: Backend,
    /// Where the log lies when it is not `log` inside the store (an absolute path).
    pub log_dir: Option<PathBuf>,
    /// For a backup: the sequence number of the source it copies (0 otherwise).
    pub source_sequence: u64,
}

impl Identity {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let path = self.log_dir.as_ref().map_or(&[][..], |dir| dir.as_os_str().as_bytes());
        assert!(path.len() <= MAX_PATH_BYTES, "a log path of {} bytes", path.len());
        assert!(self.log_dir.as_ref().is_none_or(|dir| dir.is_absolute()));
        let mut out = Vec::with_capacity(FIXED_BYTES + path.len() + 4);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.state.code().to_le_bytes());
        out.extend_from_slice(&self.page_bytes.to_le_bytes());
        out.push(match self.log_backend {
            Backend::File => 0,
            Backend::Pmem => 1,
        });
        out.push(if self.log_dir.is_some() { FLAG_LOG_OUTSIDE } else { 0 });
        out.extend_from_slice(&(path.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.source_sequence.to_le_bytes());
        out.extend_from_slice(path);
        let crc = tierkv_io::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(Identity::decode(&out, Path::new("")).ok().as_ref(), Some(self));
        out
    }

    /// Decodes the file at `path` (named in errors).
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Identity> {
        let corrupt = |offset: usize, detail: String| {
            Err(Error::Corruption(format!(
                "the identity file {} offset {offset}: {detail}",
                path.display()
            )))
        };
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(Error::NotAStore {
                path: path.parent().unwrap_or(path).to_path_buf(),
                reason: format!("{} offset 0 does not hold tierkv's magic number", path.display()),
            });
        }
        if bytes.len() < FIXED_BYTES + 4 {
            return corrupt(bytes.len(), format!("{} bytes, shorter than its fields", bytes.len()));
        }
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        // In every version the last four bytes are the checksum of the rest, so that damage
        // is told from a newer format whose layout this code does not know.
        let body = bytes.len() - 4;
        if tierkv_io::crc32c(&bytes[..body]) != u32_at(body) {
            return corrupt(body, "the checksum does not match".into());
        }
        let version = u32_at(16);
        if version > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return corrupt(16, "format version 0".into());
        }
        if version < FORMAT_VERSION {
            return Err(Error::OlderFormat {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let path_len = u16::from_le_bytes([bytes[30], bytes[31]]) as usize;
        if path_len > MAX_PATH_BYTES || body != FIXED_BYTES + path_len {
            return corrupt(
                30,
                format!(
                    "{} bytes with a log path of {path_len} bytes (the file must be {})",
                    bytes.len(),
                    FIXED_BYTES + path_len + 4
                ),
            );
        }
        let Some(state) = StoreState::from_code(u32_at(20)) else {
            return corrupt(20, format!("unknown state {}", u32_at(20)));
        };
        let page_bytes = u32_at(24);
        let log_backend = match bytes[28] {
            0 => Backend::File,
            1 => Backend::Pmem,
            other => return corrupt(28, format!("unknown log backend {other}")),
        };
        let flags = bytes[29];
        if flags & !FLAG_LOG_OUTSIDE != 0 {
            return corrupt(29, format!("unknown flags {flags:#x}"));
        }
        let log_dir = match (flags & FLAG_LOG_OUTSIDE != 0, path_len) {
            (true, 1..) => {
                let dir = PathBuf::from(std::ffi::OsString::from_vec(bytes[40..body].to_vec()));
                if !dir.is_absolute() {
                    return corrupt(40, format!("the log path {} is not absolute", dir.display()));
                }
                Some(dir)
            }
            (false, 0) => None,
            (outside, len) => {
                return corrupt(29, format!("log outside: {outside}, but a path of {len} bytes"))
            }
        };
        let source_sequence =
            u64::from_le_bytes(bytes[32..40].try_into().expect("invariant: 8 bytes"));
        let identity = Identity { state, page_bytes, log_backend, log_dir, source_sequence };
        assert!(identity.log_dir.as_ref().is_none_or(|dir| dir.is_absolute()));
        Ok(identity)
    }

    /// Reads the identity file of the store in `dir`; `None` when there is none.
    pub fn read(storage: &Storage, dir: &Path) -> Result<Option<Identity>> {
        let path = dir.join(IDENTITY_FILE);
        if !storage.exists(&path)? {
            return Ok(None);
        }
        let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall).read_only(true))?;
        let len = file.len();
        if len > (FIXED_BYTES + MAX_PATH_BYTES + 4) as u64 {
            return Err(Error::Corruption(format!(
                "the identity file {} has {len} bytes, more than it can hold",
                path.display()
            )));
        }
        let mut bytes = vec![0u8; len as usize];
        if !bytes.is_empty() {
            file.read_at(&mut bytes, 0)?;
        }
        Identity::decode(&bytes, &path).map(Some)
    }

    /// Replaces the identity file of the store in `dir` (see invariant 1).
    pub fn write(&self, storage: &Storage, dir: &Path, file_mode: u32) -> Result<()> {
        let temp = dir.join(IDENTITY_TEMP);
        let bytes = self.encode();
        let options =
            OpenOptions::new(AccessMethod::Syscall).create(true).mode(file_mode).chunk_bytes(4096);
        let file = storage.open(&temp, &options)?;
        // Sized first, so the write does not grow the file by a chunk.
        file.set_len(bytes.len() as u64)?;
        file.write_at(&bytes, 0)?;
        assert_eq!(file.len(), bytes.len() as u64);
        file.sync_all()?;
        drop(file);
        // CRASH: before the rename the old identity (or none) stands; after it and before
        // the directory sync, either may.
        storage.rename(&temp, dir.join(IDENTITY_FILE))?;
        storage.sync_dir(dir)?;
        Ok(())
    }

    /// The log's directory for the store in `dir`.
    pub fn log_dir_in(&self, dir: &Path) -> PathBuf {
        self.log_dir.clone().unwrap_or_else(|| dir.join(LOG_DIR))
    }
}

/// The log's directory inside a store, unless the store says otherwise.
pub const LOG_DIR: &str = "log";

/// The block store's directory inside a store.
pub const BLOCKS_DIR: &str = "blocks";

/// Whether `name` is an entry tierkv makes in a store's directory.
pub fn is_store_entry(name: &str) -> bool {
    matches!(name, IDENTITY_FILE | IDENTITY_TEMP | BLOCKS_DIR | LOG_DIR | crate::db::LOCK_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(log_dir: Option<&str>) -> Identity {
        Identity {
            state: StoreState::Ready,
            page_bytes: 8192,
            log_backend: Backend::Pmem,
            log_dir: log_dir.map(PathBuf::from),
            source_sequence: 77,
        }
    }

    #[test]
    fn identities_round_trip() {
        for identity in [sample(None), sample(Some("/dev/shm/log")), sample(Some("/"))] {
            let bytes = identity.encode();
            assert_eq!(Identity::decode(&bytes, Path::new("/s/TIERKV")).expect("decode"), identity);
        }
    }

    #[test]
    fn the_magic_the_version_and_the_checksum_are_told_apart() {
        let bytes = sample(Some("/x")).encode();
        let path = Path::new("/s/TIERKV");
        let mut other = bytes.clone();
        other[0] = b'T';
        assert!(matches!(Identity::decode(&other, path), Err(Error::NotAStore { .. })));
        assert!(matches!(
            Identity::decode(b"SQLite format 3\0", path),
            Err(Error::NotAStore { .. })
        ));
        let with_version = |version: u8| {
            let mut changed = bytes.clone();
            changed[16] = version;
            let body = changed.len() - 4;
            let crc = tierkv_io::crc32c(&changed[..body]).to_le_bytes();
            changed[body..].copy_from_slice(&crc);
            changed
        };
        assert!(matches!(
            Identity::decode(&with_version(3), path),
            Err(Error::NewerFormat { found: 3, supported: 2, .. })
        ));
        let older = Identity::decode(&with_version(1), path).expect_err("format 1");
        assert!(matches!(older, Error::OlderFormat { found: 1, supported: 2, .. }), "{older}");
        assert!(older.to_string().contains("dump it with the tierkv that made it"), "{older}");
        // Every other single-byte change is damage, never a different identity.
        for at in MAGIC.len()..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x40;
            assert!(
                matches!(Identity::decode(&flipped, path), Err(Error::Corruption(_))),
                "a flip at {at} went unnoticed"
            );
        }
        for len in 0..bytes.len() {
            assert!(Identity::decode(&bytes[..len], path).is_err(), "cut to {len}");
        }
    }
}
