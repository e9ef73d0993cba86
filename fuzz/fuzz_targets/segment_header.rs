#![no_main]
//! Fuzz target `segment_header`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("segment_header", data));
