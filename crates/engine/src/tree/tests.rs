use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;

use proptest::prelude::*;

use super::*;

/// Pages in a map; ids count up.
#[derive(Default)]
struct MapStore {
    pages: HashMap<u64, Arc<Page>>,
    next: u64,
}

impl PageSource for MapStore {
    type Error = Infallible;
    fn load(&self, id: u64) -> Result<Arc<Page>, Infallible> {
        Ok(Arc::clone(self.pages.get(&id).expect("a page the tree points at exists")))
    }
}

impl PageStore for MapStore {
    fn store(&mut self, id: u64, page: Page) -> u64 {
        self.pages.insert(id, Arc::new(page));
        id
    }
    fn allocate(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
    fn free(&mut self, id: u64) {
        assert!(self.pages.remove(&id).is_some(), "page {id} freed twice");
    }
}

/// A store whose every read after the first `budget` fails.
struct FailingStore {
    inner: MapStore,
    budget: std::cell::Cell<u32>,
}

impl FailingStore {
    fn spend(&self) -> Result<(), String> {
        match self.budget.get() {
            0 => Err("injected".to_string()),
            n => {
                self.budget.set(n - 1);
                Ok(())
            }
        }
    }
}

impl PageSource for FailingStore {
    type Error = String;
    fn load(&self, id: u64) -> Result<Arc<Page>, String> {
        self.spend()?;
        Ok(self.inner.load(id).unwrap_or_else(|never| match never {}))
    }
}

impl PageStore for FailingStore {
    fn store(&mut self, id: u64, page: Page) -> u64 {
        self.inner.store(id, page)
    }
    fn allocate(&mut self) -> u64 {
        self.inner.allocate()
    }
    fn free(&mut self, id: u64) {
        self.inner.free(id);
    }
}

/// Pages copied on write: a page stored before the last `publish` is never changed; its
/// new version gets a new id, and the old one stays (as the engine keeps it for snapshots).
#[derive(Default)]
struct CowStore {
    pages: HashMap<u64, Arc<Page>>,
    next: u64,
    /// Ids from here on were created since the last publish.
    fresh_from: u64,
    /// Pages replaced or freed since they were published.
    retired: Vec<u64>,
}

impl CowStore {
    fn publish(&mut self) {
        self.fresh_from = self.next + 1;
    }
}

impl PageSource for CowStore {
    type Error = Infallible;
    fn load(&self, id: u64) -> Result<Arc<Page>, Infallible> {
        Ok(Arc::clone(self.pages.get(&id).expect("a page the tree points at exists")))
    }
}

impl PageStore for CowStore {
    fn store(&mut self, id: u64, page: Page) -> u64 {
        let id = if id >= self.fresh_from {
            id
        } else {
            self.retired.push(id);
            self.allocate()
        };
        self.pages.insert(id, Arc::new(page));
        id
    }
    fn allocate(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
    fn free(&mut self, id: u64) {
        if id >= self.fresh_from {
            assert!(self.pages.remove(&id).is_some(), "page {id} freed twice");
        } else {
            self.retired.push(id);
        }
    }
}

/// Checks the tree's shape: every leaf at the same depth, every key within the bounds its
/// parents' separators give it, keys ascending overall, and no page over the limit that
/// could split. Returns the entries in order.
fn check(tree: &Tree, store: &impl PageSource<Error = Infallible>) -> Vec<(Vec<u8>, Value)> {
    let mut checker =
        Checker { store, max: tree.max_page_bytes, leaf_depth: None, out: Vec::new() };
    checker.walk(tree.root, None, None, 0);
    let out = checker.out;
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "keys out of order across pages");
    out
}

struct Checker<'a, S> {
    store: &'a S,
    max: usize,
    leaf_depth: Option<usize>,
    out: Vec<(Vec<u8>, Value)>,
}

