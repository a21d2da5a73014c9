//! Branch and bound: bts against hand-written sequential branch and bounds with the same bounds
//! (maximum clique with a greedy colouring bound on bitsets, as MCS/BBMC; 0/1 knapsack with
//! Dantzig's bound), one and two workers side by side, and the delay with which a remote worker
//! learns of an improvement found by another.
//!
//! ```text
//! cargo bench --bench bnb                  # every part (a few minutes on 2 cores)
//! cargo bench --bench bnb -- speed         # or: delay; maxclique or knapsack (speed is both)
//! cargo bench --bench bnb -- knapsack 5    # five rounds in turn: each one's best, and the spread
//! cargo bench --bench bnb -- profile seq 100 1   # one small knapsack alone (seq or bts), to profile
//! ```

use bts::trees::{KnapsackOf, MaxCliqueArgs, Taken, Wide, knapsack_searcher};
use bts::{Run, RunOptions, Searcher, TreeSearcher, TreeSpec};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const BTS: &str = env!("CARGO_BIN_EXE_bts");

/// xorshift64*, so that instances are the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// G(n, p) from `seed`: its edges (0-based).
fn gnp(n: usize, p: f64, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    (0..n).flat_map(|u| (u + 1..n).map(move |v| (u, v))).filter(|_| rng.unit() < p).collect()
}

/// A strongly correlated knapsack: w uniform in 1..=r, v = w + r/10, capacity half the weight.
fn correlated(n: usize, r: u64, seed: u64) -> (u64, Vec<(u64, u64)>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    let items: Vec<(u64, u64)> = (0..n)
        .map(|_| {
            let w = 1 + rng.next() % r;
            (w + r / 10, w)
        })
        .collect();
    (items.iter().map(|i| i.1).sum::<u64>() / 2, items)
}

// ----- the sequential programs -----

/// MCS-style maximum clique: vertices by decreasing degree, greedy colouring, children highest
/// colour first, stop at the first whose size plus colour cannot beat the best.
struct SeqClique {
    words: usize,
    adj: Vec<u64>,
}

impl SeqClique {
    fn new(n: usize, edges: &[(usize, usize)]) -> Self {
        let mut degree = vec![0; n];
        for &(u, v) in edges {
            degree[u] += 1;
            degree[v] += 1;
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&v| (std::cmp::Reverse(degree[v]), v));
        let mut rank = vec![0; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v] = i;
        }
        let words = n.div_ceil(64);
        let mut adj = vec![0u64; n * words];
        for &(u, v) in edges {
            let (a, b) = (rank[u], rank[v]);
            adj[a * words + b / 64] |= 1 << (b % 64);
            adj[b * words + a / 64] |= 1 << (a % 64);
        }
        Self { words, adj }
    }

    fn solve(&self, n: usize) -> usize {
        let mut p = vec![0u64; self.words];
        for v in 0..n {
            p[v / 64] |= 1 << (v % 64);
        }
        let mut best = 0;
        self.expand(0, p, &mut best);
        best
    }

    fn expand(&self, size: usize, mut p: Vec<u64>, best: &mut usize) {
        // Colour p greedily.
        let mut order = Vec::new();
        let mut uncoloured = p.clone();
        let mut class = vec![0u64; self.words];
        let mut colour = 0;
        while uncoloured.iter().any(|&w| w != 0) {
            colour += 1;
            class.copy_from_slice(&uncoloured);
            while let Some(v) =
                class.iter().enumerate().find(|(_, w)| **w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
            {
                let row = &self.adj[v * self.words..(v + 1) * self.words];
                for (c, a) in class.iter_mut().zip(row) {
                    *c &= !a;
                }
                class[v / 64] &= !(1 << (v % 64));
                uncoloured[v / 64] &= !(1 << (v % 64));
                order.push((v, colour));
            }
        }
        while let Some((v, colour)) = order.pop() {
            if size + colour <= *best {
                return;
            }
            p[v / 64] &= !(1 << (v % 64));
            let row = &self.adj[v * self.words..(v + 1) * self.words];
            let child: Vec<u64> = p.iter().zip(row).map(|(c, a)| c & a).collect();
            *best = (*best).max(size + 1);
            self.expand(size + 1, child, best);
        }
    }
}

/// Depth-first 0/1 knapsack as one would write it by hand: items by density, the first item that
/// fits taken before left (the items before it, which do not fit, are left without a node of their
/// own), Dantzig's bound on each child, and the packing in one array, copied when it is the best.
struct SeqKnapsack {
    capacity: i64,
    items: Vec<(i64, i64)>,
    taken: Vec<bool>,
    best: i64,
    best_taken: Vec<bool>,
}

