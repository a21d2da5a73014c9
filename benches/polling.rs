//! Random polling: scaling, the split rules and the start-up, and a table against budget mode.
//!
//! ```text
//! cargo bench --bench polling                  # everything (about six minutes)
//! cargo bench --bench polling -- scaling       # or: scaling rules start table
//! ```

use bts::trees::{Gw, Preset, Queens, Uts};
use bts::{PollingStart, Run, RunMode, RunOptions, SplitRule, Summary, Tree};

fn repeat() -> usize {
    std::env::var("BTS_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(2)
}

fn options(workers: usize, mode: RunMode) -> RunOptions {
    RunOptions { workers, mode, ..RunOptions::default() }
}

fn polling(split: SplitRule, start: PollingStart) -> RunMode {
    RunMode::Polling { split, start }
}

fn run<T: Tree>(tree: T, options: RunOptions) -> Summary {
    let finished = Run::new("bench", tree).options(options).run(&mut std::io::sink()).unwrap();
    assert!(finished.summary.complete);
    finished.summary
}

/// The best (shortest) of `repeat()` runs.
fn best(mut f: impl FnMut() -> Summary) -> Summary {
    (0..repeat()).map(|_| f()).min_by(|a, b| a.elapsed_s.total_cmp(&b.elapsed_s)).unwrap()
}

fn uts(p: Preset) -> Uts {
    Uts::new(p.params()).unwrap()
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

const DEFAULT: RunMode = RunMode::Polling { split: SplitRule::Alternate, start: PollingStart::Selective };

fn scaling() {
    println!("## Random polling: two threads against one");
    for (name, p) in [("T1L", Preset::T1L), ("T3L", Preset::T3L)] {
        let one = best(|| run(uts(p), options(1, DEFAULT)));
        let two = best(|| run(uts(p), options(2, DEFAULT)));
        let r = one.elapsed_s / two.elapsed_s;
        println!(
            "{name}: 1 thread {:.3} s, 2 threads {:.3} s, speed-up {r:.3}  (target >= 1.9: {}); {} steals moved {} nodes",
            one.elapsed_s,
            two.elapsed_s,
            verdict(r >= 1.9),
            two.totals.jobs,
            two.totals.returned
        );
    }
    println!();
}

fn rules() {
    println!("## Split rules (2 threads, selective start)");
    for (name, p) in [("T1L", Preset::T1L), ("T3L", Preset::T3L)] {
        for (rule_name, rule) in [("alternate", SplitRule::Alternate), ("bottom", SplitRule::Bottom)] {
            let s = best(|| run(uts(p), options(2, polling(rule, PollingStart::Selective))));
            println!(
                "{name}, {rule_name:9}: {:.3} s, {} steals, {} nodes moved",
                s.elapsed_s, s.totals.jobs, s.totals.returned
            );
        }
    }
    println!();
}

fn start() {
    println!("## Start-up: selective initialisation against one worker taking the root (2 threads)");
    for (name, p) in [("T1L", Preset::T1L), ("T3L", Preset::T3L)] {
        for (start_name, st) in [("selective", PollingStart::Selective), ("plain", PollingStart::Plain)] {
            let s = best(|| run(uts(p), options(2, polling(SplitRule::Alternate, st))));
            println!("{name}, {start_name:9}: {:.3} s, {} steals", s.elapsed_s, s.totals.jobs);
        }
    }
    println!();
}

fn table() {
    println!("## Budget mode against random polling (2 workers, defaults)");
    println!("| tree | nodes | budget mode | polling | polling / budget |");
    println!("| --- | --- | --- | --- | --- |");
    type Case = (&'static str, Box<dyn Fn(RunMode) -> Summary>);
    let cases: Vec<Case> = vec![
        ("T1L", Box::new(|m| run(uts(Preset::T1L), options(2, m)))),
        ("T3L", Box::new(|m| run(uts(Preset::T3L), options(2, m)))),
        ("gw --delta 10 --seed 119440", Box::new(|m| run(Gw::new(10, 119_440), options(2, m)))),
        ("queens --n 15", Box::new(|m| run(Queens::new(15), options(2, m)))),
    ];
    for (name, f) in cases {
        let b = best(|| f(RunMode::Budget));
        let p = best(|| f(DEFAULT));
        assert_eq!(b.totals.nodes, p.totals.nodes);
        println!(
            "| {name} | {} | {:.3} s | {:.3} s | {:.3} |",
            b.totals.nodes,
            b.elapsed_s,
            p.elapsed_s,
            p.elapsed_s / b.elapsed_s
        );
    }
    println!();
}

fn main() {
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |p: &str| parts.is_empty() || parts.iter().any(|a| a == p);
    if wanted("scaling") {
        scaling();
    }
    if wanted("rules") {
        rules();
    }
    if wanted("start") {
        start();
    }
    if wanted("table") {
        table();
    }
}
