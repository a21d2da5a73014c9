//! Checkpoints end to end: stop and resume in every way, `kill -9` at any moment, bad files.

use crate::util::*;
use bts::trees::Queens;
use bts::{Limits, Tree, search};
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// N-queens counted by one sequential search in this process: (nodes, leaves).
fn queens(n: usize) -> (u64, u64) {
    let q = Queens::new(n);
    let s = search(&q, q.root(), 0, Limits::UNLIMITED, &mut String::new(), &mut |_, _| unreachable!());
    (s.visited, s.leaves)
}

/// Solutions of N-queens (OEIS A000170).
fn solutions(n: usize) -> usize {
    match n {
        9 => 352,
        13 => 73_712,
        14 => 365_596,
        _ => unimplemented!(),
    }
}

/// The output file holds each solution of N-queens exactly once, as whole lines.
fn check_queens_output(path: &Path, n: usize) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'));
    let mut lines: Vec<&str> = text.lines().collect();
    for l in &lines {
        let cols: Vec<usize> = l.split(' ').map(|c| c.parse().expect("a column")).collect();
        assert_eq!(cols.len(), n, "not a board: {l}");
    }
    assert_eq!(lines.len(), solutions(n), "records written twice or lost");
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), solutions(n), "a record written twice");
}

fn inspect(path: &Path) -> Value {
    let o = bts(&["inspect", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn node_limited_segments_with_changing_worker_counts_count_everything_once() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("run.ckpt"), dir.path().join("solutions.txt"));
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let first = bts(&[
        "run",
        "--workers",
        "2",
        "--checkpoint",
        ck_s,
        "--output",
        out_s,
        "--node-limit",
        "600000",
        "queens",
        "--n",
        "13",
    ]);
    assert_eq!(first.status.code(), Some(3), "{}", stderr(&first));
    assert!(stderr(&first).contains(&format!("resume with: bts resume {ck_s}")), "{}", stderr(&first));
    let mut segments = 1;
    let last = loop {
        segments += 1;
        assert!(segments < 20, "the run does not finish");
        let workers = (segments % 3 + 1).to_string();
        let o = bts(&["resume", ck_s, "--workers", &workers, "--node-limit", "600000", "--summary-json", "-"]);
        match o.status.code() {
            Some(3) => continue,
            Some(0) => break o,
            other => panic!("exit {other:?}: {}", stderr(&o)),
        }
    };
    let s = summary(&last);
    let (nodes, leaves) = queens(13);
    assert_eq!(
        (s["nodes"].as_u64(), s["leaves"].as_u64(), s["outputs"].as_u64()),
        (Some(nodes), Some(leaves), Some(73_712))
    );
    assert_eq!(s["segments"].as_u64(), Some(segments));
    assert_eq!(s["jobs"].as_u64().unwrap(), s["returned"].as_u64().unwrap() + 1);
    check_queens_output(&out, 13);
    // The final checkpoint records the complete run; resuming it changes nothing.
    assert_eq!(inspect(&ck)["complete"], true);
    let again = bts(&["resume", ck_s, "--summary-json", "-"]);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(summary(&again)["nodes"].as_u64(), Some(nodes));
    check_queens_output(&out, 13);
}

/// T1 with every child hashed ten times: long enough to be stopped in the middle.
const SLOW_T1: [&str; 5] = ["uts", "--preset", "T1", "-g", "10"];

#[test]
fn every_way_of_stopping_writes_a_checkpoint_that_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("t1.ckpt");
    let stop = dir.path().join("stop-now");
    let ck_s = ck.to_str().unwrap();

    // 1. A time limit.
    let mut args = vec!["run", "--workers", "1", "--checkpoint", ck_s, "--time-limit", "0.3"];
    args.extend(SLOW_T1);
    let o = bts(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("time-limit"));
    let nodes_1 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_1 > 0 && !inspect(&ck)["complete"].as_bool().unwrap());

    // 2. A stop file, created while running.
    let mut child = bts_command()
        .args(["resume", ck_s, "--workers", "2", "--stop-file", stop.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&stop, "").unwrap();
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let nodes_2 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_2 > nodes_1);
    // A stop file that exists before the run starts is refused.
    let o = bts(&["resume", ck_s, "--stop-file", stop.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("exists already"));
    std::fs::remove_file(&stop).unwrap();

    // 3. SIGTERM.
    let mut child = bts_command().args(["resume", ck_s, "--workers", "1"]).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "-TERM");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let nodes_3 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_3 > nodes_2);

    // 4. SIGINT twice: the second stops at once, the jobs out with workers go to the checkpoint.
    let mut child = bts_command().args(["resume", ck_s, "--workers", "2"]).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "-INT");
    signal(&child, "-INT");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let nodes_4 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_4 >= nodes_3);

    // 5. To the end: the totals of the whole run are the published ones.
    let o = bts(&["resume", ck_s, "--workers", "2", "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!(
        (s["nodes"].as_u64(), s["leaves"].as_u64(), s["max_depth"].as_u64()),
        (Some(4_130_071), Some(3_305_118), Some(10))
    );
    assert_eq!(s["segments"].as_u64(), Some(5));
}

