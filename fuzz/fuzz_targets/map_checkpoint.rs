#![no_main]
//! Fuzz target `map_checkpoint`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("map_checkpoint", data));
