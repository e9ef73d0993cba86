#![no_main]
//! Fuzz target `db_ops`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("db_ops", data));
