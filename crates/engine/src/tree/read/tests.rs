use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::*;
use crate::page::slotted::{encode_internal, encode_leaf};
use crate::page::{shortest_separator, Value};

const PAGE: usize = 4096;

/// A tree of slotted pages in memory, built bottom-up from sorted entries.
struct Tree {
    pages: HashMap<u64, Vec<u8>>,
}

impl PageSource for Tree {
    type Error = String;
    fn read_page(&self, pid: u64) -> Result<Vec<u8>, String> {
        self.pages.get(&pid).cloned().ok_or(format!("no page {pid}"))
    }
    fn evicted(&self, _: u64, _: &[u8]) {}
    fn installed(&self, _: u64, _: &[u8]) {}
    fn discarded(&self, _: u64) {}
}

/// Builds the tree of `entries` with `per_leaf` entries a leaf and `fan_out` children an
/// internal page; returns its pages and root.
fn build(entries: &BTreeMap<Vec<u8>, Value>, per_leaf: usize, fan_out: usize) -> (Tree, u64) {
    let mut pages = HashMap::new();
    let mut next = 1u64;
    let all: Vec<(Bytes, Value)> =
        entries.iter().map(|(k, v)| (Bytes::from(k.clone()), v.clone())).collect();
    // Each level: (first key, page id).
    let mut level: Vec<(Vec<u8>, u64)> = Vec::new();
    let leaves: Vec<&[(Bytes, Value)]> =
        if all.is_empty() { vec![&all[..]] } else { all.chunks(per_leaf).collect() };
    let mut previous_last: Option<Vec<u8>> = None;
    for leaf in leaves {
        pages.insert(next, encode_leaf(leaf, 1, 0, PAGE));
        let first = leaf.first().map(|e| e.0.to_vec()).unwrap_or_default();
        let separator = match &previous_last {
            Some(last) => shortest_separator(last, &first),
            None => Vec::new(),
        };
        previous_last = leaf.last().map(|e| e.0.to_vec());
        level.push((separator, next));
        next += 1;
    }
    while level.len() > 1 {
        let mut up = Vec::new();
        for group in level.chunks(fan_out) {
            if group.len() == 1 {
                up.push(group[0].clone());
                continue;
            }
            let separators: Vec<(Vec<u8>, u64)> = group[1..].to_vec();
            pages.insert(next, encode_internal(group[0].1, &separators, 1, PAGE));
            up.push((group[0].0.clone(), next));
            next += 1;
        }
        level = up;
    }
    (Tree { pages }, level[0].1)
}

fn entries(n: usize, seed: u64) -> BTreeMap<Vec<u8>, Value> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|_| {
            let key = format!("user{:05}", rng.u32(0..100_000)).into_bytes();
            let value = if rng.u8(0..20) == 0 {
                Value::Overflow(OverflowRef { len: 9000, first: 5000 + rng.u64(0..100), blocks: 1 })
            } else {
                Value::inline(vec![rng.u8(..); rng.usize(0..40)])
            };
            (key, value)
        })
        .collect()
}

fn pool(tree: Tree) -> BufferPool<Tree> {
    // Room for a few pages only: reads load and evict all the time.
    BufferPool::new(4096, PAGE, 6 * (PAGE + 64), tree).expect("pool")
}

fn value_of(chunk: &Chunk, index: usize) -> Value {
    match &chunk.entries[index].1 {
        ChunkValue::Inline(range) => Value::inline(chunk.bytes[range.clone()].to_vec()),
        ChunkValue::Owned(bytes) => Value::inline(bytes.clone()),
        ChunkValue::Overflow(overflow) => Value::Overflow(*overflow),
        ChunkValue::Taken => panic!("entry {index}'s value was taken"),
    }
}

#[test]
fn lookups_find_every_key_and_no_other() {
    for (n, per_leaf, fan_out) in [(0, 8, 4), (1, 8, 4), (700, 7, 3), (2000, 30, 20)] {
        let expected = entries(n, n as u64);
        let (tree, root) = build(&expected, per_leaf, fan_out);
        let pool = pool(tree);
        let mut value = Vec::new();
        for (key, want) in &expected {
            let found = get(&pool, root, key, &mut value).expect("a lookup");
            match want {
                Value::Inline(bytes) => {
                    assert_eq!(found, Found::Inline);
                    assert_eq!(&value[..], &bytes[..]);
                }
                Value::Overflow(overflow) => assert_eq!(found, Found::Overflow(*overflow)),
            }
        }
        for absent in [&b""[..], b"user", b"user0000", b"user999999", b"zzz"] {
            if !expected.contains_key(absent) {
                assert_eq!(get(&pool, root, absent, &mut value).expect("a lookup"), Found::Absent);
            }
        }
    }
}