impl<S: PageSource<Error = Infallible>> Checker<'_, S> {
    /// Walks the subtree at `id`, whose keys must lie in `low..high`.
    fn walk(&mut self, id: u64, low: Option<&[u8]>, high: Option<&[u8]>, depth: usize) {
        match Arc::unwrap_or_clone(self.store.load(id).unwrap_or_else(|never| match never {})) {
            Page::Leaf(leaf) => {
                let leaf_depth = *self.leaf_depth.get_or_insert(depth);
                assert_eq!(leaf_depth, depth, "leaves at different depths");
                let fits = leaf.encoded_len() <= self.max || leaf.entries.len() < 2;
                assert!(fits, "leaf {id} too big");
                for (key, value) in leaf.entries {
                    assert!(low.is_none_or(|low| key.as_ref() >= low), "key below its range");
                    assert!(high.is_none_or(|high| key.as_ref() < high), "key above its range");
                    self.out.push((key.to_vec(), value));
                }
            }
            Page::Internal(internal) => {
                let fits = internal.encoded_len() <= self.max || internal.entries.len() < 3;
                assert!(fits, "internal page {id} too big");
                let mut bound = low.map(<[u8]>::to_vec);
                let mut child = internal.first_child;
                for (separator, next) in &internal.entries {
                    assert!(low.is_none_or(|low| separator.as_slice() >= low));
                    assert!(high.is_none_or(|high| separator.as_slice() < high));
                    self.walk(child, bound.as_deref(), Some(separator), depth + 1);
                    bound = Some(separator.clone());
                    child = *next;
                }
                self.walk(child, bound.as_deref(), high, depth + 1);
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Scan(Vec<u8>, usize),
    ScanBack(Option<Vec<u8>>, usize),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct first bytes, so keys share prefixes and collide.
    (0u8..8, prop::collection::vec(0u8..4, 0..6)).prop_map(|(a, mut rest)| {
        rest.insert(0, a);
        rest
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key(), prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(k, v)| Op::Put(k, v)),
        1 => key().prop_map(Op::Delete),
        1 => key().prop_map(Op::Get),
        1 => (key(), 0usize..20).prop_map(|(k, n)| Op::Scan(k, n)),
        1 => (prop::option::of(key()), 0usize..20).prop_map(|(k, n)| Op::ScanBack(k, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The tree behaves as a `BTreeMap` through any sequence of operations, with pages small
    /// enough that it splits often, and keeps its shape.
    #[test]
    fn the_tree_matches_a_btreemap(ops in prop::collection::vec(op(), 1..400), max in 96usize..400) {
        let mut store = MapStore::default();
        let mut tree = Tree::create(&mut store, max);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    let old = tree.put(&mut store, &k, Value::inline(v.clone())).unwrap();
                    prop_assert_eq!(old, model.insert(k, v).map(Value::inline));
                }
                Op::Delete(k) => {
                    let deleted = tree.delete(&mut store, &k).unwrap();
                    prop_assert_eq!(deleted, model.remove(&k).map(Value::inline));
                }
                Op::Get(k) => {
                    let found = tree.get(&store, &k).unwrap();
                    prop_assert_eq!(found, model.get(&k).cloned().map(Value::inline));
                }
                Op::Scan(start, limit) => {
                    let mut got = Vec::new();
                    tree.scan(&store, &start, &mut |k, v| {
                        got.push((k.to_vec(), v.clone()));
                        got.len() < limit
                    })
                    .unwrap();
                    let want: Vec<(Vec<u8>, Value)> = model
                        .range(start..)
                        .take(limit.max(1))
                        .map(|(k, v)| (k.clone(), Value::inline(v.clone())))
                        .collect();
                    prop_assert_eq!(got, want);
                }
                Op::ScanBack(end, limit) => {
                    let mut got = Vec::new();
                    tree.scan_back(&store, end.as_deref(), &mut |k, v| {
                        got.push((k.to_vec(), v.clone()));
                        got.len() < limit
                    })
                    .unwrap();
                    let range = match &end {
                        Some(end) => model.range::<Vec<u8>, _>(..end),
                        None => model.range::<Vec<u8>, _>(..),
                    };
                    let want: Vec<(Vec<u8>, Value)> = range
                        .rev()
                        .take(limit.max(1))
                        .map(|(k, v)| (k.clone(), Value::inline(v.clone())))
                        .collect();
                    prop_assert_eq!(got, want);
                }
            }
        }
        let all = check(&tree, &store);
        let want: Vec<(Vec<u8>, Value)> =
            model.into_iter().map(|(k, v)| (k, Value::inline(v))).collect();
        prop_assert_eq!(all, want);
    }
}

#[test]
fn ten_thousand_keys_in_order_and_reversed_make_a_deep_tree_that_finds_them_all() {
    for reversed in [false, true] {
        let mut store = MapStore::default();
        let mut tree = Tree::create(&mut store, 512);
        let mut ids: Vec<u32> = (0..10_000).collect();
        if reversed {
            ids.reverse();
        }
        for i in &ids {
            tree.put(
                &mut store,
                format!("key{i:08}").as_bytes(),
                Value::inline(i.to_le_bytes().to_vec()),
            )
            .unwrap();
        }
        let height = tree.height(&store).unwrap();
        assert!(height >= 3, "height {height}");
        for i in 0..10_000u32 {
            let value = tree.get(&store, format!("key{i:08}").as_bytes()).unwrap();
            assert_eq!(value, Some(Value::inline(i.to_le_bytes().to_vec())));
        }
        assert_eq!(check(&tree, &store).len(), 10_000);
        for i in (0..10_000u32).step_by(2) {
            assert!(tree.delete(&mut store, format!("key{i:08}").as_bytes()).unwrap().is_some());
        }
        let left = check(&tree, &store);
        assert_eq!(left.len(), 5_000);
        assert!(left.iter().all(|(k, _)| k.last().is_some_and(|d| (d - b'0') % 2 == 1)));
        // Half-empty leaves merged: far fewer pages than before the deletes.
        let pages_before_last = store.pages.len();
        for i in (1..10_000u32).step_by(2) {
            assert!(tree.delete(&mut store, format!("key{i:08}").as_bytes()).unwrap().is_some());
        }
        assert!(check(&tree, &store).is_empty());
        // Everything deleted: the tree is one empty leaf again, and no page is left over.
        assert_eq!(tree.height(&store).unwrap(), 1);
        assert_eq!(store.pages.len(), 1, "of {pages_before_last} pages, some were never freed");
    }
}

#[test]
fn a_failed_read_changes_nothing() {
    // Fail the n-th page read, for every n a workload of 300 puts and 100 deletes reaches:
    // the error comes back from the operation that met it, nothing panics, and once reads
    // work again the tree holds exactly what the operations before the failure left.
    let ops: Vec<(bool, Vec<u8>)> = (0..400u32)
        .map(|i| (i < 300 || i % 2 == 0, format!("k{:05}", (i * 7919) % 300).into_bytes()))
        .collect();
    let mut n = 0;
    loop {
        let budget = std::cell::Cell::new(n);
        let mut store = FailingStore { inner: MapStore::default(), budget };
        let mut tree = Tree::create(&mut store, 128);
        let mut model: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
        let mut failed = false;
        for (i, (put, key)) in ops.iter().enumerate() {
            let value = Value::inline(vec![i as u8; 20]);
            let result = match put {
                true => tree.put(&mut store, key, value.clone()).map(|_| ()),
                false => tree.delete(&mut store, key).map(|_| ()),
            };
            match result {
                Ok(()) => {
                    match put {
                        true => model.insert(key.clone(), value),
                        false => model.remove(key),
                    };
                }
                Err(error) => {
                    assert_eq!(error, "injected");
                    failed = true;
                    break;
                }
            }
        }
        if !failed {
            break;
        }
        store.budget.set(u32::MAX);
        let mut found = Vec::new();
        tree.scan(&store, b"", &mut |k, v| {
            found.push((k.to_vec(), v.clone()));
            true
        })
        .unwrap();
        let want: Vec<(Vec<u8>, Value)> = model.into_iter().collect();
        assert_eq!(found, want, "after a failed read at {n}");
        n += 1;
    }
    assert!(n > 400, "the workload made only {n} reads");
}

type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Copy on write: after every round of changes (a "checkpoint"), each earlier version of
    /// the tree still reads exactly as it did when it was published, and the pages a round
    /// replaced are exactly the ones no later version reaches.
    #[test]
    fn every_published_version_stays_readable(
        rounds in prop::collection::vec(prop::collection::vec(op(), 1..60), 1..8),
        max in 96usize..300,
    ) {
        let mut store = CowStore::default();
        let mut tree = Tree::create(&mut store, max);
        store.publish();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut versions: Vec<(Tree, Contents)> = Vec::new();
        for round in rounds {
            for op in round {
                match op {
                    Op::Put(k, v) => {
                        tree.put(&mut store, &k, Value::inline(v.clone())).unwrap();
                        model.insert(k, v);
                    }
                    Op::Delete(k) => {
                        tree.delete(&mut store, &k).unwrap();
                        model.remove(&k);
                    }
                    _ => {}
                }
            }
            store.publish();
            versions.push((tree.clone(), model.clone()));
            for (version, want) in &versions {
                let got: Vec<(Vec<u8>, Vec<u8>)> = check(version, &store)
                    .into_iter()
                    .map(|(k, v)| match v {
                        Value::Inline(v) => (k, v.to_vec()),
                        Value::Overflow(_) => unreachable!("only inline values here"),
                    })
                    .collect();
                let want: Vec<(Vec<u8>, Vec<u8>)> = want.clone().into_iter().collect();
                prop_assert_eq!(got, want);
            }
        }
        // No page of the newest version was retired.
        let mut live = Vec::new();
        collect_pages(&store, tree.root, &mut live);
        prop_assert!(live.iter().all(|id| !store.retired.contains(id)));
    }
}

fn collect_pages(store: &CowStore, id: u64, out: &mut Vec<u64>) {
    out.push(id);
    if let Page::Internal(internal) = &*store.load(id).unwrap_or_else(|never| match never {}) {
        for index in 0..internal.children() {
            collect_pages(store, internal.child_at(index), out);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Batches (`Tree::apply`) do what the same changes one at a time would: after each
    /// batch the tree holds the model's contents and keeps its shape, `replaced` saw exactly
    /// the values the batch replaced or removed, and every earlier version still reads as
    /// it did when it was published.
    #[test]
    fn batches_match_a_btreemap_and_keep_old_versions(
        rounds in prop::collection::vec(prop::collection::vec(op(), 1..200), 1..8),
        max in 96usize..400,
    ) {
        let mut store = CowStore::default();
        let mut tree = Tree::create(&mut store, max);
        store.publish();
        let mut model: Contents = BTreeMap::new();
        let mut versions: Vec<(Tree, Contents)> = Vec::new();
        for round in rounds {
            // The round's last change of each key, in key order.
            let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for op in round {
                match op {
                    Op::Put(k, v) => drop(batch.insert(k, Some(v))),
                    Op::Delete(k) => drop(batch.insert(k, None)),
                    _ => {}
                }
            }
            let mut want_replaced = Vec::new();
            for (k, v) in &batch {
                let old = match v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(k),
                };
                want_replaced.extend(old.map(Value::inline));
            }
            let mut changes: Vec<Change> =
                batch.into_iter().map(|(k, v)| (k, v.map(Value::inline))).collect();
            let mut replaced = Vec::new();
            tree.apply(&mut store, &mut changes, &mut |old| replaced.push(old.clone())).unwrap();
            prop_assert_eq!(replaced, want_replaced);
            store.publish();
            versions.push((tree.clone(), model.clone()));
            for (version, want) in &versions {
                let got: Vec<(Vec<u8>, Value)> = check(version, &store);
                let want: Vec<(Vec<u8>, Value)> =
                    want.iter().map(|(k, v)| (k.clone(), Value::inline(v.clone()))).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}

#[test]
fn keys_appended_in_batches_fill_their_leaves() {
    // Keys in order, 500 a batch: each batch's leaf is split into as few pages as fit, so
    // the leaves end up nearly full (split in halves they would be about half full).
    let max = 1024;
    let mut store = MapStore::default();
    let mut tree = Tree::create(&mut store, max);
    for batch in 0..20u32 {
        let mut changes: Vec<Change> = (batch * 500..(batch + 1) * 500)
            .map(|i| (format!("key{i:08}").into_bytes(), Some(Value::inline(vec![7; 40]))))
            .collect();
        tree.apply(&mut store, &mut changes, &mut |_| panic!("nothing is replaced")).unwrap();
    }
    assert_eq!(check(&tree, &store).len(), 10_000);
    let leaves: Vec<usize> = store
        .pages
        .values()
        .filter_map(|page| match &**page {
            Page::Leaf(leaf) => Some(leaf.encoded_len()),
            Page::Internal(_) => None,
        })
        .collect();
    let fill = leaves.iter().sum::<usize>() as f64 / (leaves.len() * max) as f64;
    assert!(fill > 0.85, "leaves are {:.0}% full on average", fill * 100.0);
}