impl SeqKnapsack {
    fn new(capacity: u64, items: &[(u64, u64)]) -> Self {
        let mut items: Vec<(i64, i64)> = items.iter().map(|&(v, w)| (v as i64, w as i64)).collect();
        items.sort_by(|a, b| (b.0 as i128 * a.1 as i128).cmp(&(a.0 as i128 * b.1 as i128)));
        let taken = vec![false; items.len()];
        Self { capacity: capacity as i64, items, best_taken: taken.clone(), taken, best: -1 }
    }

    /// The optimum.
    fn solve(mut self) -> i64 {
        self.go(0, 0, 0);
        self.best
    }

    fn bound(&self, next: usize, value: i64, weight: i64) -> i64 {
        let (mut room, mut bound) = (self.capacity - weight, value);
        for &(v, w) in &self.items[next..] {
            if w > room {
                // A 64-bit division unless the product overflows (as bts's bound does).
                return bound
                    + match v.checked_mul(room) {
                        Some(product) => product / w,
                        None => (v as i128 * room as i128 / w as i128) as i64,
                    };
            }
            room -= w;
            bound += v;
        }
        bound
    }

    fn go(&mut self, next: usize, value: i64, weight: i64) {
        if value > self.best {
            self.best = value;
            self.best_taken.clone_from(&self.taken);
        }
        let room = self.capacity - weight;
        let Some(skipped) = self.items[next..].iter().position(|&(_, w)| w <= room) else { return };
        let i = next + skipped;
        let (v, w) = self.items[i];
        if self.bound(i + 1, value + v, weight + w) <= self.best {
            // Leaving the item has no greater bound (bts's knapsack says so too).
            return;
        }
        self.taken[i] = true;
        self.go(i + 1, value + v, weight + w);
        self.taken[i] = false;
        if self.bound(i + 1, value, weight) > self.best {
            self.go(i + 1, value, weight);
        }
    }
}

// ----- speed -----

/// CPU time of this process so far (all threads), in seconds: under load, wall time measures the
/// other users as much as the program.
fn cpu() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// A run's optimum, wall time and CPU time.
struct Timing {
    value: i64,
    wall: f64,
    cpu: f64,
}

fn timed(f: impl FnOnce() -> i64) -> Timing {
    let (started, cpu_before) = (Instant::now(), cpu());
    let value = f();
    Timing { value, wall: started.elapsed().as_secs_f64(), cpu: cpu() - cpu_before }
}

fn bts_run<T: bts::Optimise>(tree: T, workers: usize) -> Timing {
    bts_search(Arc::new(TreeSearcher::optimising(tree)), workers)
}

fn bts_search(searcher: Arc<dyn Searcher>, workers: usize) -> Timing {
    timed(|| {
        let options = RunOptions { workers, ..RunOptions::default() };
        let run = Run::with_searcher(TreeSpec::new("bench", Vec::<String>::new()), searcher);
        let finished = run.options(options).run(&mut std::io::sink()).unwrap();
        finished.summary.totals.best.unwrap().value
    })
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "?".into(), |l| l.split(' ').next().unwrap_or("?").into())
}

/// Runs the three side by side, `rounds` times in turn (so that load from elsewhere falls on all
/// three), and reports the best time of each. The sequential program against one worker by CPU
/// time (which the machine's other load does not inflate), two workers against one by wall time;
/// with more than one round, the range of the rounds' own ratios too.
fn compare(
    name: &str,
    rounds: usize,
    seq: impl Fn() -> i64 + Sync,
    one: impl Fn() -> Timing,
    two: impl Fn() -> Timing,
) {
    let before = load();
    let (mut s, mut a, mut b, mut pairs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        s.push(timed(&seq));
        a.push(one());
        b.push(two());
        pairs.push(timed(|| {
            let values = std::thread::scope(|scope| {
                let other = scope.spawn(&seq);
                [seq(), other.join().unwrap()]
            });
            assert_eq!(values[0], values[1], "{name}: optima differ");
            values[0]
        }));
    }
    let value = s[0].value;
    let values: Vec<i64> = s.iter().chain(&a).chain(&b).chain(&pairs).map(|t| t.value).collect();
    assert!(values.iter().all(|&v| v == value), "{name}: optima differ: {values:?}");
    let best = |runs: &[Timing], time: fn(&Timing) -> f64| runs.iter().map(time).fold(f64::INFINITY, f64::min);
    let (cpu, wall) = (|t: &Timing| t.cpu, |t: &Timing| t.wall);
    let spread = |ratio: &dyn Fn(usize) -> f64| {
        let (low, high) = (0..rounds).map(ratio).fold((f64::INFINITY, 0f64), |(l, h), r| (l.min(r), h.max(r)));
        if rounds > 1 { format!(" (rounds {low:.2}-{high:.2})") } else { String::new() }
    };
    // Two sequential programs at once do twice the work with no sharing at all: how much faster
    // than one that is, is as much as two cores of this host give any program.
    println!(
        "{name:<30} optimum {value:>6} | sequential {:>6.2} s cpu {:>6.2} s | 1 worker {:>6.2} s cpu {:>6.2} s | \
         2 workers {:>6.2} s cpu {:>6.2} s | two sequential at once {:>6.2} s | seq/1w cpu {:.2}{}, \
         2w/1w speed-up {:.2}{}, two cores' ceiling {:.2}{} (load {before} -> {}{})",
        best(&s, wall),
        best(&s, cpu),
        best(&a, wall),
        best(&a, cpu),
        best(&b, wall),
        best(&b, cpu),
        best(&pairs, wall),
        best(&s, cpu) / best(&a, cpu),
        spread(&|i| s[i].cpu / a[i].cpu),
        best(&a, wall) / best(&b, wall),
        spread(&|i| a[i].wall / b[i].wall),
        2.0 * best(&s, wall) / best(&pairs, wall),
        spread(&|i| 2.0 * s[i].wall / pairs[i].wall),
        load(),
        if rounds > 1 { format!(", best of {rounds} rounds") } else { String::new() }
    );
}

