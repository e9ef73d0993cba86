use super::*;

#[test]
fn the_memtables_come_out_of_the_cache_size() {
    let options = Options::default();
    assert_eq!(options.write_buffer_bytes(), 32 << 20, "an eighth of 256 MiB");
    assert_eq!(options.page_cache_bytes(), 192 << 20, "256 MiB less two memtables");
    let small = Options { cache_size: 32 << 20, ..Options::default() };
    assert_eq!((small.write_buffer_bytes(), small.page_cache_bytes()), (4 << 20, 24 << 20));
    let huge = Options { cache_size: 64 << 30, ..Options::default() };
    assert_eq!(huge.write_buffer_bytes(), 64 << 20, "the default stops at 64 MiB");
    let set = Options { write_buffer_size: Some(1 << 20), ..small };
    assert_eq!((set.write_buffer_bytes(), set.page_cache_bytes()), (1 << 20, 30 << 20));
    assert!(set.validate().is_ok());
}

#[test]
fn memtables_that_leave_too_little_for_pages_are_refused() {
    let options =
        Options { cache_size: 1 << 20, write_buffer_size: Some(512 << 10), ..Options::default() };
    let error = options.validate().expect_err("no room for pages");
    assert!(matches!(error, Error::InvalidOptions(_)), "{error}");
    assert!(error.to_string().contains("16 pages"), "{error}");
    let tiny = Options { write_buffer_size: Some(1 << 10), ..Options::default() };
    assert!(tiny.validate().expect_err("too small").to_string().contains("64 KiB"));
    // The default write buffer of a small cache leaves room for pages.
    assert!(Options { cache_size: 1 << 20, ..Options::default() }.validate().is_ok());
}
