//! The examples' trees through the public library API, against counts known independently.

#[path = "../examples/linear_extensions/tree.rs"]
mod linear_extensions;
#[allow(dead_code)]
#[path = "../examples/reverse_search.rs"]
mod reverse_search;

use bts::{Adjacency, BudgetConfig, Order, Run, RunOptions, SchedulerConfig};
use linear_extensions::LinearExtensions;
use reverse_search::Permutations;

fn options(workers: usize, budget: u64, order: Order) -> RunOptions {
    RunOptions {
        workers,
        scheduler: SchedulerConfig {
            order,
            budget: BudgetConfig { initial: budget, fixed: true, ..BudgetConfig::default() },
            ..SchedulerConfig::default()
        },
        ..RunOptions::default()
    }
}

fn catalan(n: u64) -> u64 {
    (0..n).fold(1, |c, k| c * 2 * (2 * k + 1) / (k + 2))
}

fn factorial(n: u64) -> u64 {
    (1..=n).product()
}

#[test]
fn linear_extensions_of_a_2xn_grid_are_catalan_numbers() {
    for n in 1..=9 {
        for (workers, budget, order) in [(1, u64::MAX, Order::Lifo), (2, 7, Order::Lifo), (3, 1, Order::Fifo)] {
            let mut out = Vec::new();
            let tree = LinearExtensions::grid(2, n).unwrap();
            let finished = Run::new("linext", tree).options(options(workers, budget, order)).run(&mut out).unwrap();
            assert!(finished.summary.complete);
            assert_eq!(finished.summary.totals.outputs, catalan(n as u64), "2x{n}, {workers} workers, budget {budget}");
            // Every record is a distinct linear extension of the grid.
            let mut records: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
            records.sort();
            records.dedup();
            assert_eq!(records.len() as u64, catalan(n as u64));
        }
    }
}

#[test]
fn linear_extensions_of_an_antichain_are_all_permutations() {
    let finished = Run::new("linext", LinearExtensions::new(7, &[]).unwrap())
        .options(options(2, 50, Order::Lifo))
        .run(&mut std::io::sink())
        .unwrap();
    assert_eq!(finished.summary.totals.outputs, factorial(7));
    // One node per arrangement of every prefix: sum over k of 7!/(7-k)!.
    let nodes: u64 = (0..=7).map(|k| factorial(7) / factorial(7 - k)).sum();
    assert_eq!(finished.summary.totals.nodes, nodes);
}

#[test]
fn reverse_search_finds_every_permutation_once() {
    for n in 1..=8u64 {
        let finished = Run::new("perm", Adjacency(Permutations { n: n as usize }))
            .options(options(2, 13, Order::Lifo))
            .run(&mut std::io::sink())
            .unwrap();
        assert_eq!(finished.summary.totals.nodes, factorial(n), "n = {n}");
    }
}
