//! Reverse search in the adjacency-oracle form of Avis & Devroye: the permutations of 0..n.
//!
//! The graph: permutations, adjacent when they differ by swapping two neighbouring entries, so
//! `Adj(v, j)` swaps positions j and j+1 (Δ = n − 1). The local search f sorts one step, swapping
//! the leftmost descent; its target is the identity, the root. The reverse-search tree keeps
//! neighbour u = Adj(v, j) as a child of v exactly when f(u) = v.
//!
//! ```text
//! cargo run --release --example reverse_search -- 9
//! ```

use bts::{Adjacency, AdjacencyOracle, Run, RunOptions};

pub struct Permutations {
    pub n: usize,
}

/// f: swap the leftmost descent (None at the identity).
fn local_search(v: &[u8]) -> Option<Vec<u8>> {
    let i = v.windows(2).position(|w| w[0] > w[1])?;
    let mut u = v.to_vec();
    u.swap(i, i + 1);
    Some(u)
}

impl AdjacencyOracle for Permutations {
    type Node = Vec<u8>;

    fn root(&self) -> Vec<u8> {
        (0..self.n as u8).collect()
    }

    fn max_degree(&self) -> usize {
        self.n.saturating_sub(1)
    }

    fn adj(&self, v: &Vec<u8>, j: usize) -> Option<Vec<u8>> {
        let mut u = v.clone();
        u.swap(j, j + 1);
        (local_search(&u).as_ref() == Some(v)).then_some(u)
    }
}

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(8);
    let run = Run::new("permutations", Adjacency(Permutations { n })).options(RunOptions::default());
    let finished = run.run(&mut std::io::sink()).expect("the run works");
    println!(
        "{} permutations of {n} elements ({} leaves)",
        finished.summary.totals.nodes,
        finished.summary.totals.leaves.unwrap()
    );
}
