#![no_main]
//! Fuzz target `log_record`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("log_record", data));
