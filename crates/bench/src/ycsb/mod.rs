//! YCSB's core workloads A–F (issue 7), as YCSB's `workloads/workloada` … `workloadf`
//! define them: the workload definitions and the request stream (`Requests`) here; the
//! driver (`driver`), its plots (`plot`) and the peer engines' adapters beside, each behind
//! its feature: `c_peers` (`c-peers`: Debian's RocksDB, LMDB, WiredTiger, and SQLite),
//! `peers` (`rust-peers`: redb and fjall), `rocksdb_crate` (`rocksdb-crate`: a current RocksDB
//! built from source). `rocksdb_config` (the settings both RocksDBs get) and `versions` (the
//! peers' versions in the report) are built in every configuration. The comparison with
//! YCSB's own jar comes next.
//!
//! | workload | read | update | insert | scan | read-modify-write | requests |
//! |---|---|---|---|---|---|---|
//! | A | 0.50 | 0.50 | | | | zipfian |
//! | B | 0.95 | 0.05 | | | | zipfian |
//! | C | 1.00 | | | | | zipfian |
//! | D | 0.95 | | 0.05 | | | latest |
//! | E | | | 0.05 | 0.95 | | zipfian, scans of 1..=100 uniform |
//! | F | 0.50 | | | | 0.50 | zipfian |
//!
//! Records are 10 fields of 100 bytes; a read reads every field, an update (and the write of
//! a read-modify-write) rewrites one field chosen uniformly. Records are loaded in key-number
//! order, which `generator::key_name` turns into hashed order; inserts during the run take
//! the next numbers.
//!
//! As YCSB's `CoreWorkload`: with zipfian requests the chooser covers the loaded records and
//! twice the inserts the run is expected to make, and a number not yet inserted is drawn
//! again.
//!
//! Must never: request a key number that has not been inserted.

#[cfg(feature = "c-peers")]
pub mod c_peers;
pub mod driver;
pub mod generator;
#[cfg(feature = "rust-peers")]
pub mod peers;
pub mod plot;
pub mod rocksdb_config;
#[cfg(feature = "rocksdb-crate")]
pub mod rocksdb_crate;
pub mod versions;

use generator::{ScrambledZipfian, SkewedLatest};
use serde::{Deserialize, Serialize};

/// Fields of a record.
pub const FIELD_COUNT: usize = 10;

/// Bytes of a field.
pub const FIELD_BYTES: usize = 100;

/// The longest scan of workload E.
pub const MAX_SCAN_LENGTH: u64 = 100;

/// How requests choose their keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Scrambled zipfian over the records.
    Zipfian,
    /// Every record alike.
    Uniform,
    /// The newest records most (skewed latest).
    Latest,
}

/// One of the core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// `a` … `f`.
    pub name: char,
    /// Proportion of reads.
    pub read: f64,
    /// Proportion of updates.
    pub update: f64,
    /// Proportion of inserts.
    pub insert: f64,
    /// Proportion of scans.
    pub scan: f64,
    /// Proportion of read-modify-writes.
    pub read_modify_write: f64,
    /// How keys are chosen.
    pub distribution: Distribution,
}

impl WorkloadSpec {
    /// The six core workloads.
    pub const CORE: [WorkloadSpec; 6] = [
        WorkloadSpec::mix('a', [0.5, 0.5, 0.0, 0.0, 0.0], Distribution::Zipfian),
        WorkloadSpec::mix('b', [0.95, 0.05, 0.0, 0.0, 0.0], Distribution::Zipfian),
        WorkloadSpec::mix('c', [1.0, 0.0, 0.0, 0.0, 0.0], Distribution::Zipfian),
        WorkloadSpec::mix('d', [0.95, 0.0, 0.05, 0.0, 0.0], Distribution::Latest),
        WorkloadSpec::mix('e', [0.0, 0.0, 0.05, 0.95, 0.0], Distribution::Zipfian),
        WorkloadSpec::mix('f', [0.5, 0.0, 0.0, 0.0, 0.5], Distribution::Zipfian),
    ];

    const fn mix(name: char, mix: [f64; 5], distribution: Distribution) -> WorkloadSpec {
        let [read, update, insert, scan, read_modify_write] = mix;
        WorkloadSpec { name, read, update, insert, scan, read_modify_write, distribution }
    }