#[test]
fn chunks_walk_the_tree_both_ways_from_any_key() {
    let expected = entries(1500, 9);
    let keys: Vec<&Vec<u8>> = expected.keys().collect();
    let (tree, root) = build(&expected, 11, 4);
    let pool = pool(tree);
    let mut rng = fastrand::Rng::with_seed(3);
    let mut starts: Vec<Vec<u8>> = vec![Vec::new(), b"zzzz".to_vec()];
    for _ in 0..20 {
        starts.push(keys[rng.usize(0..keys.len())].clone());
        starts.push(format!("user{:05}", rng.u32(0..100_000)).into_bytes());
    }
    for (round, start) in starts.iter().enumerate() {
        // Whole leaves, and chunks cut short; values in the chunk's buffer, and (a cursor's
        // chunk) each in its own allocation.
        let limit = [usize::MAX, 1, 3][round % 3];
        let mut chunk = if round % 2 == 0 { Chunk::default() } else { Chunk::owning_values() };
        // Forward from `start`: every key at or above it, in order, each value right.
        let mut seen = Vec::new();
        let mut from = start.clone();
        for _ in 0..expected.len() + 2 {
            chunk_forward(&pool, root, &from, limit, &mut chunk).expect("a chunk");
            assert!(chunk.entries.len() <= limit);
            for index in 0..chunk.entries.len() {
                let key = chunk.key(index).to_vec();
                assert_eq!(Some(&value_of(&chunk, index)), expected.get(&key));
                seen.push(key);
            }
            // From the chunk's bound: the next chunk goes on from where this one ended.
            match chunk.bound.clone() {
                Some(bound) => from = bound,
                None => break,
            }
        }
        let want: Vec<Vec<u8>> = expected.range(start.clone()..).map(|(k, _)| k.clone()).collect();
        assert_eq!(seen, want, "forward from {:?}", String::from_utf8_lossy(start));

        // Backward from below `start`.
        let mut seen = Vec::new();
        let mut before = Some(start.clone()).filter(|s| !s.is_empty());
        for _ in 0..expected.len() + 2 {
            chunk_backward(&pool, root, before.as_deref(), limit, &mut chunk).expect("a chunk");
            assert!(chunk.entries.len() <= limit);
            for index in (0..chunk.entries.len()).rev() {
                seen.push(chunk.key(index).to_vec());
            }
            match chunk.bound.take() {
                Some(bound) => before = Some(bound),
                None => break,
            }
        }
        let want: Vec<Vec<u8>> = match before_of(start) {
            Some(end) => expected.range(..end).rev().map(|(k, _)| k.clone()).collect(),
            None => expected.keys().rev().cloned().collect(),
        };
        assert_eq!(seen, want, "backward from {:?}", String::from_utf8_lossy(start));
    }
    assert!(pool.stats().evictions > 0, "the test never evicted: {:?}", pool.stats());
}

/// A forward scan that asks each chunk from where the last one ended goes down from the root
/// about once per parent, not once per leaf: it reads far fewer pages than the same scan
/// with each chunk read afresh, and returns the same entries.
#[test]
fn forward_chunks_go_on_from_where_the_last_ended_without_going_down_again() {
    let expected = entries(3000, 5);
    let (tree, root) = build(&expected, 8, 16);
    let pool = BufferPool::new(4096, PAGE, 4096 * (PAGE + 64), tree).expect("pool");
    let scan = |fresh: bool| {
        let before = pool.stats().lookups;
        let (mut chunk, mut from, mut seen) = (Chunk::default(), Vec::new(), Vec::new());
        loop {
            if fresh {
                chunk = Chunk::default();
            }
            chunk_forward(&pool, root, &from, 3, &mut chunk).expect("a chunk");
            seen.extend((0..chunk.entries.len()).map(|index| chunk.key(index).to_vec()));
            match chunk.bound.clone() {
                Some(bound) => from = bound,
                None => break,
            }
        }
        (seen, pool.stats().lookups - before)
    };
    let (afresh, descending) = scan(true);
    let (going_on, continuing) = scan(false);
    let want: Vec<Vec<u8>> = expected.keys().cloned().collect();
    assert_eq!(afresh, want);
    assert_eq!(going_on, want);
    // Three levels: a fresh chunk reads three pages (and the leaf again for its cut); one
    // that goes on reads the leaf (twice when cut) and, at a leaf's end, the parent.
    assert!(continuing * 2 < descending, "{continuing} page reads against {descending}");
}

