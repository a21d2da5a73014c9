//! Critical Galton-Watson trees as in Avis & Devroye, Section 6, defined bit-exactly so that
//! anyone can reproduce a count (see README, "gw, bit-exactly").
//!
//! Offspring law for Δ ≥ 3: p_i = 1/(iΔ) for i = 1..Δ and p_0 = 1 − Σ p_i; for Δ = 2 it is
//! (1/3, 1/3, 1/3). Either way the mean is 1 (critical), so trees are finite but their size has a
//! heavy tail: most seeds give small trees, a few give enormous ones.

use bts_worker::Tree;
use clap::Parser;
use serde::{Deserialize, Serialize};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Options of `bts run gw`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "gw",
    no_binary_name = true,
    allow_negative_numbers = true,
    about = "A critical Galton-Watson tree (Avis & Devroye, Section 6)"
)]
pub struct GwArgs {
    /// Maximum number of children Δ (2 to 1,000,000).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub delta: u32,
    /// Seed of the tree (sizes vary wildly: seed 656 gives 1,768,787 nodes with Δ = 10, seed
    /// 119440 gives 112,154,163, most seeds a handful).
    #[arg(long)]
    pub seed: u64,
}

impl GwArgs {
    pub fn build(&self) -> Gw {
        Gw::new(self.delta, self.seed)
    }
}

/// A node: its random state.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GwNode(pub u64);

impl std::fmt::Debug for GwNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GwNode({:#018x})", self.0)
    }
}

/// A critical Galton-Watson tree.
#[derive(Clone)]
pub struct Gw {
    seed: u64,
    /// cdf[k] = p_0 + ... + p_k, summed in this order.
    cdf: Vec<f64>,
}

impl Gw {
    pub fn new(delta: u32, seed: u64) -> Self {
        assert!(delta >= 2, "gw needs delta >= 2");
        let d = delta as usize;
        let p: Vec<f64> = if d == 2 {
            vec![1.0 / 3.0; 3]
        } else {
            let tail: Vec<f64> = (1..=d).map(|i| 1.0 / ((i * d) as f64)).collect();
            let p0 = 1.0 - tail.iter().fold(0.0, |s, &x| s + x);
            std::iter::once(p0).chain(tail).collect()
        };
        let mut sum = 0.0;
        let cdf = p
            .iter()
            .map(|&x| {
                sum += x;
                sum
            })
            .collect();
        Gw { seed, cdf }
    }

    pub fn delta(&self) -> u32 {
        (self.cdf.len() - 1) as u32
    }

    pub fn num_children(&self, node: GwNode) -> u32 {
        let u = (mix(node.0 ^ 0xD1B5_4A32_D192_ED03) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        self.cdf.iter().position(|&f| u < f).unwrap_or(self.cdf.len() - 1) as u32
    }

    pub fn child(node: GwNode, j: u32) -> GwNode {
        GwNode(mix(node.0.wrapping_add(u64::from(j + 1).wrapping_mul(GOLDEN))))
    }
}

pub struct GwChildren {
    parent: GwNode,
    next: u32,
    count: u32,
}

impl Iterator for GwChildren {
    type Item = GwNode;

    fn next(&mut self) -> Option<GwNode> {
        if self.next == self.count {
            return None;
        }
        let child = Gw::child(self.parent, self.next);
        self.next += 1;
        Some(child)
    }
}

impl Tree for Gw {
    type Node = GwNode;
    type Children<'a> = GwChildren;

    fn root(&self) -> GwNode {
        GwNode(mix(self.seed))
    }

    fn children(&self, node: &GwNode, _depth: u32) -> GwChildren {
        GwChildren { parent: *node, next: 0, count: self.num_children(*node) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_matches_splitmix64_reference_outputs() {
        // SplitMix64 seeded with 1234567 yields these (Vigna's splitmix64.c); the generator's n-th
        // output is mix(seed + (n - 1) * golden).
        let seed = 1234567u64;
        let expected = [6457827717110365317u64, 3203168211198807973, 9817491932198370423];
        for (n, e) in expected.iter().enumerate() {
            assert_eq!(mix(seed.wrapping_add((n as u64).wrapping_mul(GOLDEN))), *e);
        }
    }

    #[test]
    fn offspring_law_is_critical() {
        for delta in [2, 3, 5, 10, 40] {
            let gw = Gw::new(delta, 0);
            let mut prev = 0.0;
            let mean: f64 = gw
                .cdf
                .iter()
                .enumerate()
                .map(|(k, &f)| {
                    let p = f - prev;
                    prev = f;
                    k as f64 * p
                })
                .sum();
            assert!((mean - 1.0).abs() < 1e-12, "delta {delta}: mean {mean}");
            assert!((gw.cdf[delta as usize] - 1.0).abs() < 1e-12);
        }
    }
}
