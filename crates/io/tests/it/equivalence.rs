//! Property tests of the `File` contract across access methods: the same random sequence of
//! writes, size changes, reserves, syncs, persists and 8-byte stores leaves byte-identical files
//! whichever method (syscall, direct, mmap, pmem) and backend (disk, tmpfs, simulation) ran it,
//! and every one of them equals a plain `Vec<u8>` model of the contract.
//!
//! Why a model and not just pairwise comparison: if every method shared one bug (say, growth to
//! the wrong chunk boundary), they would still agree with each other. The model is written from
//! the contract in `file.rs`, not from the code.
//!
//! What is compared, after every step and at the end of a case:
//! - `len()` of every handle equals the model's length (after every step, so a failure points
//!   at the step that diverged);
//! - the whole file read back through each handle equals the model;
//! - after the handles are dropped, the bytes on the file system (`std::fs::read`, or
//!   `SimFs::read_file`) equal the model, so nothing lives only in a handle's mapping.
//!
//! A failure names the handle, the first differing offset and the steps as applied; proptest
//! shrinks the sequence first. No test asserts on time.

use std::fmt;
use std::path::{Path, PathBuf};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tierkv_io::sim::SimFs;
use tierkv_io::{AccessMethod, AlignedBuf, File, GrowthStrategy, OpenOptions, PmemMode, Storage};

/// The alignment the `direct` property keeps every offset and length to: the strictest common
/// O_DIRECT rule, and the one the simulated `direct` method enforces.
const BLOCK_BYTES: u64 = 4096;

/// Writes start below this offset.
const WRITE_OFFSET_MAX_BYTES: u64 = 256 << 10;
/// Writes are at most this long.
const WRITE_LEN_MAX_BYTES: u64 = 20 << 10;
/// `set_len` and `reserve` stay below this size, so files stay well under 1 MiB.
const SIZE_MAX_BYTES: u64 = 300 << 10;

/// What is shared by every handle of one case: the growth chunk and how growth is done. Neither
/// may change the bytes a reader sees, only how the file system gets there.
#[derive(Clone, Copy, Debug)]
struct Setup {
    chunk_bytes: u64,
    growth: GrowthStrategy,
}

impl Setup {
    fn options(self, method: AccessMethod) -> OpenOptions {
        OpenOptions::new(method).create(true).chunk_bytes(self.chunk_bytes).growth(self.growth)
    }
}

impl fmt::Display for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chunk {} bytes, growth {:?}", self.chunk_bytes, self.growth)
    }
}

/// One step as generated. Persist and store positions are fractions resolved against the length
/// the file has when the step runs, so that shrinking an earlier step keeps them meaningful.
#[derive(Clone, Debug)]
enum Step {
    Write { offset: u64, len: u64, seed: u8 },
    SetLen(u64),
    Reserve(u64),
    SyncData,
    Persist { at: u32, span: u32 },
    StoreU64 { slot: u32, value: u64 },
}

/// One step as applied to every handle, with concrete offsets.
#[derive(Clone, Copy, Debug)]
enum Applied {
    Write { offset: u64, len: u64, seed: u8 },
    SetLen(u64),
    Reserve(u64),
    SyncData,
    Persist { offset: u64, len: u64 },
    StoreU64 { offset: u64, value: u64 },
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Applied::Write { offset, len, seed } => {
                write!(f, "write_at({len} bytes of seed {seed}, offset {offset})")
            }
            Applied::SetLen(len) => write!(f, "set_len({len})"),
            Applied::Reserve(len) => write!(f, "reserve({len})"),
            Applied::SyncData => f.write_str("sync_data()"),
            Applied::Persist { offset, len } => write!(f, "persist({offset}, {len})"),
            Applied::StoreU64 { offset, value } => write!(f, "store_u64({offset}, {value:#x})"),
        }
    }
}

