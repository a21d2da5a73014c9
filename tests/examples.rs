//! The examples' trees through the public library API, against counts known independently.

#[allow(dead_code)]
#[path = "../examples/bnb.rs"]
mod bnb;
#[path = "../examples/linear_extensions/tree.rs"]
mod linear_extensions;
#[allow(dead_code)]
#[path = "../examples/readme.rs"]
mod readme;
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

/// A grid too large is refused at once (one of 10^10 elements once filled the memory first).
#[test]
fn a_grid_too_large_is_refused_before_it_is_built() {
    for (rows, cols) in [(100_000, 100_000), (usize::MAX, 2), (9, 8), (0, 3)] {
        let refused = LinearExtensions::grid(rows, cols).err().unwrap();
        assert!(refused.starts_with("the order needs 1 to 64 elements"), "{refused}");
    }
    assert!(LinearExtensions::grid(8, 8).is_ok());
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

#[test]
fn every_rust_snippet_of_the_readme_is_in_the_compiled_example() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/readme.rs")).unwrap();
    let bnb = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/bnb.rs")).unwrap();
    let snippets: Vec<&str> = readme.split("```rust\n").skip(1).map(|rest| rest.split("```").next().unwrap()).collect();
    assert_eq!(snippets.len(), 5, "the README's Rust snippets");
    for snippet in &snippets[..3] {
        assert!(example.contains(snippet), "examples/readme.rs lacks this README snippet:\n{snippet}");
    }
    for snippet in &snippets[3..] {
        assert!(bnb.contains(snippet), "examples/bnb.rs lacks this README branch-and-bound snippet:\n{snippet}");
    }
}

#[test]
fn the_readme_branch_and_bound_finds_the_best_subset() {
    let items = vec![31, 41, 59, 26, 53, 58, 97, 93, 23, 84, 62, 64, 33, 83, 27, 95, 2, 88];
    for capacity in [0, 1, 100, 500, 777, 2000] {
        // Every subset's sum, by brute force.
        let sums = (0u32..1 << items.len())
            .map(|set| (0..items.len()).filter(|&i| set >> i & 1 == 1).map(|i| items[i]).sum::<i64>());
        let expected = sums.filter(|&s| s <= capacity).max().unwrap();
        let best = bnb::best(items.clone(), capacity).unwrap().unwrap();
        assert_eq!(best.value, expected, "capacity {capacity}");
        let by_recursion = bnb::best_by_recursion(items.clone(), capacity).unwrap().unwrap();
        assert_eq!(by_recursion.value, expected, "capacity {capacity}, by recursion");
        let record = String::from_utf8(best.records[0].clone()).unwrap();
        assert!(record.starts_with(&format!("sum {expected} items [")), "{record}");
    }
}

#[test]
fn the_readme_library_snippet_runs() {
    assert_eq!(readme::count().unwrap(), 1 << 16);
}

#[test]
fn a_plain_clap_derive_gives_a_tree_the_command_line() {
    use bts::cli::Exit;
    let mut registry = bts::Registry::builtin();
    registry.register::<readme::SubsetsArgs, _>("subsets", |args| Ok(readme::Subsets { n: args.n }));
    // One line per tree: its name, padded to the longest, then its description.
    let described = |name: &str, about: &str| {
        registry.describe().lines().any(|l| l.trim_start().strip_prefix(name).is_some_and(|r| r.trim_start() == about))
    };
    assert!(described("subsets", "The subsets of {0, ..., n-1}"), "{}", registry.describe());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let args = ["mytree", "run", "--progress", "never", "--count-only", "--summary-json"];
    let args = args.iter().copied().chain([json.to_str().unwrap(), "subsets", "--n", "16"]);
    assert_eq!(bts::cli::run(&registry, args.map(Into::into)), Exit::Complete);
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(summary["nodes"], 1 << 16);
    let help = registry.build(&bts::TreeSpec::new("subsets", ["--help"]));
    match help {
        Err(bts::BuildError::Help(text)) => assert!(text.contains("Usage: bts run subsets"), "{text}"),
        _ => panic!("no help"),
    }
    // Without a description, `bts trees` says so rather than show nothing.
    #[derive(clap::Parser)]
    struct Bare {
        #[arg(long)]
        n: u32,
    }
    registry.register::<Bare, _>("bare", |a| Ok(readme::Subsets { n: a.n }));
    let described = |name: &str, about: &str| {
        registry.describe().lines().any(|l| l.trim_start().strip_prefix(name).is_some_and(|r| r.trim_start() == about))
    };
    assert!(described("bare", "(no description)"), "{}", registry.describe());
}

#[test]
fn the_reverse_search_example_shows_its_help_instead_of_running() {
    use clap::Parser;
    let help = reverse_search::Args::try_parse_from(["reverse_search", "--help"]).err().unwrap();
    assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    assert_eq!(reverse_search::Args::try_parse_from(["reverse_search"]).unwrap().n, 8);
    assert!(reverse_search::Args::try_parse_from(["reverse_search", "x"]).is_err());
}