/// G(n, p) in DIMACS `.clq` form.
fn dimacs(n: usize, edges: &[(usize, usize)]) -> String {
    std::iter::once(format!("p edge {n} {}\n", edges.len()))
        .chain(edges.iter().map(|(u, v)| format!("e {} {}\n", u + 1, v + 1)))
        .collect()
}

/// bts runs the search that `bts run` builds, its code compiled in bts's crates: a tree's generic
/// search instantiated in this crate instead is laid out otherwise, and ran one knapsack up to a
/// fifth slower (2026-11-27).
fn cliques(rounds: usize) {
    println!("bts against sequential branch and bound (the same bounds), side by side:");
    let dir = tempfile::tempdir().unwrap();
    for (n, p, seed) in [(300, 0.7, 6), (200, 0.87, 4)] {
        let edges = gnp(n, p, seed);
        let name = format!("maxclique G({n}, {p}) #{seed}");
        let graph = dir.path().join(format!("g-{n}.clq"));
        std::fs::write(&graph, dimacs(n, &edges)).unwrap();
        let searcher = || MaxCliqueArgs { graph: graph.clone() }.searcher().unwrap();
        let seq = || SeqClique::new(n, &edges).solve(n) as i64;
        compare(&name, rounds, seq, || bts_search(searcher(), 1), || bts_search(searcher(), 2));
    }
}

fn knapsacks(rounds: usize) {
    println!("bts against sequential branch and bound (the same bounds), side by side:");
    // Strongly correlated instances of some 5 s for the sequential program (most seeds are far
    // easier or far harder); the last two have more than 128 items, and packings of four words of
    // bits (as `bts run knapsack` makes them), then the boxed bits of any number of items (the
    // fourth takes some 2 s, and many items past the 128th).
    for (n, seed) in [(117, 11), (119, 1), (137, 3), (200, 5)] {
        let (capacity, items) = correlated(n, 1000, seed);
        let name = format!("knapsack correlated n={n} #{seed}");
        if n <= 128 {
            compare_knapsacks::<u128>(&name, rounds, capacity, &items);
        } else {
            compare_knapsacks::<[u64; 4]>(&name, rounds, capacity, &items);
            let boxed = by_recursion::<Wide>(capacity, &items, 1);
            println!("{:<30} 1 worker, the bits past the 128th in a box (Wide): {:.2} s cpu", "", boxed.cpu);
        }
    }
}

/// The sequential program and bts on a knapsack, by the search `bts run knapsack` builds (see
/// [`cliques`]); then, for comparison, one worker by the search over its children iterators, its
/// packings' bits as `B` (as `bts run knapsack` keeps them).
fn compare_knapsacks<B: Taken>(name: &str, rounds: usize, capacity: u64, items: &[(u64, u64)]) {
    let run = |workers| bts_search(knapsack_searcher(capacity, items, b"").unwrap(), workers);
    compare(name, rounds, || SeqKnapsack::new(capacity, items).solve(), || run(1), || run(2));
    let looped = bts_run(KnapsackOf::<B>::new(capacity, items).unwrap(), 1);
    println!("{:<30} 1 worker, the search over children iterators: {:.2} s cpu", "", looped.cpu);
}

/// bts on a knapsack whose packings keep their bits as `B`, jobs run by its recursion.
fn by_recursion<B: Taken>(capacity: u64, items: &[(u64, u64)], workers: usize) -> Timing {
    let tree = KnapsackOf::<B>::new(capacity, items).unwrap();
    bts_search(Arc::new(TreeSearcher::optimising(tree).recursive()), workers)
}

