//! Random polling: exact counts with any number of workers, split rule and start, pauses for
//! checkpoints, stops and resumes in either mode, failures.

use crate::util::*;
use bts::trees::{Gw, Preset, Queens, Uts};
use bts::{Limits, PollingStart, Run, RunMode, RunOptions, SplitRule, Tree, search};
use std::process::Stdio;
use std::time::Duration;

fn sequential<T: Tree>(tree: &T) -> (u64, u64, u32, u64) {
    let s = search(tree, tree.root(), 0, Limits::UNLIMITED, &mut String::new(), &mut |_, _| unreachable!());
    (s.visited, s.leaves, s.max_depth, s.outputs)
}

fn polling(workers: usize, split: SplitRule, start: PollingStart) -> RunOptions {
    RunOptions { workers, mode: RunMode::Polling { split, start }, ..RunOptions::default() }
}

#[test]
fn polling_counts_exactly_whatever_the_workers_rule_and_start() {
    let combos = [
        (1, SplitRule::Alternate, PollingStart::Selective),
        (2, SplitRule::Alternate, PollingStart::Selective),
        (3, SplitRule::Bottom, PollingStart::Selective),
        (5, SplitRule::Alternate, PollingStart::Plain),
        (4, SplitRule::Bottom, PollingStart::Plain),
    ];
    for (workers, split, start) in combos {
        let what = format!("{workers} workers, {split:?}, {start:?}");
        // UTS T1: the published counts.
        let f = Run::new("T1", Uts::new(Preset::T1.params()).unwrap())
            .options(polling(workers, split, start))
            .run(&mut std::io::sink())
            .unwrap();
        let t = &f.summary.totals;
        assert_eq!((t.nodes, t.leaves, t.max_depth), (4_130_071, Some(3_305_118), Some(10)), "{what}");
        assert_eq!(f.summary.mode, "polling");
        // A gw tree: a second count by one sequential search.
        let gw = Gw::new(10, 656);
        let (nodes, leaves, depth, _) = sequential(&gw);
        let f = Run::new("gw", gw).options(polling(workers, split, start)).run(&mut std::io::sink()).unwrap();
        let t = &f.summary.totals;
        assert_eq!((t.nodes, t.leaves, t.max_depth), (nodes, Some(leaves), Some(depth)), "{what}");
        // Queens: every solution written once.
        let mut out = Vec::new();
        let f = Run::new("queens", Queens::new(9)).options(polling(workers, split, start)).run(&mut out).unwrap();
        assert_eq!(f.summary.totals.outputs, 352, "{what}");
        let mut lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
        lines.sort();
        lines.dedup();
        assert_eq!(lines.len(), 352, "{what}");
    }
}

#[test]
fn steals_move_work_between_workers() {
    let f = Run::new("T3", Uts::new(Preset::T3.params()).unwrap())
        .options(polling(2, SplitRule::Alternate, PollingStart::Plain))
        .run(&mut std::io::sink())
        .unwrap();
    // With a plain start, worker 1 has nothing until it steals.
    assert!(f.summary.totals.jobs >= 1 && f.summary.totals.returned >= 1, "{:?}", f.summary);
    assert_eq!(f.summary.totals.nodes, 4_112_897);
}

