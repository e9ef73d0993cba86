//! The remap stress in a CI-sized run: 4 workers read and write self-verifying blocks through a
//! mapping while a resizer grows and truncates the file without pause. The full run is
//! `tierkv stress --seconds 60` (README); `TIERKV_STRESS_SECONDS` lengthens this one.

use std::time::Duration;

use tierkv_bench::stress::{self, StressConfig};
use tierkv_io::{AccessMethod, PmemMode};

fn seconds() -> f64 {
    std::env::var("TIERKV_STRESS_SECONDS").ok().and_then(|text| text.parse().ok()).unwrap_or(1.5)
}

fn run_and_check(config: &StressConfig) {
    let report = stress::run(config).expect("stress setup");
    eprintln!("{report:#?}");
    assert_eq!(report.errors, 0, "stress errors: {:#?}", report.error_samples);
    assert!(report.writes > 0 && report.verified_reads > 0, "{report:?}");
    assert!(report.truncations > 0 && report.growths > 0, "the resizer did not run");
    assert!(report.io.remaps >= report.truncations, "every resize remaps: {:?}", report.io);
    assert_eq!(report.io.sigbus_faults, 0, "our own resizes never fault");
}

#[test]
fn mmap_on_disk_survives_concurrent_grow_and_truncate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StressConfig::new(dir.path(), Duration::from_secs_f64(seconds()));
    run_and_check(&config);
}

#[test]
fn pmem_on_shm_survives_concurrent_grow_and_truncate() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("shm tempdir");
    let mut config = StressConfig::new(dir.path(), Duration::from_secs_f64(seconds()));
    config.method = AccessMethod::Pmem;
    config.seed = 0x5eed_0002;
    let report = stress::run(&config).expect("stress setup");
    assert_eq!(report.pmem_mode, Some(PmemMode::FlushOnly));
    assert_eq!(report.errors, 0, "stress errors: {:#?}", report.error_samples);
    assert!(report.io.persists > 0 && report.io.fences > 0, "{:?}", report.io);
    run_and_check(&config);
}
