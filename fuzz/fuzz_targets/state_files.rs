//! libFuzzer entry for the `state_files` harness (see crates/ironlun-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ironlun_fuzz::state_files(data);
});
