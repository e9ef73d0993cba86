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
        assert_eq!(stats.blocks.tier_rejected, 0);
        db.close().expect("close");
    }
}