// ----- delay -----

/// A log line of a worker: its time and the value it names, if it says `what`.
fn logged(line: &str, what: &str) -> Option<(SystemTime, i64)> {
    if !line.contains(what) {
        return None;
    }
    let stamp = line.split_whitespace().next()?;
    let value = line.rsplit("value=").next()?.trim().parse().ok()?;
    Some((parse_rfc3339(stamp)?, value))
}

/// `2026-11-23T12:30:00.123456Z` (UTC) as a time: only the seconds of the day matter here.
fn parse_rfc3339(stamp: &str) -> Option<SystemTime> {
    let time = stamp.split('T').nth(1)?.trim_end_matches('Z');
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) =
        (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs_f64(h * 3600.0 + m * 60.0 + s))
}

fn delay() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("g.clq");
    let (n, edges) = (300, gnp(300, 0.7, 6));
    std::fs::write(&graph, dimacs(n, &edges)).unwrap();
    let address = dir.path().join("address");
    let mut master = Command::new(BTS)
        .args(["run", "-q", "--workers", "0", "--listen", "127.0.0.1:0", "--address-file"])
        .arg(&address)
        .args(["maxclique", "--graph"])
        .arg(&graph)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let mut child = Command::new(BTS)
                .args(["worker", "--connect-file"])
                .arg(&address)
                .args(["--threads", "1"])
                .env("RUST_LOG", "bts_worker=debug")
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stderr = child.stderr.take().unwrap();
            (
                child,
                std::thread::spawn(move || BufReader::new(stderr).lines().map_while(Result::ok).collect::<Vec<_>>()),
            )
        })
        .collect();
    assert!(master.wait().unwrap().success());
    let logs: Vec<Vec<String>> = workers
        .into_iter()
        .map(|(mut child, log)| {
            child.wait().unwrap();
            log.join().unwrap()
        })
        .collect();
    // For each improvement found by one worker: when the other took an incumbent at least as good.
    let mut delays = Vec::new();
    for (finder, other) in [(0, 1), (1, 0)] {
        let told: Vec<(SystemTime, i64)> =
            logs[other].iter().filter_map(|l| logged(l, "the master's incumbent")).collect();
        for (found, value) in logs[finder].iter().filter_map(|l| logged(l, "found a better solution")) {
            if let Some((at, _)) = told.iter().find(|&&(at, v)| v >= value && at >= found) {
                delays.push(at.duration_since(found).unwrap().as_secs_f64() * 1e3);
            }
        }
    }
    delays.sort_by(f64::total_cmp);
    if delays.is_empty() {
        println!("incumbent propagation: no improvement crossed between the two workers");
        return;
    }
    println!(
        "incumbent propagation between two remote workers (loopback, {} improvements): median {:.2} ms, \
         max {:.2} ms, min {:.2} ms (load {})",
        delays.len(),
        delays[delays.len() / 2],
        delays[delays.len() - 1],
        delays[0],
        load()
    );
}

/// `profile seq|bts|wide N SEED`: one strongly correlated knapsack alone, by the sequential program
/// or by one worker (on the packings `bts run knapsack` picks for N items, or on boxed bits): small
/// enough for `valgrind --tool=callgrind` at N = 100.
fn profile(args: &[String]) {
    let [who, n, seed] = args else { panic!("profile seq|bts|wide N SEED") };
    let (capacity, items) = correlated(n.parse().unwrap(), 1000, seed.parse().unwrap());
    let t = match who.as_str() {
        "seq" => timed(|| SeqKnapsack::new(capacity, &items).solve()),
        "wide" => by_recursion::<Wide>(capacity, &items, 1),
        _ => bts_search(knapsack_searcher(capacity, &items, b"").unwrap(), 1),
    };
    println!("{who}: optimum {}, {:.3} s cpu", t.value, t.cpu);
}

fn main() {
    let which: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if which.first().map(String::as_str) == Some("profile") {
        return profile(&which[1..]);
    }
    // A number among the parts is how many rounds the speed comparisons run.
    let (numbers, parts): (Vec<&String>, Vec<&String>) = which.iter().partition(|w| w.parse::<usize>().is_ok());
    let rounds = numbers.first().map_or(1, |n| n.parse::<usize>().unwrap().max(1));
    let wants = |part: &str| parts.is_empty() || parts.iter().any(|w| *w == part);
    if wants("delay") {
        delay();
    }
    if wants("speed") || wants("maxclique") {
        cliques(rounds);
    }
    if wants("speed") || wants("knapsack") {
        knapsacks(rounds);
    }
}
