//! libFuzzer entry for the `config_files` harness (see crates/ironlun-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ironlun_fuzz::config_files(data);
});
