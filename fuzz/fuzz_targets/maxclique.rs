//! A DIMACS graph is read as `bts run maxclique --graph` reads it without a panic; one accepted
//! has at most 2^16 vertices and, when small, a root with a child for each vertex.
#![no_main]

use bts_trees::{MaxClique, MaxCliqueArgs};
use bts_worker::Tree;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let graph = std::env::temp_dir().join(format!("bts-fuzz-maxclique-{}", std::process::id()));
    std::fs::write(&graph, data).unwrap();
    let built = MaxCliqueArgs { graph }.build();
    let Ok(text) = std::str::from_utf8(data) else {
        assert!(built.is_err());
        return;
    };
    assert_eq!(built.is_ok(), MaxClique::parse(text).is_ok());
    let Ok(g) = built else { return };
    assert!(g.vertices() <= 1 << 16);
    if g.vertices() <= 512 {
        assert_eq!(g.children(&g.root(), 0).count(), g.vertices());
    }
});
