//! Speed targets of the core, measured side by side in one run (the machine is noisy: compare
//! ratios, not absolute times). Each measurement is the best of `BTS_BENCH_REPEAT` runs (default 2).
//! One-worker comparisons against a sequential yardstick are judged on CPU time (of every thread of
//! the run, and of child processes for the C loop), which other load on the machine barely moves;
//! wall times are printed beside it.
//!
//! ```text
//! cargo bench --bench core                    # everything (a few minutes)
//! cargo bench --bench core -- sequential      # or some of: sequential queens framework scaling rayon master memory policy monitor
//! ```

use bts::trees::{Gw, Preset, Uts, UtsNode};
use bts::{BudgetConfig, Run, RunOptions, SchedulerConfig, Summary, Tree};
use bts_master::{JobList, Order, Pending};
use bts_protocol::NodeBytes;
use std::time::Instant;

fn repeat() -> usize {
    std::env::var("BTS_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(2)
}

fn uts(preset: Preset) -> Uts {
    Uts::new(preset.params()).unwrap()
}

/// A gw tree of 112,154,163 nodes and depth 13,870 (the first seed of Δ = 10 above 10^8 nodes).
fn big_gw() -> Gw {
    Gw::new(GW_DELTA, GW_SEED)
}
const GW_DELTA: u32 = 10;
const GW_SEED: u64 = 119_440;

fn options(workers: usize, fixed: Option<u64>) -> RunOptions {
    let budget = match fixed {
        Some(b) => BudgetConfig { initial: b, fixed: true, ..BudgetConfig::default() },
        None => BudgetConfig::default(),
    };
    RunOptions { workers, scheduler: SchedulerConfig { budget, ..SchedulerConfig::default() }, ..RunOptions::default() }
}

fn run<T: Tree>(name: &str, tree: T, options: RunOptions) -> Summary {
    let finished = Run::new(name, tree).options(options).run(&mut std::io::sink()).expect("the run works");
    assert!(finished.summary.complete);
    finished.summary
}

/// Best (shortest) of `repeat()` runs.
fn best(mut f: impl FnMut() -> Summary) -> Summary {
    (0..repeat()).map(|_| f()).min_by(|a, b| a.elapsed_s.total_cmp(&b.elapsed_s)).unwrap()
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

/// The yardstick of one worker is the faster of two sequential UTS searches. This one: a plain
/// stack of (state, depth), and at each node all its children's states computed back to back (the
/// reference implementation's order: independent SHA-1 compressions, which the CPU overlaps).
fn eager_uts_loop(tree: &Uts) -> u64 {
    let mut stack = vec![(tree.root(), 0u32)];
    let mut nodes = 0u64;
    while let Some((node, depth)) = stack.pop() {
        nodes += 1;
        for i in 0..tree.num_children(&node, depth) {
            stack.push((tree.child(&node, i), depth + 1));
        }
    }
    nodes
}

/// Wall and CPU seconds of one measurement.
#[derive(Clone, Copy)]
struct Cost {
    wall: f64,
    cpu: f64,
}

impl Cost {
    fn show(self, nodes: u64) -> String {
        let ns = |t: f64| t * 1e9 / nodes as f64;
        format!("{:.3} s CPU ({:.2} ns a node), {:.3} s wall", self.cpu, ns(self.cpu), self.wall)
    }
}

/// CPU seconds used so far by every thread of this process and by its waited-for children.
fn cpu_seconds() -> f64 {
    let used = |who| {
        // SAFETY: getrusage writes a plain struct.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut u) };
        let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        s(u.ru_utime) + s(u.ru_stime)
    };
    used(libc::RUSAGE_SELF) + used(libc::RUSAGE_CHILDREN)
}

/// The cheapest (by CPU time) of `repeat()` measurements of `f`, which returns what it counted
/// (checked against `expected`).
fn best_cost(expected: u64, mut f: impl FnMut() -> u64) -> Cost {
    let mut best = Cost { wall: f64::MAX, cpu: f64::MAX };
    for _ in 0..repeat() {
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        assert_eq!(f(), expected);
        let cost = Cost { wall: wall.elapsed().as_secs_f64(), cpu: cpu_seconds() - cpu };
        if cost.cpu < best.cpu {
            best = cost;
        }
    }
    best
}

/// The cost of a complete run of `tree` with these options.
fn run_cost<T: Tree>(expected: u64, tree: impl Fn() -> T, options: RunOptions) -> Cost {
    best_cost(expected, || run("run", tree(), options.clone()).totals.nodes)
}

/// The other loop: a stack of the tree's children iterators, which compute siblings' states in
/// batches of four.
fn lazy_uts_loop(tree: &Uts) -> u64 {
    let mut stack = vec![tree.children(&tree.root(), 0)];
    let mut nodes = 1u64;
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(child) => {
                nodes += 1;
                let children = tree.children(&child, stack.len() as u32);
                stack.push(children);
            }
            None => {
                stack.pop();
            }
        }
    }
    nodes
}

