//! The checkpoint loader must refuse any bytes cleanly, and anything it accepts must survive an
//! encode-decode round trip unchanged (postcard accepts some non-canonical integers, so the bytes may
//! differ). Each input is tried as a whole file, and as the contents of a file with a
//! valid header and checksum, so that the fuzzer gets past the checksum into the decoder proper.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn check(file: &[u8]) {
    if let Ok(checkpoint) = bts_checkpoints::decode(file) {
        let again = bts_checkpoints::decode(&bts_checkpoints::encode(&checkpoint)).expect("re-encoded checkpoint loads");
        assert_eq!(format!("{again:?}"), format!("{checkpoint:?}"));
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut file = bts_checkpoints::MAGIC.to_vec();
    file.extend_from_slice(&bts_checkpoints::CURRENT_VERSION.to_le_bytes());
    file.extend_from_slice(&(data.len() as u64).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&file[8..20]);
    crc.update(data);
    file.extend_from_slice(&crc.finalize().to_le_bytes());
    file.extend_from_slice(data);
    check(&file);
});
