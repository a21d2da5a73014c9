//! Built-in trees against published and independently computed counts.

use bts_trees::{Gw, GwNode, Preset, Queens, Uts};
use bts_worker::{Limits, Tree, search};

/// Sequential count: (nodes, max depth, leaves, outputs).
fn count<T: Tree>(tree: &T) -> (u64, u32, u64, u64) {
    let mut out = String::new();
    let stats = search(tree, tree.root(), 0, Limits::UNLIMITED, &mut out, &mut |_, _| unreachable!());
    (stats.visited, stats.max_depth, stats.leaves, stats.outputs)
}

/// The sample trees' statistics as published with the UTS benchmark (`sample_trees.sh` of the UTS
/// distribution, https://sourceforge.net/projects/uts-benchmark/): nodes, depth, leaves.
const PUBLISHED: [(Preset, u64, u32, u64); 5] = [
    (Preset::T1, 4_130_071, 10, 3_305_118),
    (Preset::T2, 4_117_769, 81, 2_342_762),
    (Preset::T3, 4_112_897, 1572, 3_599_034),
    (Preset::T4, 4_132_453, 134, 3_108_986),
    (Preset::T5, 4_147_582, 20, 2_181_318),
];

#[test]
fn uts_sample_trees_match_the_published_counts() {
    for (preset, nodes, depth, leaves) in PUBLISHED {
        let uts = Uts::new(preset.params()).unwrap();
        let (n, d, l, _) = count(&uts);
        assert_eq!((n, d, l), (nodes, depth, leaves), "{preset:?}");
    }
}

/// The gw definition of the README written out again, independently of the crate: the
/// number of nodes of the tree, or None beyond `cap` nodes.
fn gw_brute_force(delta: u64, seed: u64, cap: u64) -> Option<(u64, u32, u64)> {
    fn splitmix_finaliser(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9E3779B97F4A7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    let probs: Vec<f64> = if delta == 2 {
        vec![1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]
    } else {
        let mut tail_sum = 0.0;
        for i in 1..=delta {
            tail_sum += 1.0 / (i as f64 * delta as f64);
        }
        let mut p = vec![1.0 - tail_sum];
        p.extend((1..=delta).map(|i| 1.0 / (i as f64 * delta as f64)));
        p
    };
    let children_of = |s: u64| -> u64 {
        let u = (splitmix_finaliser(s ^ 0xD1B54A32D192ED03) >> 11) as f64 / 9007199254740992.0;
        let mut f = 0.0;
        for (k, p) in probs.iter().enumerate() {
            f += p;
            if u < f {
                return k as u64;
            }
        }
        delta
    };
    let (mut nodes, mut max_depth, mut leaves) = (0u64, 0u32, 0u64);
    let mut pending = vec![(splitmix_finaliser(seed), 0u32)];
    while let Some((s, depth)) = pending.pop() {
        nodes += 1;
        if nodes > cap {
            return None;
        }
        max_depth = max_depth.max(depth);
        let k = children_of(s);
        if k == 0 {
            leaves += 1;
        }
        for j in 0..k {
            pending.push((splitmix_finaliser(s.wrapping_add((j + 1).wrapping_mul(0x9E3779B97F4A7C15))), depth + 1));
        }
    }
    Some((nodes, max_depth, leaves))
}

#[test]
fn gw_matches_an_independent_brute_force_count() {
    let mut big = 0;
    for delta in [2u32, 3, 5, 10, 40] {
        for seed in 0..200u64 {
            let Some((nodes, depth, leaves)) = gw_brute_force(delta as u64, seed, 200_000) else {
                continue;
            };
            if nodes > 1000 {
                big += 1;
            }
            let (n, d, l, _) = count(&Gw::new(delta, seed));
            assert_eq!((n, d, l), (nodes, depth, leaves), "delta {delta} seed {seed}");
        }
    }
    assert!(big >= 10, "too few sizeable trees ({big}) to mean anything");
}

#[test]
fn gw_root_and_children_follow_the_definition() {
    // The root state is mix(seed); mix(0) is the first output of SplitMix64 seeded with 0.
    let gw = Gw::new(3, 0);
    assert_eq!(gw.root(), GwNode(0xe220_a839_7b1d_cdaf));
}

/// Number of N-queens solutions, OEIS A000170.
const QUEENS_SOLUTIONS: [u64; 13] = [1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712];

/// Nodes of the N-queens backtracking tree, counted by a plain recursion written for this test.
fn queens_nodes(n: usize, placed: &mut Vec<usize>) -> u64 {
    let row = placed.len();
    let mut nodes = 1;
    if row == n {
        return nodes;
    }
    for col in 0..n {
        let safe = placed.iter().enumerate().all(|(r, &c)| c != col && row - r != col.abs_diff(c));
        if safe {
            placed.push(col);
            nodes += queens_nodes(n, placed);
            placed.pop();
        }
    }
    nodes
}

#[test]
fn queens_counts_solutions_and_nodes() {
    for n in 1..=13 {
        let (nodes, depth, _, outputs) = count(&Queens::new(n));
        assert_eq!(outputs, QUEENS_SOLUTIONS[n - 1], "solutions of {n}-queens");
        if n <= 10 {
            assert_eq!(nodes, queens_nodes(n, &mut Vec::new()), "nodes of {n}-queens");
        }
        assert!(depth as usize <= n);
    }
}

#[test]
fn queens_records_are_valid_boards_listed_once() {
    let queens = Queens::new(6);
    let mut out = String::new();
    search(&queens, queens.root(), 0, Limits::UNLIMITED, &mut out, &mut |_, _| unreachable!());
    let boards: Vec<Vec<usize>> = out.lines().map(|l| l.split(' ').map(|c| c.parse().unwrap()).collect()).collect();
    assert_eq!(boards.len(), 4);
    for b in &boards {
        assert_eq!(b.len(), 6);
        for r in 0..6 {
            for s in 0..r {
                assert!(b[r] != b[s] && r - s != b[r].abs_diff(b[s]), "{b:?} attacks");
            }
        }
    }
    let mut unique = boards.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4);
}