fn sequential() {
    println!("## One worker against the fastest sequential UTS loop (T1L)");
    const T1L: u64 = 102_181_082;
    let tree = uts(Preset::T1L);
    let eager = best_cost(T1L, || eager_uts_loop(&tree));
    let lazy = best_cost(T1L, || lazy_uts_loop(&tree));
    println!("eager loop          {}", eager.show(T1L));
    println!("lazy loop           {}", lazy.show(T1L));
    let fastest = if eager.cpu <= lazy.cpu { eager } else { lazy };
    let one = run_cost(T1L, || uts(Preset::T1L), options(1, None));
    let ratio = fastest.cpu / one.cpu;
    println!("bts, 1 worker       {}", one.show(T1L));
    println!("speed ratio bts/loop = {ratio:.3} in CPU time  (target >= 0.95: {})", verdict(ratio >= 0.95));
    println!("                     {:.3} in wall time\n", fastest.wall / one.wall);
}

/// The N-queens tree of 15: 171,129,072 nodes (the empty board included), 2,279,184 solutions.
const QUEENS_15_NODES: u64 = 171_129_072;

fn queens() {
    println!("## One worker against a C bitboard backtracking loop (queens --n 15, --count-only)");
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("queens");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/queens.c");
    let compiled = std::process::Command::new("cc").args(["-O2", "-o"]).arg(&exe).arg(source).status();
    assert!(compiled.is_ok_and(|s| s.success()), "cannot compile {source} with cc");
    let c = best_cost(QUEENS_15_NODES, || {
        let out = std::process::Command::new(&exe).arg("15").output().unwrap();
        String::from_utf8(out.stdout).unwrap().split(' ').next().unwrap().parse().unwrap()
    });
    let count_only = |workers| RunOptions { count_only: true, ..options(workers, None) };
    let one = run_cost(QUEENS_15_NODES, || bts::trees::Queens::new(15), count_only(1));
    let ratio = c.cpu / one.cpu;
    println!("C bitboard loop     {}", c.show(QUEENS_15_NODES));
    println!("bts, 1 worker       {}", one.show(QUEENS_15_NODES));
    println!("speed ratio bts/C = {ratio:.3} in CPU time  (target >= 0.6: {})", verdict(ratio >= 0.6));
    println!("                    {:.3} in wall time", c.wall / one.wall);
    let polling = RunOptions {
        mode: bts::RunMode::Polling { split: bts::SplitRule::default(), start: bts::PollingStart::Selective },
        ..count_only(2)
    };
    let queens = || bts::trees::Queens::new(15);
    let budget_two = run_cost(QUEENS_15_NODES, queens, count_only(2));
    let polling_two = run_cost(QUEENS_15_NODES, queens, polling);
    println!("2 workers, budget mode      {}", budget_two.show(QUEENS_15_NODES));
    println!("2 workers, random polling   {}", polling_two.show(QUEENS_15_NODES));
    println!(
        "polling / budget = {:.3} in CPU time, {:.3} in wall time\n",
        polling_two.cpu / budget_two.cpu,
        polling_two.wall / budget_two.wall
    );
}

/// The complete k-ary tree of height `h`, nodes numbered in heap order: an oracle that costs
/// nothing, so that a run measures the framework around it.
struct Complete {
    k: u64,
    h: u32,
}

impl Complete {
    fn size(&self) -> u64 {
        (self.k.pow(self.h + 1) - 1) / (self.k - 1)
    }
}

impl Tree for Complete {
    type Node = u64;
    type Children<'a> = std::ops::Range<u64>;
    fn root(&self) -> u64 {
        0
    }
    #[inline]
    fn children(&self, node: &u64, depth: u32) -> std::ops::Range<u64> {
        if depth < self.h { node * self.k + 1..node * self.k + 1 + self.k } else { 0..0 }
    }
}

