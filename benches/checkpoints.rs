//! Checkpoint speed: writing a large job list, and the cost of periodic checkpoints on a run.
//!
//! ```text
//! cargo bench --bench checkpoints                 # write, periodic, seal (about a minute)
//! cargo bench --bench checkpoints -- long         # --checkpoint-every 10 on T1XL (about four minutes)
//! ```

use bts::trees::{Preset, Uts};
use bts::{Run, RunOptions, Summary, Tree};
use bts_checkpoints::{Checkpoint, OutputSum, StoredOptions};
use bts_master::{BudgetConfig, BudgetState, Order, Pending, Totals};
use bts_protocol::{NodeBytes, TreeSpec};
use std::io::Write;
use std::time::{Duration, Instant};

fn write_large() {
    println!("## Writing and loading a checkpoint of 1,000,000 UTS jobs");
    let tree = Uts::new(Preset::T1L.params()).unwrap();
    let mut node = tree.root();
    let jobs: Vec<Pending> = (0..1_000_000)
        .map(|i| {
            node = tree.children(&node, 1).next().unwrap_or_else(|| tree.root());
            Pending { depth: i % 13, node: NodeBytes::from_slice(&postcard::to_allocvec(&node).unwrap()) }
        })
        .collect();
    let checkpoint = Checkpoint {
        written_unix_ms: 0,
        tree: TreeSpec::new("uts", ["--preset", "T1L"]),
        options: StoredOptions {
            order: Order::Lifo,
            budget: BudgetConfig::default(),
            count_only: false,
            output: None,
            checkpoint: None,
            checkpoint_every: None,
            workers: 2,
            mode: Default::default(),
        },
        totals: Totals::default(),
        budget: BudgetState { base: 1, cost: Default::default() },
        elapsed_s: 0.0,
        segments: 1,
        output_len: 0,
        jobs,
        seal: None,
        counters: Vec::new(),
        optimum: Default::default(),
        input_digest: None,
        mixed_modes: false,
    };
    let dir = tempfile::tempdir_in(".").unwrap();
    let path = dir.path().join("large.ckpt");
    let mut best_write = f64::MAX;
    let mut best_load = f64::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        bts_checkpoints::write(&path, &checkpoint).unwrap();
        best_write = best_write.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        let loaded = bts_checkpoints::load(&path).unwrap();
        best_load = best_load.min(started.elapsed().as_secs_f64());
        assert_eq!(loaded.jobs.len(), 1_000_000);
    }
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "file {:.1} MB; write (encode, write, fsync, rename, fsync folder) {best_write:.3} s  (target < 1 s: {}); load {best_load:.3} s\n",
        size as f64 / 1e6,
        if best_write < 1.0 { "ok" } else { "MISSED" }
    );
}

fn t1(preset: Preset, workers: usize, checkpoint: Option<(&std::path::Path, f64)>) -> Summary {
    let mut options = RunOptions { workers, ..RunOptions::default() };
    if let Some((path, every)) = checkpoint {
        options.checkpoint = Some(path.to_path_buf());
        options.checkpoint_every = Some(Duration::from_secs_f64(every));
    }
    let tree = Uts::new(preset.params()).unwrap();
    let finished = Run::new("uts", tree).options(options).run(&mut std::io::sink()).unwrap();
    assert!(finished.summary.complete);
    finished.summary
}

fn compare(preset: Preset, name: &str, everies: &[f64], rounds: usize) {
    let dir = tempfile::tempdir_in(".").unwrap();
    let path = dir.path().join("run.ckpt");
    let mut plain = f64::MAX;
    let mut with: Vec<f64> = vec![f64::MAX; everies.len()];
    for _ in 0..rounds {
        plain = plain.min(t1(preset, 2, None).elapsed_s);
        for (i, &every) in everies.iter().enumerate() {
            with[i] = with[i].min(t1(preset, 2, Some((&path, every))).elapsed_s);
        }
    }
    println!("{name}, 2 workers, no checkpoints: {plain:.3} s");
    for (every, t) in everies.iter().zip(with) {
        let cost = (t / plain - 1.0) * 100.0;
        println!(
            "{name}, --checkpoint-every {every}: {t:.3} s, throughput cost {cost:+.2}%  (target < 2%: {})",
            if cost < 2.0 { "ok" } else { "MISSED" }
        );
    }
    println!();
}

/// The running checksum of the output against writing the same bytes to a file (into the page
/// cache, its fastest), and the checksum of a prefix as a resume reads it.
fn seal() {
    println!("## The output seal: a running CRC-32 of 256 MiB of records, against writing them to a file");
    let records: Vec<u8> =
        (0..256u32 << 20).map(|i| if i % 36 == 35 { b'\n' } else { b'0' + (i % 10) as u8 }).collect();
    let dir = tempfile::tempdir_in(".").unwrap();
    let path = dir.path().join("out.txt");
    let (mut best_sum, mut best_write, mut best_prefix) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..3 {
        let started = Instant::now();
        let mut sum = OutputSum::default();
        for piece in records.chunks(1 << 16) {
            sum.update(piece);
        }
        std::hint::black_box(sum.crc());
        best_sum = best_sum.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        let mut file = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&path).unwrap());
        for piece in records.chunks(1 << 16) {
            file.write_all(piece).unwrap();
        }
        file.flush().unwrap();
        best_write = best_write.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        let prefix = bts_checkpoints::sum_prefix(&mut std::fs::File::open(&path).unwrap(), records.len() as u64);
        assert_eq!(prefix.unwrap().len(), records.len() as u64);
        best_prefix = best_prefix.min(started.elapsed().as_secs_f64());
    }
    let gbs = |t: f64| records.len() as f64 / t / 1e9;
    // The master's records come far slower than either: 2 workers on queens --n 15 write 80 MB in
    // about 14 s (6 MB/s), so at 1 GB/s the checksum takes under 1% of the master's time.
    println!(
        "checksum {:.2} GB/s  (target >= 1 GB/s: {}); writing the same bytes to a file {:.2} GB/s (the checksum costs {:.0}% of that)",
        gbs(best_sum),
        if gbs(best_sum) >= 1.0 { "ok" } else { "MISSED" },
        gbs(best_write),
        best_sum / best_write * 100.0
    );
    println!("checksum of the prefix on resume (read from the page cache): {:.2} GB/s\n", gbs(best_prefix));
}

fn main() {
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |p: &str| if parts.is_empty() { p != "long" } else { parts.iter().any(|a| a == p) };
    if wanted("write") {
        write_large();
    }
    if wanted("periodic") {
        println!("## Periodic checkpoints on T1L (a run of 3.5 s: intervals of 1 s and 0.1 s stand in for 10 s)");
        compare(Preset::T1L, "T1L", &[1.0, 0.1], 3);
    }
    if wanted("seal") {
        seal();
    }
    if wanted("long") {
        println!("## --checkpoint-every 10 on T1XL (1,635,119,272 nodes)");
        compare(Preset::T1XL, "T1XL", &[10.0], 1);
    }
}
