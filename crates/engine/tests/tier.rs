//! A store with a tier cache: pages that miss the page cache come from the tier, and the
//! data stays right across overwrites and reopens (the tier starts empty each time).

use std::time::Duration;

use tierkv::{Db, Durability, Options, TierOptions};

fn options() -> Options {
    Options {
        // A page cache far smaller than the data, so that reads go below it.
        cache_size: 2 << 20,
        durability: Durability::None,
        tier: Some(TierOptions {
            overhead_bypass: false,
            eviction_interval: Duration::from_millis(50),
            ..TierOptions::new(8 << 20)
        }),
        ..Options::default()
    }
}

fn value(key: u64, round: u64) -> Vec<u8> {
    format!("value of {key} in round {round} ").repeat(12).into_bytes()
}

#[test]
fn reads_below_the_page_cache_come_from_the_tier_and_stay_right() {
    let dir = tempfile::tempdir().expect("dir");
    let keys = 20_000u64;
    for round in 0..2 {
        let db = Db::open(dir.path(), options()).expect("open");
        for key in (0..keys).filter(|key| round == 0 || key % 3 == 0) {
            db.put(key.to_be_bytes(), value(key, round)).expect("put");
        }
        // Twice through: the second pass finds in the tier what the first admitted.
        for _ in 0..2 {
            for key in (0..keys).step_by(7) {
                let expected = value(key, if round == 1 && key % 3 == 0 { 1 } else { 0 });
                assert_eq!(db.get(key.to_be_bytes()).expect("get"), Some(expected), "{key}");
            }
        }
        let stats = db.stats().expect("stats");
        let tier = stats.tier.expect("a tier");
        assert!(tier.hits > 0 && tier.inserts_checkpoint > 0, "{tier}");
        assert_eq!(stats.cache.tier_rejected, 0);
        db.close().expect("close");
    }
}

/// With demotion instead of read admission (`cache_on_evict`), the pages the page cache
/// evicts clean go to the tier, at the version they were read or written at: reads below the
/// page cache are served from it and stay right across overwrites (whose checkpoints make
/// new versions of the pages) and concurrent readers.
#[test]
fn pages_the_page_cache_evicts_are_demoted_to_the_tier_and_stay_right() {
    demoted_pages_stay_right(false);
}

/// The same, with an exclusive tier: a hit moves the block up to the page cache, and its
/// eviction brings it back.
#[test]
fn an_exclusive_tier_keeps_the_data_right() {
    demoted_pages_stay_right(true);
}

fn demoted_pages_stay_right(exclusive: bool) {
    let dir = tempfile::tempdir().expect("dir");
    let keys = 20_000u64;
    let mut options = options();
    options.tier = options.tier.map(|tier| TierOptions {
        cache_on_read: false,
        cache_on_evict: true,
        exclusive,
        cache_on_checkpoint: false,
        cache_on_write: false,
        ..tier
    });
    let db = Db::open(dir.path(), options).expect("open");
    for key in 0..keys {
        db.put(key.to_be_bytes(), value(key, 0)).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    // Keys divisible by 3 are overwritten each round.
    let value_of = |key: u64, round: u64| value(key, if key.is_multiple_of(3) { round } else { 0 });
    for round in 1..3 {
        std::thread::scope(|scope| {
            for reader in 0..2u64 {
                let (db, value_of) = (&db, &value_of);
                scope.spawn(move || {
                    for key in (reader..keys).step_by(5) {
                        let value = db.get(key.to_be_bytes()).expect("get").expect("present");
                        // Either the value before this round's overwrite or after it.
                        let expected = [value_of(key, round - 1), value_of(key, round)];
                        assert!(expected.contains(&value), "key {key} in round {round}");
                    }
                });
            }
            for key in (0..keys).step_by(3) {
                db.put(key.to_be_bytes(), value(key, round)).expect("put");
            }
        });
        db.checkpoint().expect("checkpoint");
        for key in (0..keys).step_by(7) {
            let expected = value_of(key, round);
            assert_eq!(db.get(key.to_be_bytes()).expect("get"), Some(expected), "{key}");
        }
    }
    let stats = db.stats().expect("stats");
    let tier = stats.tier.expect("a tier");
    assert!(tier.inserts_evict > 0 && tier.hits > 0, "{tier}");
    assert_eq!((tier.inserts_read, tier.inserts_checkpoint), (0, 0), "{tier}");
    assert_eq!(tier.taken, if exclusive { tier.hits } else { 0 }, "{tier}");
    assert_eq!(stats.cache.tier_rejected, 0);
    db.close().expect("close");
}
