//! libFuzzer entry for the `initiator` harness (see crates/ironlun-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ironlun_fuzz::initiator(data);
});
