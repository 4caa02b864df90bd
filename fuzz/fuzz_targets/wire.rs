//! libFuzzer entry for the `wire` harness (see crates/ironlun-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ironlun_fuzz::wire(data);
});
