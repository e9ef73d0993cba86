#![no_main]
//! Fuzz target `store_dir`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("store_dir", data));