/// A bare depth-first loop over the same tree: a stack of child ranges.
fn bare_loop(tree: &Complete) -> u64 {
    let mut stack = vec![tree.children(&0, 0)];
    let mut nodes = 1u64;
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(child) => {
                nodes += 1;
                let depth = stack.len() as u32;
                let children = tree.children(&child, depth);
                stack.push(children);
            }
            None => {
                stack.pop();
            }
        }
    }
    std::hint::black_box(nodes)
}

fn framework() {
    println!("## The framework's cost per node: a near-free oracle (complete 4-ary tree of height 13)");
    let tree = Complete { k: 4, h: 13 };
    let n = tree.size();
    let bare = best_cost(n, || bare_loop(&tree));
    let one = run_cost(n, || Complete { k: 4, h: 13 }, options(1, None));
    let ns = |t: f64| t * 1e9 / n as f64;
    println!("bare loop           {}", bare.show(n));
    println!("bts, 1 worker       {}", one.show(n));
    println!("framework cost: {:.2} ns a node of CPU time\n", ns(one.cpu) - ns(bare.cpu));
}

fn scaling() {
    println!("## Two local workers against one");
    for (name, preset) in [("T1L", Preset::T1L), ("T3L", Preset::T3L)] {
        let one = best(|| run(name, uts(preset), options(1, None)));
        let two = best(|| run(name, uts(preset), options(2, None)));
        let ratio = one.elapsed_s / two.elapsed_s;
        println!(
            "{name}: 1 worker {:.3} s, 2 workers {:.3} s, speed-up {ratio:.3}  (target >= 1.9: {})",
            one.elapsed_s,
            two.elapsed_s,
            verdict(ratio >= 1.9)
        );
    }
    println!();
}

/// Fork-join over rayon, the way a user would parallelise a tree without bts: every node's children
/// are counted in parallel tasks, on threads with stacks big enough for T3L's deep chains.
fn rayon_count(tree: &Uts, node: UtsNode, depth: u32) -> u64 {
    use rayon::prelude::*;
    let children: Vec<UtsNode> = tree.children(&node, depth).collect();
    1 + children.into_par_iter().map(|c| rayon_count(tree, c, depth + 1)).sum::<u64>()
}

fn rayon() {
    println!("## Two local workers against rayon fork-join on 2 threads (1 GiB stacks)");
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).stack_size(1 << 30).build().unwrap();
    for (name, preset, nodes) in [("T1L", Preset::T1L, 102_181_082), ("T3L", Preset::T3L, 111_345_631)] {
        let tree = uts(preset);
        let forked = best_cost(nodes, || pool.install(|| rayon_count(&tree, tree.root(), 0)));
        let two = run_cost(nodes, || uts(preset), options(2, None));
        println!(
            "{name}: rayon {:.3} s, bts {:.3} s (wall): bts {:.3}x faster{}",
            forked.wall,
            two.wall,
            forked.wall / two.wall,
            if name == "T3L" {
                format!("  (target >= 1.5: {})", verdict(forked.wall / two.wall >= 1.5))
            } else {
                String::new()
            }
        );
    }
    println!();
}

fn master() {
    println!("## Master capacity: --budget 1 --fixed-budget, every node a job, 2 local workers (T1)");
    let s = best(|| run("T1", uts(Preset::T1), options(2, Some(1))));
    let rate = s.totals.jobs as f64 / s.elapsed_s;
    println!(
        "{} jobs in {:.3} s: {:.0} jobs/s  (target >= 300,000: {})\n",
        s.totals.jobs,
        s.elapsed_s,
        rate,
        verdict(rate >= 300_000.0)
    );
}

fn memory() {
    println!("## Memory of the job list");
    let tree = uts(Preset::T1L);
    let mut list = JobList::new(Order::Lifo);
    let mut node = tree.root();
    let n = 1_000_000;
    let nodes: Vec<Pending> = (0..n)
        .map(|i| {
            node = tree.children(&node, 1).next().unwrap_or_else(|| tree.root());
            let bytes = postcard::to_allocvec(&node).unwrap();
            Pending { depth: (i % 13) as u32, node: NodeBytes::from_slice(&bytes) }
        })
        .collect();
    list.extend_dfs(nodes);
    let per_job = list.memory_bytes() as f64 / list.len() as f64;
    println!(
        "{} UTS jobs (20-byte nodes, stored inline): {:.1} bytes per queued job (slot: {} bytes, the rest is spare capacity)",
        list.len(),
        per_job,
        std::mem::size_of::<Pending>()
    );
    let s = run("T1L", uts(Preset::T1L), options(2, None));
    println!("T1L with 2 workers: at most {} jobs queued at once\n", s.max_queued);
}