impl Step {
    /// The concrete step for a file of `len` bytes, or `None` when it cannot apply (a persist
    /// of an empty file, which the contract rejects as a zero-length request). With `aligned`,
    /// persist ranges are whole blocks (the generator already aligned the other steps).
    fn resolve(&self, len: u64, aligned: bool) -> Option<Applied> {
        let unit = if aligned { BLOCK_BYTES } else { 1 };
        Some(match *self {
            Step::Write { offset, len, seed } => Applied::Write { offset, len, seed },
            Step::SetLen(len) => Applied::SetLen(len),
            Step::Reserve(len) => Applied::Reserve(len),
            Step::SyncData => Applied::SyncData,
            Step::Persist { at, span } => {
                let units = len / unit;
                if units == 0 {
                    return None;
                }
                let first = u64::from(at) % units;
                let count = 1 + u64::from(span) % (units - first);
                Applied::Persist { offset: first * unit, len: count * unit }
            }
            Step::StoreU64 { slot, value } => {
                // Slots inside the file, straddling its end, at its end and one past it.
                let slots = len / 8 + 2;
                Applied::StoreU64 { offset: u64::from(slot) % slots * 8, value }
            }
        })
    }
}

/// The byte a write with `seed` puts at file position `position`: never zero, so a write lost
/// over a zero region shows, and different for different seeds over the same range.
fn content_byte(seed: u8, position: u64) -> u8 {
    let mixed = position.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from(seed).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    ((mixed >> 56) as u8).max(1)
}

/// The data of a write, in a buffer aligned for O_DIRECT (harmless for the other methods).
fn write_buffer(seed: u8, offset: u64, len: u64) -> AlignedBuf {
    let mut buf = AlignedBuf::new(len as usize);
    for (position, byte) in (offset..).zip(buf.iter_mut()) {
        *byte = content_byte(seed, position);
    }
    buf
}

/// The contract of `File`, written out on a `Vec<u8>`.
struct Model {
    bytes: Vec<u8>,
    chunk_bytes: u64,
}

