//! Optimistic transactions and compare-and-swap (`Db::transaction`,
//! `Db::compare_and_swap`): their semantics one at a time, two transactions of which exactly
//! one commits, and a model-based property test in which threads run random transactions at
//! once and the committed ones, replayed serially in the order of their sequence numbers
//! against a `BTreeMap`, must have read what the model held at that point and leave the
//! store equal to it (so the store's history is serializable).
//!
//! `PROPTEST_CASES` sets the number of cases (CI runs the default below).

use std::collections::BTreeMap;
use std::sync::{Barrier, Mutex};

use proptest::prelude::*;
use tierkv::{Db, Durability, Error, ErrorKind, Options};

fn options() -> Options {
    Options {
        // Small pages: transactions split leaves and put values in overflow blocks.
        cache_size: 4 << 20,
        write_buffer_size: Some(1 << 20),
        max_page_bytes: Some(1024),
        durability: Durability::None,
        ..Options::default()
    }
}

fn everything(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.range(..).map(|entry| entry.expect("an entry")).collect()
}

#[test]
fn a_transaction_reads_its_snapshot_and_its_own_writes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options()).expect("open");
    db.put("a", "1").expect("put");
    let mut early = db.transaction();
    db.put("b", "2").expect("put");
    assert_eq!(early.get("b").expect("get"), None, "written after the transaction began");
    early.put("c", "early");
    assert!(matches!(early.commit(), Err(Error::Conflict { key }) if key == b"b"));

    let mut tx = db.transaction();
    assert_eq!(tx.get("a").expect("get"), Some(b"1".to_vec()));
    tx.put("c", "3").delete("a");
    assert_eq!(tx.get("c").expect("get"), Some(b"3".to_vec()));
    assert_eq!(tx.get("a").expect("get"), None, "its own delete");
    assert_eq!(db.get("c").expect("get"), None, "nothing written before the commit");
    let sequence = tx.commit().expect("no key it saw changed");
    assert!(db.snapshot().sequence() >= sequence);
    let expected: BTreeMap<Vec<u8>, Vec<u8>> =
        [(b"b".to_vec(), b"2".to_vec()), (b"c".to_vec(), b"3".to_vec())].into();
    assert_eq!(everything(&db), expected);

    // A transaction that only reads commits as of its snapshot.
    let mut reader = db.transaction();
    assert_eq!(reader.get("b").expect("get"), Some(b"2".to_vec()));
    db.put("b", "changed").expect("put");
    assert_eq!(reader.commit().expect("nothing to write"), sequence);

    // A rolled-back one writes nothing.
    let mut discarded = db.transaction();
    discarded.put("d", "4");
    discarded.rollback();
    assert_eq!(db.get("d").expect("get"), None);
}

#[test]
fn a_conflict_writes_nothing_and_names_the_key() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options()).expect("open");
    db.put("read", "1").expect("put");
    db.put("blind", "1").expect("put");

    // A key read, changed by another writer before the commit.
    let mut tx = db.transaction();
    assert_eq!(tx.get("read").expect("get"), Some(b"1".to_vec()));
    tx.put("other", "x");
    db.put("read", "2").expect("put");
    let error = tx.commit().expect_err("the key it read changed");
    assert!(matches!(&error, Error::Conflict { key } if key == b"read"), "{error}");
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert!(error.to_string().contains("read"), "{error}");

    // A key written without reading it, changed meanwhile (first committer wins).
    let mut tx = db.transaction();
    tx.put("blind", "mine").put("other", "y");
    db.delete("blind").expect("delete");
    assert!(matches!(tx.commit(), Err(Error::Conflict { key }) if key == b"blind"));

    // The same key changed and changed back: the value is what is checked, so it commits.
    let mut tx = db.transaction();
    assert_eq!(tx.get("read").expect("get"), Some(b"2".to_vec()));
    db.put("read", "3").expect("put");
    db.put("read", "2").expect("put");
    tx.put("read", "4");
    tx.commit().expect("the value it read is back");

    let expected: BTreeMap<Vec<u8>, Vec<u8>> = [(b"read".to_vec(), b"4".to_vec())].into();
    assert_eq!(everything(&db), expected, "neither refused commit wrote anything");
    drop(db);
    let db = Db::open(dir.path(), options()).expect("reopen");
    assert_eq!(everything(&db), expected, "nor did the log get either of them");
}