/// A tree whose nodes cost `cost` of busy CPU each (a stand-in for an expensive oracle).
struct Slow<T> {
    tree: T,
    cost: std::time::Duration,
}

impl<T: Tree> Tree for Slow<T> {
    type Node = T::Node;
    type Children<'a> = T::Children<'a>;
    fn root(&self) -> T::Node {
        self.tree.root()
    }
    fn children<'a>(&'a self, node: &T::Node, depth: u32) -> T::Children<'a> {
        let started = Instant::now();
        while started.elapsed() < self.cost {
            std::hint::spin_loop();
        }
        self.tree.children(node, depth)
    }
}

/// A balanced binary tree of 4095 nodes (UTS type 3) at 1 ms a node.
fn slow_tree() -> Slow<Uts> {
    let params =
        bts::trees::UtsParams { tree_type: bts::trees::UtsType::Balanced, b0: 2.0, gen_mx: 11, ..Default::default() };
    Slow { tree: Uts::new(params).unwrap(), cost: std::time::Duration::from_millis(1) }
}

fn policy() {
    println!("## The default budget policy against fixed budgets (2 workers)");
    type Case = (&'static str, Vec<u64>, Box<dyn Fn(RunOptions) -> Summary>);
    let fast = vec![1_000u64, 10_000, 100_000, 1_000_000, 10_000_000];
    let cases: Vec<Case> = vec![
        ("T1L", fast.clone(), Box::new(|o| run("T1L", uts(Preset::T1L), o))),
        ("T3L", fast.clone(), Box::new(|o| run("T3L", uts(Preset::T3L), o))),
        ("gw", fast, Box::new(|o| run("gw", big_gw(), o))),
        ("slow (1 ms a node)", vec![1, 4, 16, 64, 256], Box::new(|o| run("slow", slow_tree(), o))),
    ];
    for (name, budgets, f) in cases {
        let default = best(|| f(options(2, None)));
        let mut line = format!("{name}: default {:.3} s (b -> {})", default.elapsed_s, default.budget.last);
        let mut best_fixed = (f64::MAX, 0);
        for &b in &budgets {
            let s = best(|| f(options(2, Some(b))));
            line += &format!(", b={b} {:.3} s", s.elapsed_s);
            if s.elapsed_s < best_fixed.0 {
                best_fixed = (s.elapsed_s, b);
            }
        }
        let ratio = default.elapsed_s / best_fixed.0;
        println!("{line}");
        println!(
            "{name}: default / best fixed (b={}) = {ratio:.3}  (target <= 1.10: {})",
            best_fixed.1,
            verdict(ratio <= 1.10)
        );
    }
    println!();
}

fn monitor() {
    println!(
        "## The cost of watching a run: progress, history, job sizes and remaining-work estimates (T1L, 2 workers)"
    );
    let dir = tempfile::tempdir().unwrap();
    let watched = || {
        let mut o = options(2, None);
        o.monitor = bts::MonitorOptions {
            progress: bts::ProgressMode::Auto,
            hist: Some(dir.path().join("hist.csv")),
            freq: Some(dir.path().join("freq.txt")),
        };
        o
    };
    let (mut plain, mut with) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        plain = plain.min(run("T1L", uts(Preset::T1L), options(2, None)).elapsed_s);
        with = with.min(run("T1L", uts(Preset::T1L), watched()).elapsed_s);
    }
    let cost = (with / plain - 1.0) * 100.0;
    println!("plain {plain:.3} s, watched {with:.3} s: cost {cost:+.2}%  (target < 1%: {})\n", verdict(cost < 1.0));
}

fn main() {
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |p: &str| parts.is_empty() || parts.iter().any(|a| a == p);
    let started = Instant::now();
    if wanted("sequential") {
        sequential();
    }
    if wanted("queens") {
        queens();
    }
    if wanted("framework") {
        framework();
    }
    if wanted("scaling") {
        scaling();
    }
    if wanted("rayon") {
        rayon();
    }
    if wanted("master") {
        master();
    }
    if wanted("memory") {
        memory();
    }
    if wanted("policy") {
        policy();
    }
    if wanted("monitor") {
        monitor();
    }
    println!("(benchmark took {:.0} s)", started.elapsed().as_secs_f64());
}