#[test]
fn frequent_pauses_for_checkpoints_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("p.ckpt");
    let o = bts(&[
        "run",
        "--mode",
        "polling",
        "--workers",
        "3",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--checkpoint-every",
        "0.02",
        "--summary-json",
        "-",
        "uts",
        "--preset",
        "T1",
        "-g",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_t1(&summary(&o));
    let checkpoint = bts_checkpoints::load(&ck).unwrap();
    assert!(checkpoint.is_complete());
    assert_eq!(checkpoint.totals.nodes, 4_130_071);
}

#[test]
fn the_node_limit_is_exact_and_the_rest_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("n.ckpt");
    let ck_s = ck.to_str().unwrap();
    let o = bts(&[
        "run",
        "--mode",
        "polling",
        "--workers",
        "2",
        "--checkpoint",
        ck_s,
        "--node-limit",
        "123457",
        "--summary-json",
        "-",
        "uts",
        "--preset",
        "T1",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let first = summary(&o);
    assert_eq!(first["nodes"], 123_457);
    // The checkpoint keeps the steals the summary reports (the workers report them as they pause).
    let saved = inspect(&ck);
    assert_eq!(
        (saved["counters"]["jobs"].clone(), saved["counters"]["returned"].clone()),
        (first["jobs"].clone(), first["returned"].clone())
    );
    let o = bts(&["resume", ck_s, "--workers", "3", "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_t1(&s);
    assert_eq!(s["mode"], "polling");
    assert!(s["jobs"].as_u64() >= first["jobs"].as_u64());
}

/// A node limit equal to the tree's size stops nothing: the run is complete, as its checkpoint says.
#[test]
fn a_node_limit_equal_to_the_tree_size_completes_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("all.ckpt");
    let ck_s = ck.to_str().unwrap();
    let args = ["run", "--mode", "polling", "--workers", "2", "--checkpoint", ck_s, "--node-limit", "4130071"];
    let o = bts(&[&args[..], &["--summary-json", "-", "uts", "--preset", "T1"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_t1(&s);
    assert_eq!((s["complete"].as_bool(), s["outcome"].as_str()), (Some(true), Some("complete")), "{s}");
    let o = bts(&["inspect", ck_s]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("complete"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn checkpoints_resume_in_either_mode() {
    let dir = tempfile::tempdir().unwrap();
    for (first, then) in [("polling", "budget"), ("budget", "polling"), ("polling", "polling")] {
        let ck = dir.path().join(format!("{first}-{then}.ckpt"));
        let ck_s = ck.to_str().unwrap();
        let o = bts(&[
            "run",
            "--mode",
            first,
            "--workers",
            "2",
            "--checkpoint",
            ck_s,
            "--time-limit",
            "0.3",
            "uts",
            "--preset",
            "T1",
            "-g",
            "10",
        ]);
        assert_eq!(o.status.code(), Some(3), "{first}: {}", stderr(&o));
        let info = inspect(&ck);
        assert_eq!(info["options"]["mode"], first);
        assert_eq!(info["options"]["split"].as_str(), (first == "polling").then_some("alternate"));
        let o = bts(&["resume", ck_s, "--mode", then, "--workers", "2", "--summary-json", "-"]);
        assert_eq!(o.status.code(), Some(0), "{first} then {then}: {}", stderr(&o));
        let s = summary(&o);
        assert_t1(&s);
        assert_eq!(s["mode"], then);
        // After a change of mode the earlier segment's jobs (or steals) are in the count: the
        // summary does not call them all steals, or all jobs.
        let mixed = stderr(&o).contains(" jobs and steals and ");
        assert_eq!(mixed, first != then, "{first} then {then}: {}", stderr(&o));
    }
}

/// A run that changed mode once still counts jobs and steals together when it resumes again in
/// the same mode: the checkpoint remembers.
#[test]
fn a_run_that_changed_mode_says_so_in_every_later_segment() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("mixed.ckpt");
    let ck_s = ck.to_str().unwrap();
    let o = bts(&["run", "--workers", "2", "--checkpoint", ck_s, "--node-limit", "1000000", "uts", "--preset", "T1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    for (limit, code) in [(&["--node-limit", "2000000"][..], 3), (&[][..], 0)] {
        let mut args = vec!["resume", ck_s, "--mode", "polling", "--workers", "2", "--summary-json", "-"];
        args.extend(limit);
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        assert!(stderr(&o).contains(" jobs and steals and "), "{}", stderr(&o));
        if code == 0 {
            assert_t1(&summary(&o));
        }
    }
}

#[test]
fn sigint_stops_a_polling_run_with_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("i.ckpt");
    let ck_s = ck.to_str().unwrap();
    let mut child = bts_command()
        .args(["run", "--mode", "polling", "--workers", "2", "--checkpoint", ck_s, "uts", "--preset", "T1", "-g", "20"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    signal(&child, "-INT");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let o = bts(&["resume", ck_s, "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_t1(&summary(&o));
}

#[test]
fn kill_9_of_a_polling_run_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("k.ckpt"), dir.path().join("k.txt"));
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let run = ["run", "--mode", "polling", "--workers", "2", "--checkpoint", ck_s, "--checkpoint-every", "0.05"];
    let run = [&run[..], &["--output", out_s, "queens", "--n", "14"]].concat();
    let (last, kills) = kill_9_until_done(&run, &["resume", ck_s, "--summary-json", "-"], 150, 60);
    assert!(kills >= 1, "the run was too quick to be killed");
    assert_eq!(last.status.code(), Some(0));
    assert_eq!(summary(&last)["outputs"], 365_596);
    assert_records_once(&out, 365_596);
}

#[test]
fn polling_refuses_what_it_cannot_do() {
    for (args, message) in [
        (&["run", "--mode", "polling", "exec", "--", "true"][..], "`exec` hands its jobs to a program, which cannot"),
        (&["run", "--mode", "polling", "--budget", "10", "queens", "--n", "5"], "--budget applies to --mode budget"),
        (&["run", "--mode", "polling", "--freq", "f", "queens", "--n", "5"], "--freq applies to --mode budget"),
        (&["run", "--mode", "budget", "--split", "bottom", "queens", "--n", "5"], "--split applies to --mode polling"),
        (
            &["run", "--mode", "budget", "--start", "plain", "queens", "--n", "5"],
            "error: --start applies to --mode polling",
        ),
        // A resumed run starts from its checkpoint (the file need not exist: the option is refused first).
        (&["resume", "nonexistent.ckpt", "--start", "plain"], "--start is how a new run starts from its root"),
    ] {
        let o = bts(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

/// A node that serialises only when it is one of the first three.
#[derive(Debug, serde::Deserialize)]
struct Fragile(u64);

impl serde::Serialize for Fragile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            0..=2 => s.serialize_u64(self.0),
            _ => Err(serde::ser::Error::custom("fragile")),
        }
    }
}

/// A complete binary tree of height 22 of fragile nodes, numbered in heap order.
struct FragileBinary;

impl Tree for FragileBinary {
    type Node = Fragile;
    type Children<'a> = std::vec::IntoIter<Fragile>;
    fn root(&self) -> Fragile {
        Fragile(0)
    }
    fn children<'a>(&'a self, node: &Fragile, depth: u32) -> Self::Children<'a> {
        match depth {
            22 => Vec::new().into_iter(),
            _ => vec![Fragile(2 * node.0 + 1), Fragile(2 * node.0 + 2)].into_iter(),
        }
    }
}

/// Starts a run of the fragile tree on a thread; its outcome comes on the receiver.
fn start_fragile(options: RunOptions) -> std::sync::mpsc::Receiver<Result<bts::Outcome, bts::RunError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ =
            tx.send(Run::new("fragile", FragileBinary).options(options).run(&mut std::io::sink()).map(|f| f.outcome));
    });
    rx
}

/// A node that does not serialise, in random polling, where nodes are serialised only when a
/// worker hands them on: the worker's thread dies, and the run fails at once, naming the node,
/// rather than waiting for that worker forever.
#[test]
fn a_node_that_does_not_serialise_fails_a_polling_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = RunOptions {
        checkpoint: Some(dir.path().join("run.ckpt")),
        checkpoint_every: Some(Duration::from_millis(10)),
        ..polling(2, SplitRule::Alternate, PollingStart::Selective)
    };
    let rx = start_fragile(options);
    let outcome = rx.recv_timeout(Duration::from_secs(60)).expect("the run did not end within 60 s");
    match outcome {
        Ok(bts::Outcome::Failed(f)) => assert!(f.message.contains("cannot serialise node"), "{f:?}"),
        other => panic!("{other:?}"),
    }
}

#[derive(clap::Parser)]
#[command(name = "fragile", no_binary_name = true)]
struct NoArgs {}

/// The same on a remote worker process (here a thread running `bts worker`): the run fails at
/// once, naming the node and the worker, rather than waiting for the dead thread's pause; the
/// worker ends.
#[test]
fn a_remote_polling_worker_whose_thread_dies_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let address = dir.path().join("address");
    let options = RunOptions {
        workers: 0,
        listen: Some(bts::ListenOptions {
            address_file: Some(address.clone()),
            ..bts::ListenOptions::new("127.0.0.1:0")
        }),
        checkpoint: Some(dir.path().join("run.ckpt")),
        checkpoint_every: Some(Duration::from_millis(10)),
        ..polling(0, SplitRule::Alternate, PollingStart::Selective)
    };
    let rx = start_fragile(options);
    let mut registry = bts::Registry::empty();
    registry.register::<NoArgs, _>("fragile", |_| Ok(FragileBinary));
    let worker = std::thread::spawn(move || {
        let args = ["bts", "worker", "--threads", "2", "--retry", "10", "--connect-file", address.to_str().unwrap()];
        bts::cli::run(&registry, args.map(Into::into))
    });
    let outcome = rx.recv_timeout(Duration::from_secs(60)).expect("the run did not end within 60 s");
    match outcome {
        Ok(bts::Outcome::Failed(f)) => {
            assert!(f.message.contains("cannot serialise node"), "{f:?}");
            assert!(f.message.contains("remote worker at 127.0.0.1:"), "{f:?}");
        }
        other => panic!("{other:?}"),
    }
    // It is told the run is over, rather than trying to join it again for its 10 s.
    wait_until(Duration::from_secs(5), || worker.is_finished(), || "the worker did not end within 5 s".into());
    assert_eq!(worker.join().unwrap(), bts::cli::Exit::Complete);
}

/// A second signal ends a polling run before its pause can save it: the last checkpoint stays,
/// and the message says so, with how many nodes the resumed run visits again and how many
/// records it prints again (they went to stdout); a stop whose pause did save says it wrote the
/// checkpoint. Either way the message matches what the checkpoint holds.
#[test]
fn a_polling_run_stopped_at_once_says_what_its_checkpoint_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, s) = (dir.path().join("c.ck"), dir.path().join("s.json"));
    for _ in 0..4 {
        let _ = std::fs::remove_file(&ck);
        let mut run = bts_command()
            .args(["run", "--mode", "polling", "--workers", "2", "--progress", "never", "--checkpoint"])
            .args([ck.to_str().unwrap(), "--summary-json", s.to_str().unwrap(), "queens", "--n", "14"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until(Duration::from_secs(30), || ck.exists(), || "no checkpoint".into());
        std::thread::sleep(Duration::from_millis(50));
        signal(&run, "-INT");
        signal(&run, "-TERM");
        let status = wait_bounded(&mut run, Duration::from_secs(30));
        let log = stderr_of(&mut run);
        assert_eq!(status.code(), Some(3), "{log}");
        let said: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
        let held = inspect(&ck)["counters"].clone();
        let nodes = said["nodes"].as_u64().unwrap() - held["nodes"].as_u64().unwrap();
        let records = said["outputs"].as_u64().unwrap() - held["outputs"].as_u64().unwrap();
        // The second signal does not say it saves (a pause would).
        assert!(!log.contains("saving what is committed"), "{log}");
        if log.contains("second signal") {
            assert!(log.contains("second signal: quitting now; the last checkpoint stays"), "{log}");
        }
        if nodes == 0 {
            assert!(log.contains("checkpoint written to"), "{log}");
        } else {
            let expected =
                format!("the {nodes} nodes visited since are visited again, and the {records} records sent to stdout");
            assert!(log.contains(&expected), "expected {expected:?} in {log}");
        }
    }
}
