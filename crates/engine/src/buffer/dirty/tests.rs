use super::*;

/// Bits set across chunks and middle tables read back in order, clear one at a time, and
/// the map counts only the tables it made.
#[test]
fn dirty_bits_across_tables_read_back_ascending_and_count_what_they_make() {
    let pages = 1u64 << 31;
    let map = DirtyMap::new(pages);
    let empty = map.bytes();
    assert!(empty < 4096, "{empty} bytes before any page is dirty");
    let pids = [0, 63, 64, CHUNK_PIDS - 1, CHUNK_PIDS, CHUNK_PIDS * FANOUT as u64 + 5, pages - 1];
    for &pid in pids.iter().rev() {
        map.set(pid);
        map.set(pid);
    }
    assert_eq!(map.pages(), pids);
    assert!(pids.iter().all(|&pid| map.is_set(pid)) && !map.is_set(65));
    let made = map.bytes() - empty;
    // Chunks 0, 1, 256 and the last; middle tables 0, 1 and the last.
    assert_eq!(made, 3 * FANOUT * size_of::<OnceLock<Chunk>>() + 4 * (CHUNK_PIDS / 8) as usize);
    assert!(map.clear(64) && !map.clear(64) && !map.clear(12345));
    assert_eq!(map.pages().len(), pids.len() - 1);
    assert!(!map.clear(pages + 1_000_000), "past the map: nothing to clear");
}
