//! `Writer::closure`, taken in steps as a group's write-back takes it, against the closure
//! computed from scratch; and forgetting splits in steps.

use super::*;

/// Every pending split that shares a page with `pids`, and theirs, until none adds more: the
/// closure computed from scratch, for checking the incremental one.
fn closure_from_scratch(writer: &Writer, pids: &mut BTreeSet<u64>) -> Vec<u64> {
    let splits = writer.splits.lock().unwrap();
    let mut taken = vec![false; splits.records.len()];
    loop {
        let mut grew = false;
        for (split, taken) in splits.records.iter().zip(taken.iter_mut()) {
            if !*taken && split.pids.iter().any(|pid| pids.contains(pid)) {
                *taken = true;
                pids.extend(&split.pids);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    splits.records.iter().zip(&taken).filter(|(_, t)| **t).map(|(s, _)| s.number).collect()
}

#[test]
fn a_closure_taken_in_steps_equals_one_taken_at_once() {
    // Random splits over a few hundred pages, made between the calls of one group's
    // closure, as splits run between a write-back's stock-takings; then some forgotten.
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    for round in 0..20 {
        let writer = Writer::new();
        let push = |count: usize, next: &mut dyn FnMut(u64) -> u64| {
            for _ in 0..count {
                let number = writer.split_count.fetch_add(1, Ordering::Relaxed);
                let pids = (0..2 + next(2)).map(|_| next(400)).collect();
                writer.splits.lock().unwrap().push(SplitRecord { number, pids });
            }
        };
        push(60, &mut next);
        let start: BTreeSet<u64> = (0..3).map(|_| next(400)).collect();
        let mut pids = start.clone();
        let mut found = Closure::default();
        writer.closure(&mut pids, &mut found);
        let mut numbers = found.taken();
        let mut added: BTreeSet<u64> = found.take_added().into_iter().collect();
        for step in 0..5 {
            push(20, &mut next);
            let before = pids.clone();
            writer.closure(&mut pids, &mut found);
            numbers = found.taken();
            let step_added: BTreeSet<u64> = found.take_added().into_iter().collect();
            assert_eq!(step_added, &pids - &before, "round {round} step {step}: added pages");
            added.extend(step_added);
            let mut expected_pids = start.clone();
            let expected = closure_from_scratch(&writer, &mut expected_pids);
            assert_eq!(numbers, expected, "round {round} step {step}: the splits taken");
            assert_eq!(pids, expected_pids, "round {round} step {step}: the pages");
        }
        assert!(added.is_superset(&(&pids - &start)), "round {round}");
        // Forgetting the taken splits leaves the others, each still found by its pages.
        writer.forget_splits(&numbers);
        let splits = writer.splits.lock().unwrap();
        assert_eq!(splits.records.len(), 160 - numbers.len(), "round {round}");
        assert!(splits.records.iter().all(|s| numbers.binary_search(&s.number).is_err()));
        for split in &splits.records {
            for pid in &split.pids {
                assert!(splits.by_page[pid].contains(&split.number), "round {round}");
            }
        }
        let indexed: usize = splits.by_page.values().map(Vec::len).sum();
        let held: usize = splits.records.iter().map(|s| s.pids.len()).sum();
        assert_eq!(indexed, held, "round {round}: pages of forgotten splits stay indexed");
    }
}

/// A closure over more pages than `CLOSURE_STEP` while another thread records splits: the
/// search lets them record in between, and a next call, with splits held off, ends with
/// the same pages and splits as a search from scratch.
#[test]
fn a_long_closure_lets_splits_record_and_its_next_call_catches_up() {
    for round in 0..4u64 {
        let writer = Writer::new();
        // A chain of splits: split i changed pages i and i + 1, so a search from page 0
        // walks 3 × CLOSURE_STEP pages, one at a time.
        let chain = 3 * CLOSURE_STEP as u64;
        for pid in 0..chain {
            writer.record_split(vec![pid, pid + 1]);
        }
        let mut pids: BTreeSet<u64> = [0].into();
        let mut found = Closure::default();
        let recorded = AtomicU64::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Splits that reach into the chain and beyond it, made while it searches.
                let mut rng = fastrand::Rng::with_seed(round);
                for i in 0..2_000u64 {
                    let pid = rng.u64(..chain);
                    writer.record_split(vec![pid, 1_000_000 + round * 10_000 + i]);
                    recorded.fetch_add(1, Ordering::Relaxed);
                }
            });
            writer.closure(&mut pids, &mut found);
        });
        let looked_to = found.looked_to().expect("a call was made");
        assert!(looked_to >= chain, "round {round}: the chain was recorded before the search");
        // The next call, as a stock-taking makes it, takes whatever the first left.
        writer.closure(&mut pids, &mut found);
        let mut expected_pids: BTreeSet<u64> = [0].into();
        let expected = closure_from_scratch(&writer, &mut expected_pids);
        assert_eq!(found.taken(), expected, "round {round}: the splits taken");
        assert_eq!(pids, expected_pids, "round {round}: the pages");
        assert_eq!(recorded.load(Ordering::Relaxed), 2_000);
        assert_eq!(expected.len() as u64, chain + 2_000, "round {round}: every split reached");
    }
}

#[test]
fn forgetting_splits_in_steps_keeps_exactly_the_others() {
    let writer = Writer::new();
    // Three pages per split, each page in several splits.
    let splits = 3 * CLOSURE_STEP as u64 + 17;
    for n in 0..splits {
        writer.record_split(vec![n % 1000, 1000 + n % 777, 5000 + n]);
    }
    assert_eq!(writer.pending_splits() as u64, splits);
    // Every third split, more than two steps' worth.
    let gone: Vec<u64> = (0..splits).filter(|n| n % 3 == 0).collect();
    writer.forget_splits(&gone);
    assert_eq!(writer.pending_splits() as u64, splits - gone.len() as u64);
    // What is left reports exactly the pages of the splits kept.
    let changed = writer.changed_between(0, splits);
    let expected: std::collections::BTreeSet<u64> = (0..splits)
        .filter(|n| n % 3 != 0)
        .flat_map(|n| [n % 1000, 1000 + n % 777, 5000 + n])
        .collect();
    assert_eq!(changed, expected);
    // And a closure from a page of a forgotten split alone finds nothing.
    let mut pids: BTreeSet<u64> = [5000].into_iter().collect();
    let mut found = Closure::default();
    writer.closure(&mut pids, &mut found);
    assert_eq!(pids.len(), 1, "split 0 was forgotten");
    assert!(found.taken().is_empty());
}
