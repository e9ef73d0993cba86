#![no_main]
//! Fuzz target `meta_block`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("meta_block", data));
