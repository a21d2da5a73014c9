//! Remote workers on loopback against local threads, and the master's round trips with many
//! connected workers. Runs the release `bts` binary as separate processes.
//!
//! ```text
//! cargo bench --bench remote                  # every part (about two minutes)
//! cargo bench --bench remote -- speed         # or: speed, roundtrips, polling
//! ```

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const BTS: &str = env!("CARGO_BIN_EXE_bts");

fn summary(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn local(tree: &[&str], workers: usize, extra: &[&str], dir: &Path) -> Value {
    let s = dir.join("local.json");
    let status = Command::new(BTS)
        .args(["run", "-q", "--workers", &workers.to_string(), "--summary-json", s.to_str().unwrap()])
        .args(extra)
        .args(tree)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    summary(&s)
}

/// A master with no local workers and `workers` remote worker processes of one thread each.
fn remote(tree: &[&str], workers: usize, extra: &[&str], dir: &Path) -> Value {
    let s = dir.join("remote.json");
    let address = dir.join("address");
    let _ = std::fs::remove_file(&address);
    let mut master = Command::new(BTS)
        .args(["run", "-q", "--workers", "0", "--listen", "127.0.0.1:0"])
        .args(["--address-file", address.to_str().unwrap(), "--summary-json", s.to_str().unwrap()])
        .args(extra)
        .args(tree)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let children: Vec<Child> = (0..workers)
        .map(|_| {
            Command::new(BTS)
                .args(["worker", "-q", "--connect-file", address.to_str().unwrap(), "--threads", "1"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    assert!(master.wait().unwrap().success());
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    summary(&s)
}

fn seconds(v: &Value) -> f64 {
    v["elapsed_s"].as_f64().unwrap()
}

fn speed(dir: &Path) {
    println!("## Two remote worker processes on loopback against two local worker threads (T1L)");
    let tree = ["uts", "--preset", "T1L"];
    let (mut l, mut r) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let a = local(&tree, 2, &[], dir);
        assert_eq!(a["nodes"], 102_181_082);
        l = l.min(seconds(&a));
        let b = remote(&tree, 2, &[], dir);
        assert_eq!(b["nodes"], 102_181_082);
        r = r.min(seconds(&b));
    }
    let ratio = l / r;
    println!("2 local threads {l:.3} s, 2 remote processes {r:.3} s (connecting included)");
    println!(
        "speed ratio remote/local = {ratio:.3}  (target >= 0.95: {})\n",
        if ratio >= 0.95 { "ok" } else { "MISSED" }
    );
}

fn round_trips(dir: &Path) {
    println!("## Master round trips: 32 remote workers, --budget 1 --fixed-budget, every node a job (T1)");
    let tree = ["uts", "--preset", "T1"];
    let mut best = 0.0f64;
    let mut jobs = 0;
    for _ in 0..2 {
        let s = remote(&tree, 32, &["--budget", "1", "--fixed-budget"], dir);
        assert_eq!(s["nodes"], 4_130_071);
        jobs = s["jobs"].as_u64().unwrap();
        best = best.max(jobs as f64 / seconds(&s));
    }
    println!(
        "{jobs} jobs, {best:.0} job round trips/s  (target >= 100,000: {})\n",
        if best >= 100_000.0 { "ok" } else { "MISSED" }
    );
}

fn polling(dir: &Path) {
    println!("## Random polling: two remote worker processes on loopback against two local threads (T1L)");
    let tree = ["uts", "--preset", "T1L"];
    let mode = ["--mode", "polling"];
    let (mut l, mut r, mut b) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..3 {
        let s = local(&tree, 2, &mode, dir);
        assert_eq!(s["nodes"], 102_181_082);
        l = l.min(seconds(&s));
        let s = remote(&tree, 2, &mode, dir);
        assert_eq!(s["nodes"], 102_181_082);
        r = r.min(seconds(&s));
        let s = remote(&tree, 2, &[], dir);
        assert_eq!(s["nodes"], 102_181_082);
        b = b.min(seconds(&s));
    }
    println!("polling: 2 local threads {l:.3} s, 2 remote processes {r:.3} s; budget: 2 remote processes {b:.3} s");
    let ratio = l / r;
    println!(
        "speed ratio remote/local (polling) = {ratio:.3}  (target >= 0.95: {}); remote polling/budget = {:.3}\n",
        if ratio >= 0.95 { "ok" } else { "MISSED" },
        b / r
    );
}

fn main() {
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |p: &str| parts.is_empty() || parts.iter().any(|a| a == p);
    let dir = tempfile::tempdir().unwrap();
    if wanted("speed") {
        speed(dir.path());
    }
    if wanted("roundtrips") {
        round_trips(dir.path());
    }
    if wanted("polling") {
        polling(dir.path());
    }
}
