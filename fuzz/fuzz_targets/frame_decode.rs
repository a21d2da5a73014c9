//! The frame and message decoder must never panic on what a peer sends, however it is cut into
//! reads: the first byte of the input says where to cut, the rest is the stream.
#![no_main]

use bts_protocol::codec::FrameDecoder;
use bts_protocol::{MasterFrame, WorkerFrame};
use libfuzzer_sys::fuzz_target;

fn drain<T: serde::de::DeserializeOwned>(stream: &[u8], cut: usize) {
    let mut decoder = FrameDecoder::new();
    for part in [&stream[..cut], &stream[cut..]] {
        decoder.feed(part);
        while let Ok(Some(_)) = decoder.decode::<T>() {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else { return };
    let cut = (first as usize).min(stream.len());
    drain::<WorkerFrame>(stream, cut);
    drain::<MasterFrame>(stream, cut);
});