impl Model {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// A write or store ending past the end first grows the file to the chunk boundary.
    fn grow_for(&mut self, end: u64) {
        if end > self.len() {
            let target = end.div_ceil(self.chunk_bytes) * self.chunk_bytes;
            self.bytes.resize(target as usize, 0);
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        self.grow_for(end);
        self.bytes[offset as usize..end as usize].copy_from_slice(data);
    }

    fn apply(&mut self, step: Applied) {
        match step {
            Applied::Write { offset, len, seed } => {
                self.write(offset, &write_buffer(seed, offset, len));
            }
            Applied::SetLen(len) => self.bytes.resize(len as usize, 0),
            // Reserve only ever grows, and then to the chunk boundary past `len`.
            Applied::Reserve(len) => self.grow_for(len),
            Applied::SyncData | Applied::Persist { .. } => {}
            Applied::StoreU64 { offset, value } => self.write(offset, &value.to_le_bytes()),
        }
    }
}

/// Where a handle's bytes can be read once it is closed.
enum Backing {
    Os(PathBuf),
    Sim(SimFs, PathBuf),
}

/// One handle under test.
struct Target {
    label: String,
    file: File,
    backing: Backing,
}

fn open_os(dir: &Path, place: &str, method: AccessMethod, setup: Setup) -> Target {
    let path = dir.join(format!("{method}.dat"));
    let file = Storage::Os
        .open(&path, &setup.options(method))
        .unwrap_or_else(|e| panic!("open {method} on {place}: {e}"));
    Target { label: format!("{method} on {place}"), file, backing: Backing::Os(path) }
}

fn open_sim(fs: &SimFs, method: AccessMethod, setup: Setup) -> Target {
    let path = PathBuf::from(format!("/{method}.dat"));
    let file = Storage::Sim(fs.clone())
        .open(&path, &setup.options(method))
        .unwrap_or_else(|e| panic!("open {method} on sim: {e}"));
    Target { label: format!("{method} on sim"), file, backing: Backing::Sim(fs.clone(), path) }
}

fn apply(file: &File, step: Applied) -> tierkv_io::Result<()> {
    match step {
        Applied::Write { offset, len, seed } => {
            file.write_at(&write_buffer(seed, offset, len), offset)
        }
        Applied::SetLen(len) => file.set_len(len),
        Applied::Reserve(len) => file.reserve(len),
        Applied::SyncData => file.sync_data(),
        Applied::Persist { offset, len } => file.persist(offset, len),
        Applied::StoreU64 { offset, value } => file.store_u64(offset, value),
    }
}

/// The steps as applied so far, one per line, for failure messages.
fn history(applied: &[String]) -> String {
    applied.iter().enumerate().map(|(index, step)| format!("\n  {index:2}: {step}")).collect()
}

/// Compares `actual` with the model's bytes and names the first differing offset.
fn compare(
    what: &str,
    label: &str,
    actual: &[u8],
    model: &[u8],
    setup: Setup,
    applied: &[String],
) -> Result<(), TestCaseError> {
    if actual == model {
        return Ok(());
    }
    let first = actual.iter().zip(model).position(|(a, m)| a != m);
    let detail = match first {
        Some(offset) => format!(
            "first difference at offset {offset}: {:#04x}, model {:#04x}",
            actual[offset], model[offset]
        ),
        None => format!("lengths differ: {} bytes, model {} bytes", actual.len(), model.len()),
    };
    Err(TestCaseError::fail(format!(
        "{label}: {what} differs from the model ({detail}); {setup}; steps:{}",
        history(applied)
    )))
}

/// Runs `steps` on every target and the model, checking lengths after each step and the
/// bytes at the end, through the handles and then through the file system.
fn run_case(
    targets: Vec<Target>,
    steps: &[Step],
    setup: Setup,
    aligned: bool,
) -> Result<(), TestCaseError> {
    let mut model = Model { bytes: Vec::new(), chunk_bytes: setup.chunk_bytes };
    let mut applied: Vec<String> = Vec::new();
    for step in steps {
        let Some(step) = step.resolve(model.len(), aligned) else {
            applied.push("persist skipped: the file is empty".into());
            continue;
        };
        applied.push(step.to_string());
        model.apply(step);
        for target in &targets {
            if let Err(error) = apply(&target.file, step) {
                return Err(TestCaseError::fail(format!(
                    "{}: {step} failed: {error}; {setup}; steps:{}",
                    target.label,
                    history(&applied)
                )));
            }
            let len = target.file.len();
            if len != model.len() {
                return Err(TestCaseError::fail(format!(
                    "{}: len() is {len} after {step}, model {}; {setup}; steps:{}",
                    target.label,
                    model.len(),
                    history(&applied)
                )));
            }
        }
    }

    for target in &targets {
        let mut back = AlignedBuf::new(model.bytes.len());
        if !back.is_empty() {
            if let Err(error) = target.file.read_at(&mut back, 0) {
                return Err(TestCaseError::fail(format!(
                    "{}: reading the whole file back failed: {error}; steps:{}",
                    target.label,
                    history(&applied)
                )));
            }
        }
        let what = "read_at of the whole file";
        compare(what, &target.label, &back, &model.bytes, setup, &applied)?;
    }

    // Closing unmaps the mapped methods; what is left is what the file system holds.
    let closed: Vec<(String, Backing)> =
        targets.into_iter().map(|target| (target.label, target.backing)).collect();
    for (label, backing) in closed {
        let stored = match &backing {
            Backing::Os(path) => std::fs::read(path)
                .map_err(|e| TestCaseError::fail(format!("{label}: std::fs::read: {e}")))?,
            Backing::Sim(fs, path) => fs
                .read_file(path)
                .map_err(|e| TestCaseError::fail(format!("{label}: SimFs::read_file: {e}")))?,
        };
        compare("the closed file", &label, &stored, &model.bytes, setup, &applied)?;
    }
    Ok(())
}

/// The chunk, one of 1 (exact growth), a page and 64 KiB, and either growth strategy.
fn setup_strategy() -> impl Strategy<Value = Setup> {
    let chunk = prop_oneof![Just(1u64), Just(4096u64), Just(65536u64)];
    let growth = prop_oneof![Just(GrowthStrategy::Allocate), Just(GrowthStrategy::Truncate)];
    (chunk, growth).prop_map(|(chunk_bytes, growth)| Setup { chunk_bytes, growth })
}

/// The handle with this label.
fn handle<'a>(targets: &'a [Target], label: &str) -> &'a File {
    match targets.iter().find(|target| target.label == label) {
        Some(target) => &target.file,
        None => panic!("no handle labelled {label}"),
    }
}

