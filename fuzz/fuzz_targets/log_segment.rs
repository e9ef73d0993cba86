#![no_main]
//! Fuzz target `log_segment`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("log_segment", data));