#[test]
fn kill_9_at_any_moment_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("q.ckpt"), dir.path().join("q.txt"));
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let run = ["run", "--workers", "1", "--checkpoint", ck_s, "--checkpoint-every", "0.05", "--output", out_s];
    let run = [&run[..], &["queens", "--n", "14"]].concat();
    let resume = ["resume", ck_s, "--workers", "1", "--summary-json", "-"];
    let (last, kills) = kill_9_until_done(&run, &resume, 100, 40);
    assert!(kills >= 2, "only {kills} kills: the run was too quick to test anything");
    assert_eq!(last.status.code(), Some(0));
    let s = summary(&last);
    let (nodes, leaves) = queens(14);
    assert_eq!(
        (s["nodes"].as_u64(), s["leaves"].as_u64(), s["outputs"].as_u64()),
        (Some(nodes), Some(leaves), Some(365_596))
    );
    check_queens_output(&out, 14);
}

#[test]
fn resume_keeps_the_stored_options_and_takes_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("o.ckpt");
    let ck_s = ck.to_str().unwrap();
    let o = bts(&[
        "run",
        "--workers",
        "2",
        "--order",
        "fifo",
        "--budget",
        "7",
        "--fixed-budget",
        "--checkpoint",
        ck_s,
        "--count-only",
        "--node-limit",
        "1000",
        "queens",
        "--n",
        "9",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let info = inspect(&ck);
    assert_eq!(info["tree"], "queens --n 9");
    assert_eq!(info["counters"]["nodes"], 1000);
    assert_eq!(info["options"]["order"], "Fifo");
    assert_eq!(info["options"]["budget"]["initial"], 7);
    assert_eq!(info["options"]["budget"]["fixed"], true);
    assert_eq!(info["options"]["count_only"], true);
    assert_eq!(info["format_version"], 2);
    assert!(info["jobs"].as_u64().unwrap() > 0);
    assert!(info["written"].as_str().unwrap().ends_with('Z'));
    // Output options are fixed by the checkpoint.
    let o = bts(&["resume", ck_s, "--output", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Stored options carry over, explicit ones win.
    let o = bts(&["resume", ck_s, "--workers", "1", "--budget", "3", "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!(
        (s["order"].as_str(), s["budget"]["initial"].as_u64(), s["workers"].as_u64()),
        (Some("fifo"), Some(3), Some(1))
    );
    assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(queens(9).0), Some(solutions(9) as u64)));
}

#[test]
fn bad_checkpoint_files_are_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.ckpt");
    let o = bts(&[
        "run",
        "--checkpoint",
        good.to_str().unwrap(),
        "--count-only",
        "--node-limit",
        "500",
        "queens",
        "--n",
        "8",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let bytes = std::fs::read(&good).unwrap();

    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&9u32.to_le_bytes());
    let mut corrupt = bytes.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x55;
    let mut checkpoint = bts_checkpoints::decode(&bytes).unwrap();
    checkpoint.tree = bts::TreeSpec::new("nosuchtree", ["--x", "1"]);
    let foreign_tree = bts_checkpoints::encode(&checkpoint);
    let cases: [(&str, &[u8], &str); 6] = [
        ("empty", b"", "empty"),
        ("foreign", b"#!/bin/sh\necho not a checkpoint\n", "not a bts checkpoint"),
        ("truncated", &bytes[..bytes.len() - 7], "truncated"),
        ("corrupt", &corrupt, "corrupt"),
        ("newer", &newer, "newer bts"),
        ("unknown-tree", &foreign_tree, "unknown tree 'nosuchtree'"),
    ];
    for (name, content, message) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let o = bts(&["resume", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{name}: expected '{message}' in {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
        assert_eq!(std::fs::read(&path).unwrap(), content, "{name} was modified");
        if name != "unknown-tree" {
            assert_eq!(bts(&["inspect", path.to_str().unwrap()]).status.code(), Some(2), "inspect {name}");
        }
    }
}

#[test]
fn an_output_file_shorter_than_the_committed_records_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("c"), dir.path().join("out.txt"));
    let o = bts(&[
        "run",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--node-limit",
        "20000",
        "queens",
        "--n",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(3));
    std::fs::write(&out, "short\n").unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not this run's output"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "short\n");
}

#[test]
fn an_unwritable_checkpoint_path_is_refused_up_front() {
    let o = bts(&["run", "--checkpoint", "/nonexistent-dir/run.ckpt", "queens", "--n", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot write the checkpoint"));
    let o = bts(&["run", "--checkpoint-every", "5", "queens", "--n", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--checkpoint-every needs --checkpoint"));
}
