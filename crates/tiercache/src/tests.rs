//! The tier's behaviour through its public interface.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{Admission, AdmitSource, SlowTier, TierCache, TierKey, TierOptions};

fn key(id: u64, version: u64) -> TierKey {
    TierKey { id, version }
}

/// A block whose every byte names its key, `len` bytes long.
fn block(key: TierKey, len: usize) -> Vec<u8> {
    let seed = key.id.wrapping_mul(31).wrapping_add(key.version) as u8;
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn no_bypass(capacity: u64) -> TierOptions {
    TierOptions {
        overhead_bypass: false,
        // Tests run eviction passes themselves.
        eviction_interval: Duration::from_secs(3600),
        ..TierOptions::new(capacity)
    }
}

#[test]
fn a_block_is_found_under_its_id_and_version_only_until_invalidated() {
    let tier = TierCache::open(no_bypass(1 << 20)).expect("tier");
    let k = key(5, 9);
    let bytes = block(k, 3000);
    assert_eq!(
        tier.admit(k, &[&bytes[..64], &bytes[64..]], AdmitSource::Read),
        Admission::Admitted
    );
    assert_eq!(tier.admit(k, &[&bytes], AdmitSource::Write), Admission::AlreadyPresent);
    let mut out = vec![1, 2, 3];
    assert!(tier.get(k, &mut out));
    assert_eq!(out, bytes);
    // Another version of the same block is another entry.
    assert!(!tier.get(key(5, 10), &mut out));
    assert!(tier.invalidate(k));
    assert!(!tier.invalidate(k));
    assert!(!tier.get(k, &mut out));
    let stats = tier.stats();
    assert_eq!((stats.lookups, stats.hits, stats.misses), (3, 1, 2));
    assert_eq!((stats.inserts_read, stats.already_present, stats.removals), (1, 1, 1));
    assert_eq!((stats.blocks, stats.used_bytes), (0, 0));
    assert_eq!((stats.bytes_written, stats.bytes_read), (3000, 3000));
}

/// Each source has its switch: read admission is on and demotion off by default, and
/// `admission` answers (and counts) what `admit` would, before any bytes are made.
#[test]
fn each_admission_source_has_its_switch_and_admission_answers_first() {
    let tier = TierCache::open(no_bypass(1 << 20)).expect("tier");
    assert_eq!(tier.admission(key(1, 1), 1, AdmitSource::Evict), Some(Admission::Source));
    assert_eq!(tier.admit(key(1, 1), &[b"x"], AdmitSource::Evict), Admission::Source);
    assert_eq!(tier.admission(key(1, 1), 1, AdmitSource::Read), None);
    assert_eq!(tier.stats().skipped_source, 2);
    let options = TierOptions { cache_on_read: false, cache_on_evict: true, ..no_bypass(1 << 20) };
    let tier = TierCache::open(options).expect("tier");
    assert_eq!(tier.admit(key(1, 1), &[b"x"], AdmitSource::Read), Admission::Source);
    assert_eq!(tier.admission(key(1, 1), 1, AdmitSource::Evict), None);
    assert_eq!(tier.admit(key(1, 1), &[b"x"], AdmitSource::Evict), Admission::Admitted);
    assert_eq!(tier.admission(key(1, 1), 1, AdmitSource::Evict), Some(Admission::AlreadyPresent));
    assert!(!tier.get(key(2, 1), &mut Vec::new()));
    let stats = tier.stats();
    assert_eq!((stats.inserts_evict, stats.inserts_read, stats.already_present), (1, 0, 1));
    // Demotions are churn like any insert: one insert over one lookup.
    assert_eq!(stats.overhead(), 1.0, "{stats:?}");
    let bypassing = TierCache::open(TierOptions {
        cache_on_evict: true,
        eviction_interval: Duration::from_secs(3600),
        ..TierOptions::new(1 << 20)
    })
    .expect("tier");
    // Nothing looked up yet: Overhead Bypass is in force, and says so before any copy.
    assert_eq!(bypassing.admission(key(1, 1), 1, AdmitSource::Evict), Some(Admission::Bypassed));
    assert_eq!(bypassing.stats().bypassed_admissions, 1);
}

/// An exclusive tier gives a block to one hit only: the hit takes it out (a removal), and the
/// layer above gives it back when it lets go of it.
#[test]
fn an_exclusive_tier_moves_a_block_out_on_a_hit() {
    let options = TierOptions { exclusive: true, cache_on_evict: true, ..no_bypass(1 << 20) };
    let tier = TierCache::open(options).expect("tier");
    let k = key(3, 4);
    let bytes = block(k, 5000);
    assert_eq!(tier.admit(k, &[&bytes], AdmitSource::Evict), Admission::Admitted);
    let mut out = Vec::new();
    assert!(tier.get(k, &mut out));
    assert_eq!(out, bytes);
    assert!(!tier.get(k, &mut out), "the hit took it out");
    let stats = tier.stats();
    assert_eq!((stats.hits, stats.taken, stats.removals), (1, 1, 1));
    assert_eq!((stats.blocks, stats.used_bytes), (0, 0));
    assert_eq!(tier.admit(k, &[&bytes], AdmitSource::Evict), Admission::Admitted);
    assert!(tier.get(k, &mut out) && out == bytes);
}

/// `admission` says `Full` before a caller builds a block that the free units cannot hold.
#[test]
fn admission_sees_a_full_tier_before_the_block_is_built() {
    let tier = TierCache::open(no_bypass(1 << 20)).expect("tier");
    let capacity = tier.stats().capacity_bytes as usize;
    let quarter = vec![7u8; capacity / 4];
    for id in 0..4 {
        assert_eq!(tier.admit(key(id, 1), &[&quarter], AdmitSource::Read), Admission::Admitted);
    }
    assert_eq!(tier.admission(key(9, 1), 1, AdmitSource::Read), Some(Admission::Full));
    assert_eq!(tier.stats().skipped_full, 1);
    assert!(tier.invalidate(key(0, 1)));
    assert_eq!(tier.admission(key(9, 1), capacity / 4, AdmitSource::Read), None);
}

#[test]
fn admissions_are_refused_by_source_size_and_space() {
    let options = TierOptions { cache_on_write: false, ..no_bypass(1 << 20) };
    let tier = TierCache::open(options).expect("tier");
    let capacity = tier.stats().capacity_bytes;
    assert_eq!(tier.admit(key(1, 1), &[b"x"], AdmitSource::Write), Admission::Source);
    assert_eq!(tier.admit(key(1, 1), &[b"x"], AdmitSource::Checkpoint), Admission::Admitted);
    assert_eq!(tier.admit(key(2, 1), &[], AdmitSource::Read), Admission::Size);
    let big = vec![0u8; capacity as usize / 4 + 1];
    assert_eq!(tier.admit(key(3, 1), &[&big], AdmitSource::Read), Admission::Size);
    // Quarter-tier blocks: three fit beside the small one, the fourth does not.
    let quarter = vec![7u8; capacity as usize / 4];
    for id in 10..13 {
        assert_eq!(tier.admit(key(id, 1), &[&quarter], AdmitSource::Read), Admission::Admitted);
    }
    assert_eq!(tier.admit(key(13, 1), &[&quarter], AdmitSource::Read), Admission::Full);
    let stats = tier.stats();
    assert_eq!((stats.skipped_source, stats.skipped_size, stats.skipped_full), (1, 2, 1));
    assert_eq!(stats.inserts_checkpoint, 1);
}

/// NVCache's rule: with nothing looked up yet, or while (inserts + removals) / lookups is
/// over 10%, nothing is admitted; the stats say how often and for how long.
#[test]
fn overhead_bypass_holds_churn_to_a_tenth_of_the_lookups() {
    let tier = TierCache::open(TierOptions {
        eviction_interval: Duration::from_secs(3600),
        ..TierOptions::new(4 << 20)
    })
    .expect("tier");
    let bytes = vec![0u8; 1000];
    assert_eq!(tier.admit(key(0, 1), &[&bytes], AdmitSource::Read), Admission::Bypassed);
    let mut out = Vec::new();
    for id in 0..100 {
        assert!(!tier.get(key(id, 1), &mut out));
    }
    let admitted = (0..50)
        .filter(|&id| tier.admit(key(id, 1), &[&bytes], AdmitSource::Read) == Admission::Admitted)
        .count();
    // Admitted while inserts <= 10% of 100 lookups.
    assert_eq!(admitted, 11);
    let stats = tier.stats();
    assert_eq!(stats.bypassed_admissions, 1 + 39);
    assert!(stats.bypass_now);
    assert_eq!(stats.bypass_episodes, 2);
    // A hundred hits bring the ratio back under: admissions resume.
    for _ in 0..100 {
        assert!(tier.get(key(0, 1), &mut out));
    }
    assert_eq!(tier.admit(key(999, 1), &[&bytes], AdmitSource::Read), Admission::Admitted);
    let stats = tier.stats();
    assert!(!stats.bypass_now);
    assert!(stats.bypass_seconds > 0.0);
    assert!(stats.to_string().contains("in force 2 time(s)"), "{stats}");
}

#[test]
fn eviction_waits_for_the_full_target_then_keeps_what_was_used_lately() {
    let tier = TierCache::open(no_bypass(1 << 20)).expect("tier");
    let capacity = tier.stats().capacity_bytes;
    let len = 4096;
    let count = capacity / len as u64;
    // Fill half: no eviction.
    for id in 0..count / 2 {
        tier.admit(key(id, 1), &[&block(key(id, 1), len)], AdmitSource::Read);
    }
    assert_eq!(tier.evict_now(), 0);
    for id in count / 2..count {
        tier.admit(key(id, 1), &[&block(key(id, 1), len)], AdmitSource::Read);
    }
    // The second half was admitted a pass later; of the first half, the even ids are hit
    // after that pass.
    let mut out = Vec::new();
    for id in (0..count / 2).step_by(2) {
        assert!(tier.get(key(id, 1), &mut out));
    }
    let evicted = tier.evict_now();
    let stats = tier.stats();
    assert!(evicted > 0);
    assert!(stats.used_bytes as f64 <= 0.90 * capacity as f64, "{stats}");
    assert_eq!(stats.evictions, evicted);
    // Only unused blocks of the first half went: the odd ids.
    for id in 0..count / 2 {
        assert_eq!(tier.contains(key(id, 1)), id % 2 == 0 || id >= evicted * 2, "{id}");
    }
    for id in count / 2..count {
        assert!(tier.contains(key(id, 1)), "{id}");
    }
}

#[test]
fn overhead_bypass_also_holds_back_eviction() {
    let tier = TierCache::open(TierOptions {
        eviction_interval: Duration::from_secs(3600),
        ..TierOptions::new(1 << 20)
    })
    .expect("tier");
    let count = tier.stats().capacity_bytes / 4096;
    let mut out = Vec::new();
    for id in 0..count * 10 {
        assert!(!tier.get(key(id, 0), &mut out));
    }
    // Churn up to a tenth of the lookups: the whole tier fills.
    for id in 0..count {
        let admission = tier.admit(key(id, 1), &[&[1u8; 4096]], AdmitSource::Read);
        assert_eq!(admission, Admission::Admitted);
    }
    // One removal more, and churn is over a tenth: the tier is full, but nothing is evicted.
    assert!(tier.invalidate(key(0, 1)));
    assert_eq!(tier.admit(key(0, 1), &[&[1u8; 4096]], AdmitSource::Read), Admission::Bypassed);
    assert_eq!(tier.evict_now(), 0);
    assert_eq!(tier.stats().bypassed_evictions, 1);
    // Lookups bring the ratio down: eviction goes ahead.
    for id in 0..count * 10 {
        tier.get(key(id, 1), &mut out);
    }
    assert!(tier.evict_now() > 0);
    assert_eq!(tier.stats().bypassed_evictions, 1);
}

/// Readers, admitters, invalidators and evictions at once on a small tier: every hit returns
/// exactly the bytes admitted under its key.
#[test]
fn concurrent_hits_always_return_their_own_block() {
    let tier = TierCache::open(TierOptions {
        eviction_interval: Duration::from_millis(5),
        ..no_bypass(256 << 10)
    })
    .expect("tier");
    let stop = AtomicBool::new(false);
    let keys = 400u64;
    std::thread::scope(|scope| {
        for writer in 0..2u64 {
            let (tier, stop) = (&tier, &stop);
            scope.spawn(move || {
                let mut n = writer;
                while !stop.load(Ordering::Relaxed) {
                    let k = key(n % keys, n % 3);
                    let len = 200 + (n as usize * 37) % 9000;
                    tier.admit(
                        k,
                        &[&block(k, len)[..len / 2], &block(k, len)[len / 2..]],
                        AdmitSource::Read,
                    );
                    if n % 3 == 0 {
                        tier.invalidate(key((n / 2) % keys, n % 3));
                    }
                    n += 2;
                }
            });
        }
        let mut checked = 0u64;
        let mut out = Vec::new();
        // 200,000 reads at least, and on until the eviction thread has evicted during them
        // (on a loaded machine it may not have run yet): bounded by 10 s of waiting.
        let started = std::time::Instant::now();
        for round in 0..u64::MAX {
            let k = key(round % keys, round % 3);
            if tier.get(k, &mut out) {
                let expected = block(k, out.len());
                assert_eq!(out, expected, "key {k:?}");
                checked += 1;
            }
            let enough = round >= 200_000 && round % 1000 == 0;
            if enough && (tier.stats().evictions > 0 || started.elapsed() > Duration::from_secs(10))
            {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(checked > 0);
    });
    let stats = tier.stats();
    assert!(stats.evictions > 0 && stats.removals > 0, "{stats}");
}

#[test]
fn a_file_backed_tier_with_emulation_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let options = TierOptions {
        backing: crate::RegionBacking::File(dir.path().into()),
        emulation: SlowTier::preset("optane"),
        ..no_bypass(1 << 20)
    };
    let tier = TierCache::open(options).expect("tier");
    let k = key(1, 1);
    assert_eq!(tier.admit(k, &[&block(k, 5000)], AdmitSource::Read), Admission::Admitted);
    let mut out = Vec::new();
    assert!(tier.get(k, &mut out));
    assert_eq!(out, block(k, 5000));
    let stats = tier.stats();
    assert!(stats.backing.contains("unlinked once mapped"), "{}", stats.backing);
    assert_eq!(
        stats.emulation.as_deref(),
        Some("emulated optane: reads +215 ns, at most 6.0 GB/s; writes +0 ns, at most 2.0 GB/s")
    );
    assert!(tier.describe().contains("emulated optane"));
    assert!(stats.to_string().contains("tier emulation: emulated optane"));
}
