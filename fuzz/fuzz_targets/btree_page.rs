#![no_main]
//! Fuzz target `btree_page`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("btree_page", data));