#[test]
fn a_transaction_checks_large_values_and_refuses_bad_keys() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options()).expect("open");
    // Over a quarter of a 1 KiB page: overflow blocks, compared by their bytes.
    let large = vec![7u8; 5000];
    db.put("large", &large).expect("put");
    let mut tx = db.transaction();
    assert_eq!(tx.get("large").expect("get").as_deref(), Some(&large[..]));
    tx.put("large", vec![8u8; 3000]);
    let mut same_length = large.clone();
    same_length[4999] = 9;
    db.put("large", &same_length).expect("put");
    assert!(matches!(tx.commit(), Err(Error::Conflict { .. })), "same length, another value");

    let mut tx = db.transaction();
    assert_eq!(tx.get("large").expect("get").as_deref(), Some(&same_length[..]));
    tx.put("large", vec![8u8; 3000]);
    tx.commit().expect("unchanged");
    assert_eq!(db.get("large").expect("get"), Some(vec![8u8; 3000]));

    let mut tx = db.transaction();
    tx.put("", "empty key");
    assert!(matches!(tx.commit(), Err(Error::EmptyKey)));
    let mut tx = db.transaction();
    tx.put(vec![1u8; tierkv::MAX_KEY_BYTES + 1], "long key");
    assert!(matches!(tx.commit(), Err(Error::KeyTooLarge { .. })));
}

#[test]
fn of_two_conflicting_transactions_exactly_one_commits() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options()).expect("open");
    db.put("counter", 0u64.to_le_bytes()).expect("put");
    let rounds = 200u64;
    let barrier = Barrier::new(2);
    let committed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for thread in 0..2 {
            let (db, barrier, committed) = (&db, &barrier, &committed);
            scope.spawn(move || {
                for round in 0..rounds {
                    let mut tx = db.transaction();
                    let value = tx.get("counter").expect("get").expect("a counter");
                    let counter = u64::from_le_bytes(value.try_into().expect("8 bytes"));
                    // Both have read before either commits.
                    barrier.wait();
                    tx.put("counter", (counter + 1).to_le_bytes());
                    match tx.commit() {
                        Ok(_) => committed.lock().expect("lock").push((round, thread)),
                        Err(Error::Conflict { .. }) => {}
                        Err(error) => panic!("commit: {error}"),
                    }
                    barrier.wait();
                }
            });
        }
    });
    let committed = committed.into_inner().expect("lock");
    for round in 0..rounds {
        let winners = committed.iter().filter(|(r, _)| *r == round).count();
        assert_eq!(winners, 1, "round {round}: {winners} commits");
    }
    let value = db.get("counter").expect("get").expect("a counter");
    assert_eq!(u64::from_le_bytes(value.try_into().expect("8 bytes")), rounds);
}

#[test]
fn compare_and_swap_swaps_only_on_a_match() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options()).expect("open");
    assert_eq!(db.compare_and_swap("k", None, Some(b"1")).expect("cas"), Ok(()));
    let refused = db.compare_and_swap("k", None, Some(b"2")).expect("cas");
    assert_eq!(refused.expect_err("k holds 1").current, Some(b"1".to_vec()));
    let refused = db.compare_and_swap("k", Some(b"0"), None).expect("cas");
    assert_eq!(refused.expect_err("k holds 1").current, Some(b"1".to_vec()));
    assert_eq!(db.get("k").expect("get"), Some(b"1".to_vec()));
    let large = vec![3u8; 4000];
    assert_eq!(db.compare_and_swap("k", Some(b"1"), Some(&large)).expect("cas"), Ok(()));
    let refused = db.compare_and_swap("k", Some(&large[..3999]), None).expect("cas");
    assert_eq!(refused.expect_err("k holds the large value").current, Some(large.clone()));
    assert_eq!(db.compare_and_swap("k", Some(&large), None).expect("cas"), Ok(()));
    assert_eq!(db.get("k").expect("get"), None);
    let refused = db.compare_and_swap("k", Some(b"1"), Some(b"1")).expect("cas");
    assert_eq!(refused.expect_err("k holds nothing").current, None);
    assert!(matches!(db.compare_and_swap("", None, Some(b"1")), Err(Error::EmptyKey)));
    assert_eq!(db.get("k").expect("get"), None);
}

#[test]
fn compare_and_swap_loses_no_increment() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options()).expect("open");
    let (threads, increments) = (4u64, 250u64);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let db = &db;
            scope.spawn(move || {
                for _ in 0..increments {
                    // Bounded: each refusal means another thread's increment landed.
                    for _ in 0..threads * increments {
                        let now = db.get("n").expect("get");
                        let next = match &now {
                            None => 1u64,
                            Some(v) => u64::from_le_bytes(v[..].try_into().expect("8 bytes")) + 1,
                        };
                        let swapped = db
                            .compare_and_swap("n", now.as_deref(), Some(&next.to_le_bytes()))
                            .expect("cas");
                        if swapped.is_ok() {
                            break;
                        }
                    }
                }
            });
        }
    });
    let value = db.get("n").expect("get").expect("a counter");
    assert_eq!(u64::from_le_bytes(value.try_into().expect("8 bytes")), threads * increments);
}

