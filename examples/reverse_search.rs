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

/// The permutations of n elements, enumerated by reverse search
#[derive(clap::Parser)]
pub struct Args {
    /// Elements to permute
    #[arg(default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=20))]
    pub n: u8,
}

fn main() {
    let n = <Args as clap::Parser>::parse().n as usize;
    let run = Run::new("permutations", Adjacency(Permutations { n })).options(RunOptions::default());
    let finished = run.run(&mut std::io::sink()).expect("the run works");
    println!(
        "{} permutations of {n} elements ({} leaves)",
        finished.summary.totals.nodes,
        finished.summary.totals.leaves.unwrap()
    );
}