fn step_strategy() -> impl Strategy<Value = Step> {
    // Syncs and persists are weighted low: on the disk they are real fdatasync/msync calls,
    // and they cannot change bytes, only show a method that loses or moves them.
    prop_oneof![
        6 => (0..WRITE_OFFSET_MAX_BYTES, 1..=WRITE_LEN_MAX_BYTES, any::<u8>())
            .prop_map(|(offset, len, seed)| Step::Write { offset, len, seed }),
        1 => (0..=SIZE_MAX_BYTES).prop_map(Step::SetLen),
        1 => (0..=SIZE_MAX_BYTES).prop_map(Step::Reserve),
        1 => Just(Step::SyncData),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(at, span)| Step::Persist { at, span }),
        3 => (any::<u32>(), any::<u64>()).prop_map(|(slot, value)| Step::StoreU64 { slot, value }),
    ]
}

/// Steps whose offsets and lengths are whole 4 KiB blocks, for O_DIRECT. No `store_u64`: an
/// 8-byte transfer is never valid with O_DIRECT (`bad_input` checks that it is refused).
fn aligned_step_strategy() -> impl Strategy<Value = Step> {
    let blocks_max = WRITE_OFFSET_MAX_BYTES / BLOCK_BYTES;
    let len_blocks_max = WRITE_LEN_MAX_BYTES / BLOCK_BYTES;
    let size_blocks_max = SIZE_MAX_BYTES / BLOCK_BYTES;
    prop_oneof![
        6 => (0..blocks_max, 1..=len_blocks_max, any::<u8>()).prop_map(|(block, count, seed)| {
            Step::Write { offset: block * BLOCK_BYTES, len: count * BLOCK_BYTES, seed }
        }),
        1 => (0..=size_blocks_max).prop_map(|blocks| Step::SetLen(blocks * BLOCK_BYTES)),
        1 => (0..=size_blocks_max).prop_map(|blocks| Step::Reserve(blocks * BLOCK_BYTES)),
        1 => Just(Step::SyncData),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(at, span)| Step::Persist { at, span }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// syscall, mmap and pmem on ext4; pmem (flush-only: real clwb and non-temporal stores) and
    /// mmap on tmpfs; syscall, mmap and pmem on the simulation: all equal to the model.
    #[test]
    fn every_method_leaves_the_same_bytes_as_the_model(
        setup in setup_strategy(),
        steps in vec(step_strategy(), 1..=40),
    ) {
        let disk = tempfile::tempdir().expect("disk tempdir");
        let shm = tempfile::tempdir_in("/dev/shm").expect("/dev/shm tempdir");
        let sim = SimFs::new();
        let mut targets = Vec::new();
        for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
            targets.push(open_os(disk.path(), "disk", method, setup));
        }
        for method in [AccessMethod::Pmem, AccessMethod::Mmap] {
            targets.push(open_os(shm.path(), "shm", method, setup));
        }
        for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
            targets.push(open_sim(&sim, method, setup));
        }
        // The tmpfs pmem file must really take the flush-and-fence path, or this property
        // would not cover the non-temporal copies at all.
        prop_assert_eq!(handle(&targets, "pmem on shm").pmem_mode(), Some(PmemMode::FlushOnly));
        prop_assert_eq!(handle(&targets, "pmem on disk").pmem_mode(), Some(PmemMode::Msync));
        run_case(targets, &steps, setup, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// direct (O_DIRECT) on ext4 and on the simulation, against syscall and mmap on ext4 and the
    /// model, with block-aligned steps. Only ext4: tmpfs may or may not accept O_DIRECT.
    #[test]
    fn direct_leaves_the_same_bytes_as_the_model(
        setup in setup_strategy(),
        steps in vec(aligned_step_strategy(), 1..=40),
    ) {
        let disk = tempfile::tempdir().expect("disk tempdir");
        let sim = SimFs::new();
        let targets = vec![
            open_os(disk.path(), "disk", AccessMethod::Direct, setup),
            open_os(disk.path(), "disk", AccessMethod::Syscall, setup),
            open_os(disk.path(), "disk", AccessMethod::Mmap, setup),
            open_sim(&sim, AccessMethod::Direct, setup),
        ];
        let alignment = handle(&targets, "direct on disk").direct_alignment();
        prop_assert!(alignment.is_some_and(|a| BLOCK_BYTES.is_multiple_of(a)), "{alignment:?}");
        run_case(targets, &steps, setup, true)?;
    }
}