    /// The core workload named `name` (`a` … `f`, either case).
    pub fn core(name: &str) -> Option<WorkloadSpec> {
        let name = name.trim().to_ascii_lowercase();
        WorkloadSpec::CORE.into_iter().find(|spec| name.len() == 1 && name.starts_with(spec.name))
    }
}

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Read every field of the record.
    Read,
    /// Rewrite field `field`.
    Update {
        /// Which field.
        field: usize,
    },
    /// Insert a new record.
    Insert,
    /// Read `length` records from the key on.
    Scan {
        /// Records to read.
        length: u64,
    },
    /// Read the record, then rewrite field `field`.
    ReadModifyWrite {
        /// Which field.
        field: usize,
    },
}

/// One request: what, and on which key number (for an insert, the number to insert).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// What it does.
    pub operation: Operation,
    /// The key number (`generator::key_name` makes the key).
    pub key: u64,
}

/// The request stream of one workload for one client thread (see the module header).
/// Inserts take numbers from a counter the threads share, so `insert_next` is given in.
pub struct Requests {
    spec: WorkloadSpec,
    records: u64,
    zipfian: Option<ScrambledZipfian>,
    latest: Option<SkewedLatest>,
    rng: fastrand::Rng,
}

impl Requests {
    /// Requests of `spec` over `records` loaded records, for a run of `operations`
    /// operations in all, seeded by `seed`.
    pub fn new(spec: WorkloadSpec, records: u64, operations: u64, seed: u64) -> Requests {
        let records = records.max(1);
        // YCSB's `expectednewkeys`: twice the inserts the run should make.
        let expected_new = (operations as f64 * spec.insert * 2.0) as u64;
        // YCSB's chooser spans 0..=records + expected_new: one more number than the records
        // it can reach, which it draws again. The span sets the modulus of the hash, so it
        // must match to the unit for the same keys to be hot (scripts/ycsb-check.sh).
        let zipfian = (spec.distribution == Distribution::Zipfian)
            .then(|| ScrambledZipfian::new(0, records + expected_new));
        let latest =
            (spec.distribution == Distribution::Latest).then(|| SkewedLatest::new(records - 1));
        Requests { spec, records, zipfian, latest, rng: fastrand::Rng::with_seed(seed) }
    }

    /// The next request, `inserted` being how many records exist now (key numbers
    /// `0..inserted`; at least the loaded ones). An insert's key is `inserted`: the caller
    /// makes it the next number of its shared counter.
    pub fn next(&mut self, inserted: u64) -> Request {
        let inserted = inserted.max(self.records);
        let spec = self.spec;
        let mut pick = self.rng.f64();
        let mut operation = Operation::Read;
        for (share, candidate) in [
            (spec.read, Operation::Read),
            (spec.update, Operation::Update { field: 0 }),
            (spec.insert, Operation::Insert),
            (spec.scan, Operation::Scan { length: 0 }),
            (spec.read_modify_write, Operation::ReadModifyWrite { field: 0 }),
        ] {
            if share > 0.0 {
                operation = candidate;
                if pick < share {
                    break;
                }
                pick -= share;
            }
        }
        let operation = match operation {
            Operation::Update { .. } => Operation::Update { field: self.rng.usize(..FIELD_COUNT) },
            Operation::ReadModifyWrite { .. } => {
                Operation::ReadModifyWrite { field: self.rng.usize(..FIELD_COUNT) }
            }
            Operation::Scan { .. } => Operation::Scan { length: self.rng.u64(1..=MAX_SCAN_LENGTH) },
            other => other,
        };
        let key = match operation {
            Operation::Insert => inserted,
            _ => self.choose(inserted),
        };
        Request { operation, key }
    }