/// One transaction of the property test: keys read, then keys written with values made
/// from what was read (or removed).
#[derive(Clone, Debug)]
struct Tx {
    reads: Vec<u8>,
    writes: Vec<(u8, Write)>,
}

#[derive(Clone, Copy, Debug)]
enum Write {
    Small,
    /// An overflow value.
    Large,
    Delete,
}

/// A transaction that committed: its sequence number, what it read, what it wrote.
#[derive(Debug)]
struct Committed {
    sequence: u64,
    reads: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn tx() -> impl Strategy<Value = Tx> {
    let write =
        prop_oneof![6 => Just(Write::Small), 1 => Just(Write::Large), 2 => Just(Write::Delete)];
    (prop::collection::vec(0u8..12, 0..4), prop::collection::vec((0u8..12, write), 0..4))
        .prop_map(|(reads, writes)| Tx { reads, writes })
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:02}").into_bytes()
}

/// A value that depends on everything the transaction read, so a lost update shows.
fn value_from(
    reads: &[(Vec<u8>, Option<Vec<u8>>)],
    thread: usize,
    n: usize,
    write: Write,
) -> Vec<u8> {
    let mut sum = 0u64;
    for (_, value) in reads {
        for &byte in value.iter().flatten() {
            sum = sum.wrapping_mul(31).wrapping_add(u64::from(byte));
        }
    }
    let mut value = format!("t{thread}n{n}s{sum}").into_bytes();
    if let Write::Large = write {
        value.resize(600 + n % 700, b'L');
    }
    value
}

/// Runs `programs` on as many threads at once; returns the transactions that committed.
fn run_programs(db: &Db, programs: &[Vec<Tx>]) -> Vec<Committed> {
    let committed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (thread, program) in programs.iter().enumerate() {
            let committed = &committed;
            scope.spawn(move || {
                for (n, tx) in program.iter().enumerate() {
                    let mut transaction = db.transaction();
                    let mut reads = Vec::new();
                    for &k in &tx.reads {
                        let value = transaction.get(key(k)).expect("get");
                        reads.push((key(k), value));
                    }
                    let mut writes = Vec::new();
                    for &(k, write) in &tx.writes {
                        let value = match write {
                            Write::Delete => None,
                            write => Some(value_from(&reads, thread, n, write)),
                        };
                        match &value {
                            Some(value) => transaction.put(key(k), value),
                            None => transaction.delete(key(k)),
                        };
                        assert_eq!(transaction.get(key(k)).expect("get"), value, "its own write");
                        writes.push((key(k), value));
                    }
                    match transaction.commit() {
                        Ok(sequence) => committed.lock().expect("lock").push(Committed {
                            sequence,
                            reads,
                            writes,
                        }),
                        Err(Error::Conflict { .. }) => {}
                        Err(error) => panic!("commit: {error}"),
                    }
                    if n % 16 == 15 {
                        db.checkpoint().expect("checkpoint");
                    }
                }
            });
        }
    });
    committed.into_inner().expect("lock")
}

/// Replays the transactions that wrote in the order of their sequence numbers; each must
/// have read what the model held then. Returns the model.
fn replay(mut committed: Vec<Committed>) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, TestCaseError> {
    committed.retain(|tx| !tx.writes.is_empty());
    committed.sort_by_key(|tx| tx.sequence);
    for pair in committed.windows(2) {
        prop_assert!(pair[0].sequence < pair[1].sequence, "two commits share a sequence number");
    }
    let mut model = BTreeMap::new();
    for tx in &committed {
        for (key, value) in &tx.reads {
            prop_assert_eq!(
                model.get(key),
                value.as_ref(),
                "a commit at {} read a stale value",
                tx.sequence
            );
        }
        for (key, value) in &tx.writes {
            match value {
                Some(value) => model.insert(key.clone(), value.clone()),
                None => model.remove(key),
            };
        }
    }
    Ok(model)
}

/// `PROPTEST_CASES`, or 24.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn concurrent_transactions_are_serializable(
        programs in prop::collection::vec(prop::collection::vec(tx(), 1..60), 2..5)
    ) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = Db::open(dir.path(), options()).expect("open");
        let committed = run_programs(&db, &programs);
        let model = replay(committed)?;
        prop_assert_eq!(&everything(&db), &model);
        drop(db);
        let db = Db::open(dir.path(), options()).expect("reopen");
        prop_assert_eq!(&everything(&db), &model, "after a reopen");
    }
}
