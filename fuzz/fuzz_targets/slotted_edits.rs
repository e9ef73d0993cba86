#![no_main]
//! Fuzz target `slotted_edits`: see `tierkv::fuzzing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv::fuzzing::run("slotted_edits", data));
