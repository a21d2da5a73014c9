//! A knapsack file is read as `bts run knapsack --file` reads it (UTF-8 check, parse, limits) without
//! a panic; one accepted is within the documented limits, and its Dantzig bounds hold at the root.
#![no_main]

use bts_trees::{KnapsackArgs, WideKnapsack};
use bts_worker::{Optimise, Tree};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let file = std::env::temp_dir().join(format!("bts-fuzz-knapsack-{}", std::process::id()));
    std::fs::write(&file, data).unwrap();
    let searcher = KnapsackArgs { file }.searcher();
    let Ok(text) = std::str::from_utf8(data) else {
        assert!(searcher.is_err());
        return;
    };
    let knapsack = WideKnapsack::parse(text);
    assert_eq!(searcher.is_ok(), knapsack.is_ok(), "{:?}", searcher.err());
    let Ok(knapsack) = knapsack else { return };
    assert!(knapsack.len() <= 1 << 16);
    // No sum of 2^16 items of at most 2^40 can overflow, and no child exceeds its parent's bound.
    let root = knapsack.root();
    let bound = knapsack.bound(&root, 0);
    assert!((0..=1 << 56).contains(&bound), "{bound}");
    for child in knapsack.children(&root, 0) {
        assert!(knapsack.value(&child, 1).unwrap() <= bound);
        assert!(knapsack.bound(&child, 1) <= bound);
    }
});