    /// A key number below `inserted`.
    fn choose(&mut self, inserted: u64) -> u64 {
        let rng = &mut self.rng;
        if let Some(latest) = &mut self.latest {
            return latest.next(inserted - 1, rng);
        }
        if let Some(zipfian) = &mut self.zipfian {
            // Bounded in expectation: the chooser covers at most twice the records present
            // plus the loaded ones, so each draw lands below `inserted` with probability
            // well above a half. A run that inserts more than expected still ends: the
            // fallback below takes over after 64 tries.
            for _ in 0..64 {
                let key = zipfian.next(rng);
                if key < inserted {
                    return key;
                }
            }
        }
        rng.u64(..inserted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_workloads_are_ycsbs() {
        for spec in WorkloadSpec::CORE {
            let total = spec.read + spec.update + spec.insert + spec.scan + spec.read_modify_write;
            assert!((total - 1.0).abs() < 1e-12, "{spec:?}");
        }
        let d = WorkloadSpec::core("D").expect("d");
        assert_eq!((d.read, d.insert, d.distribution), (0.95, 0.05, Distribution::Latest));
        let e = WorkloadSpec::core("e").expect("e");
        assert_eq!((e.scan, e.insert, e.distribution), (0.95, 0.05, Distribution::Zipfian));
        let f = WorkloadSpec::core("f").expect("f");
        assert_eq!((f.read, f.read_modify_write), (0.5, 0.5));
        assert!(WorkloadSpec::core("g").is_none() && WorkloadSpec::core("ab").is_none());
    }

    #[test]
    fn requests_follow_each_workloads_mix_and_stay_on_inserted_keys() {
        let records = 10_000;
        let operations = 100_000u64;
        for spec in WorkloadSpec::CORE {
            let mut requests = Requests::new(spec, records, operations, 42);
            let mut inserted = records;
            let (mut reads, mut updates, mut inserts, mut scans, mut rmws) = (0, 0, 0, 0, 0);
            for _ in 0..operations {
                let request = requests.next(inserted);
                match request.operation {
                    Operation::Insert => {
                        assert_eq!(request.key, inserted);
                        inserted += 1;
                        inserts += 1;
                    }
                    operation => {
                        assert!(request.key < inserted, "{spec:?} {request:?}");
                        match operation {
                            Operation::Read => reads += 1,
                            Operation::Update { field } => {
                                assert!(field < FIELD_COUNT);
                                updates += 1;
                            }
                            Operation::Scan { length } => {
                                assert!((1..=MAX_SCAN_LENGTH).contains(&length));
                                scans += 1;
                            }
                            Operation::ReadModifyWrite { field } => {
                                assert!(field < FIELD_COUNT);
                                rmws += 1;
                            }
                            Operation::Insert => unreachable!("matched above"),
                        }
                    }
                }
            }
            let share = |count: u64| count as f64 / operations as f64;
            for (got, want) in [
                (share(reads), spec.read),
                (share(updates), spec.update),
                (share(inserts), spec.insert),
                (share(scans), spec.scan),
                (share(rmws), spec.read_modify_write),
            ] {
                assert!((got - want).abs() < 0.01, "{spec:?}: {got} against {want}");
            }
        }
    }

    #[test]
    fn scan_lengths_are_uniform_over_one_to_a_hundred() {
        let spec = WorkloadSpec::core("e").expect("e");
        let mut requests = Requests::new(spec, 1_000, 200_000, 9);
        let mut counts = [0u64; MAX_SCAN_LENGTH as usize + 1];
        let mut scans = 0u64;
        for _ in 0..200_000 {
            if let Operation::Scan { length } = requests.next(1_000).operation {
                counts[length as usize] += 1;
                scans += 1;
            }
        }
        assert_eq!(counts[0], 0);
        let expected = scans as f64 / MAX_SCAN_LENGTH as f64;
        for (length, &count) in counts.iter().enumerate().skip(1) {
            assert!((count as f64 / expected - 1.0).abs() < 0.15, "length {length}: {count}");
        }
    }

    #[test]
    fn workload_d_reads_the_newest_records_most() {
        let spec = WorkloadSpec::core("d").expect("d");
        let mut requests = Requests::new(spec, 5_000, 50_000, 1);
        let mut inserted = 5_000;
        let mut recent = 0u64;
        let mut reads = 0u64;
        for _ in 0..50_000 {
            let request = requests.next(inserted);
            match request.operation {
                Operation::Insert => inserted += 1,
                _ => {
                    reads += 1;
                    recent += u64::from(request.key + 100 >= inserted);
                }
            }
        }
        // The newest 100 of 5,000+ records take over a third of the reads
        // (zeta(100) / zeta(5000) is about 0.56 with θ = 0.99).
        assert!(recent * 3 > reads, "{recent} of {reads}");
    }
}