/// The same for backward chunks: each asked for from where the last one started goes on in
/// the same leaf or the parent's previous child, reading far fewer pages than chunks read
/// afresh, and returning the same entries, descending.
#[test]
fn backward_chunks_go_on_from_where_the_last_started_without_going_down_again() {
    let expected = entries(3000, 6);
    let (tree, root) = build(&expected, 8, 16);
    let pool = BufferPool::new(4096, PAGE, 4096 * (PAGE + 64), tree).expect("pool");
    let scan = |fresh: bool, limit: usize| {
        let before_reads = pool.stats().lookups;
        let (mut chunk, mut before, mut seen) = (Chunk::owning_values(), None, Vec::new());
        loop {
            if fresh {
                chunk = Chunk::owning_values();
            }
            chunk_backward(&pool, root, before.as_deref(), limit, &mut chunk).expect("a chunk");
            for index in (0..chunk.entries.len()).rev() {
                let key = chunk.key(index).to_vec();
                assert_eq!(Some(&value_of(&chunk, index)), expected.get(&key));
                seen.push(key);
            }
            match chunk.bound.clone() {
                Some(bound) => before = Some(bound),
                None => break,
            }
        }
        (seen, pool.stats().lookups - before_reads)
    };
    let want: Vec<Vec<u8>> = expected.keys().rev().cloned().collect();
    for limit in [3, usize::MAX] {
        let (afresh, descending) = scan(true, limit);
        let (going_on, continuing) = scan(false, limit);
        assert_eq!(afresh, want, "limit {limit}");
        assert_eq!(going_on, want, "limit {limit}");
        // Three levels. Whole leaves: afresh, three reads a leaf; going on, the leaf and the
        // parent (about two). Three entries a chunk: three reads a chunk against one, and
        // the parent once a leaf.
        let (times, within) = if limit == 3 { (2, 1) } else { (3, 2) };
        assert!(
            continuing * times < descending * within,
            "limit {limit}: {continuing} page reads against {descending}"
        );
    }
}

fn before_of(start: &[u8]) -> Option<Vec<u8>> {
    (!start.is_empty()).then(|| start.to_vec())
}

/// A cursor's chunk holds each inline value in an allocation of its own and hands it out
/// once: taken, the entry says so (a re-read is the caller's cue), and a chunk in one buffer
/// hands nothing out.
#[test]
fn owned_values_are_handed_out_once_and_say_so() {
    let expected = entries(200, 3);
    let (tree, root) = build(&expected, 8, 4);
    let pool = pool(tree);
    let mut chunk = Chunk::owning_values();
    chunk_forward(&pool, root, b"", usize::MAX, &mut chunk).expect("a chunk");
    let n = chunk.entries.len();
    assert!(n >= 2, "a leaf of {n} entries");
    assert!(!chunk.any_taken(0..n));
    let at = (0..n)
        .find(|&i| matches!(chunk.entries[i].1, ChunkValue::Owned(_)))
        .expect("an inline value in the first leaf");
    let key = chunk.key(at).to_vec();
    let value = chunk.take_value(at).expect("an owned value");
    assert_eq!(Some(&Value::inline(value)), expected.get(&key));
    assert_eq!(chunk.take_value(at), None, "handed out twice");
    assert!(chunk.any_taken(0..n) && chunk.any_taken(at..at + 1));
    assert!(!chunk.any_taken(0..at) && !chunk.any_taken(at + 1..n));
    assert_eq!(chunk.key(at), key.as_slice(), "the key stays");

    let mut shared = Chunk::default();
    chunk_forward(&pool, root, b"", usize::MAX, &mut shared).expect("a chunk");
    assert_eq!(shared.entries.len(), n);
    assert_eq!(shared.take_value(0), None, "a chunk in one buffer hands nothing out");
    assert!(!shared.any_taken(0..n));
}

#[test]
fn a_descent_that_fails_while_a_split_runs_goes_again_and_one_without_fails() {
    let (tree, _) = build(&entries(10, 1), 8, 4);
    let pool = pool(tree);
    // A failure with a split during it: a page read after its parent split says nothing
    // about the tree, so the descent runs again.
    let mut runs = 0;
    let result: Result<u32, ReadError<String>> = stable(&pool, || {
        runs += 1;
        if runs == 1 {
            drop(pool.change_structure());
            return Err(ReadError::Page(BufferError::Unreadable { pid: 7 }));
        }
        Ok(5)
    });
    assert_eq!((result.ok(), runs), (Some(5), 2));
    // With no split meanwhile, the failure is the tree's, returned at once.
    let mut runs = 0;
    let result: Result<u32, ReadError<String>> = stable(&pool, || {
        runs += 1;
        Err(ReadError::Page(BufferError::Unreadable { pid: 7 }))
    });
    assert!(matches!(result, Err(ReadError::Page(BufferError::Unreadable { pid: 7 }))));
    assert_eq!(runs, 1);
    // A cursor's read from a remembered place: a failure after a split means "go down".
    let structure = pool.structure_seq();
    let failed = || Err::<u32, _>(ReadError::<String>::Page(BufferError::Unreadable { pid: 3 }));
    assert!(moved_or(&pool, structure, failed()).is_err());
    assert_eq!(moved_or(&pool, structure, Ok::<u32, ReadError<String>>(4)).ok(), Some(Some(4)));
    drop(pool.change_structure());
    assert_eq!(moved_or(&pool, structure, failed()).ok(), Some(None));
}
