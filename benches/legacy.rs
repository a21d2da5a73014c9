//! What the line protocol costs per job, with the cheapest possible program (`bench/trivial.c`,
//! compiled here with `cc`): every node a job (`--budget 1 --fixed-budget`), one worker.
//!
//! ```text
//! cargo bench --bench legacy
//! ```

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

const BTS: &str = env!("CARGO_BIN_EXE_bts");

fn run(args: &[&str]) -> Value {
    let out = Command::new(BTS).args(args).stderr(Stdio::null()).output().unwrap();
    assert!(out.status.success());
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap()
}

/// Microseconds per job, the best of three runs.
fn per_job(program: &Path, nodes: u64, mode: &[&str], workers: &str) -> f64 {
    let n = nodes.to_string();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut args = vec!["run", "--workers", workers, "--budget", "1", "--fixed-budget", "--summary-json", "-"];
        args.push("exec");
        args.extend_from_slice(mode);
        args.extend_from_slice(&["--", program.to_str().unwrap(), &n]);
        if mode.is_empty() {
            args.push("oneshot");
        }
        let s = run(&args);
        assert_eq!(s["nodes"].as_u64(), Some(nodes));
        best = best.min(s["elapsed_s"].as_f64().unwrap() * 1e6 / s["jobs"].as_f64().unwrap());
    }
    best
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("trivial");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/trivial.c");
    let built = Command::new("cc").args(["-O2", "-o", program.to_str().unwrap(), source.to_str().unwrap()]).status();
    assert!(built.unwrap().success(), "cc could not build bench/trivial.c");

    println!("## The line protocol's cost per job (budget 1: every node a job)");
    let persistent = per_job(&program, 65_535, &["--persistent"], "1");
    println!(
        "persistent, 1 worker:  {persistent:.1} µs a job (65,535 jobs)  (target < 50 µs: {})",
        if persistent < 50.0 { "ok" } else { "MISSED" }
    );
    let persistent2 = per_job(&program, 65_535, &["--persistent"], "2");
    println!("persistent, 2 workers: {persistent2:.1} µs a job of wall time (65,535 jobs)");
    let oneshot = per_job(&program, 1_023, &[], "1");
    println!("one-shot, 1 worker:    {oneshot:.1} µs a job (1,023 jobs: a process started for each)");
}
