#![no_main]
//! Fuzz target `block_header`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("block_header", data));
