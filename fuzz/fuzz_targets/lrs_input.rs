//! An lrs input file, as `bts run lrs` reads it before lrs sees it (its head, its options after the
//! matrix, its dimension, the rewrite of its `linearity`), never panics. The first byte names the
//! rows taken out of `linearity`; taking them out twice changes nothing more (of an input with one
//! declaration: the rewrite changes the first, and the next is then found).
#![no_main]

use bts_adapters::fuzzing::{dimension, header, read_options, without_linearities};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&rows, input)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(input);
    let _ = (header(&text), read_options(&text), dimension(&text));
    let redundant: Vec<usize> = (0..8).filter(|i| rows >> i & 1 == 1).map(|i| i + 1).collect();
    if let Some(rewritten) = without_linearities(input, &redundant) {
        let _ = header(&String::from_utf8_lossy(&rewritten));
        let declarations = input.windows(9).filter(|w| w == b"linearity").count();
        if let Some(twice) = without_linearities(&rewritten, &redundant).filter(|_| declarations == 1) {
            assert_eq!(twice, rewritten, "{:?}", String::from_utf8_lossy(input));
        }
    }
});
