#![no_main]
//! Fuzz target `slotted_page`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("slotted_page", data));
