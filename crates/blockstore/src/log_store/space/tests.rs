use super::*;

#[test]
fn the_pool_merges_neighbours_and_fills_the_emptiest_segment_in_order() {
    let mut pool = Pool::default();
    // Segment 1: two separate 4 KiB holes. Segment 2: three adjacent ones, inserted out
    // of order, which merge into one 12 KiB extent.
    pool.insert(1, 4096, 4096);
    pool.insert(1, 16384, 4096);
    pool.insert(2, 12288, 4096);
    pool.insert(2, 4096, 4096);
    pool.insert(2, 8192, 4096);
    assert_eq!(pool.extents.get(&(2, 4096)), Some(&12288));
    assert_eq!(pool.extents.len(), 3);
    assert_eq!(pool.free.get(&2), Some(&12288));
    // The first takes go to segment 2 (the most free bytes), in offset order.
    assert_eq!(pool.take(4096), Some((2, 4096)));
    assert_eq!(pool.take(4096), Some((2, 8192)));
    assert_eq!(pool.take(4096), Some((2, 12288)));
    assert_eq!(pool.free.get(&2), None);
    // Then segment 1; a block larger than any extent gets none.
    assert_eq!(pool.take(8192), None);
    assert_eq!(pool.take(4096), Some((1, 4096)));
    assert_eq!(pool.remove_segment(1), 4096);
    assert_eq!(pool.take(64), None);
    assert!(pool.extents.is_empty() && pool.free.is_empty());
}

#[test]
fn a_take_splits_an_extent_and_leaves_the_rest() {
    let mut pool = Pool::default();
    pool.insert(5, 4096, 10_000 / 64 * 64);
    let total = 10_000 / 64 * 64;
    assert_eq!(pool.take(640), Some((5, 4096)));
    assert_eq!(pool.extents.get(&(5, 4096 + 640)), Some(&(total - 640)));
    assert_eq!(pool.free.get(&5), Some(&(total - 640)));
}
