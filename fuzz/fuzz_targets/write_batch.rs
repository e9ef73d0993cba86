#![no_main]
//! Fuzz target `write_batch`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("write_batch", data));
