//! libFuzzer entry for the `login` harness (see crates/ironlun-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ironlun_fuzz::login(data);
});
