//! The library API and the command line around a user's tree that misbehaves.

use bts::cli::Exit;
use bts::{BudgetConfig, Outcome, Registry, Run, RunOptions, SchedulerConfig, Tree};
use clap::Parser;
use std::fmt::Write;

/// A complete tree of the given branching and height; node ids are heap-style numbers, and every
/// node is an output record. Visiting node `panic_at` panics.
struct Faulty {
    branching: u64,
    height: u32,
    panic_at: u64,
}

impl Tree for Faulty {
    type Node = u64;
    type Children<'a> = std::vec::IntoIter<u64>;

    fn root(&self) -> u64 {
        0
    }

    fn children(&self, node: &u64, depth: u32) -> Self::Children<'_> {
        if *node == self.panic_at {
            panic!("cannot expand node {node}");
        }
        let kids: Vec<u64> = if depth < self.height {
            (1..=self.branching).map(|i| node * self.branching + i).collect()
        } else {
            Vec::new()
        };
        kids.into_iter()
    }

    fn output(&self, node: &u64, _depth: u32, out: &mut String) -> bool {
        write!(out, "{node}").unwrap();
        true
    }
}

fn small_budget(workers: usize) -> RunOptions {
    RunOptions {
        workers,
        scheduler: SchedulerConfig {
            budget: BudgetConfig { initial: 20, fixed: true, ..BudgetConfig::default() },
            ..SchedulerConfig::default()
        },
        ..RunOptions::default()
    }
}

/// Committed records are whole lines, distinct node ids, and none from the failed job.
fn check_committed(output: &[u8], failed_node: u64) {
    let text = std::str::from_utf8(output).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a record is cut");
    let mut ids: Vec<u64> = text.lines().map(|l| l.parse().expect("a whole record")).collect();
    assert!(!ids.contains(&failed_node), "the failed job's records were committed");
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "a record was committed twice");
}

#[test]
fn a_panicking_oracle_fails_the_run_naming_the_node() {
    let tree = Faulty { branching: 3, height: 9, panic_at: 4000 };
    let mut output = Vec::new();
    let finished = Run::new("faulty", tree).options(small_budget(2)).run(&mut output).unwrap();
    let Outcome::Failed(failure) = &finished.outcome else { panic!("outcome {:?}", finished.outcome) };
    assert!(failure.message.contains("cannot expand node 4000"), "{}", failure.message);
    assert!(!finished.summary.complete);
    assert_eq!(finished.summary.outcome, "failed");
    // The failed job started at node 4000 or at an ancestor of it.
    let start: u64 = failure.node.parse().expect("the node's debug form");
    let mut v = 4000;
    while v != start {
        assert!(v > 0, "job start {start} is not an ancestor of 4000");
        v = (v - 1) / 3;
    }
    check_committed(&output, 4000);
    assert!(finished.summary.totals.outputs > 0);
    assert_eq!(finished.summary.totals.outputs as usize, std::str::from_utf8(&output).unwrap().lines().count());
}

#[derive(Parser)]
#[command(name = "faulty", no_binary_name = true)]
struct FaultyArgs {
    #[arg(long)]
    panic_at: u64,
}

#[test]
fn the_command_line_exits_1_naming_the_node_and_keeps_committed_output() {
    let mut registry = Registry::builtin();
    registry.register::<FaultyArgs, _>("faulty", |a| Ok(Faulty { branching: 3, height: 8, panic_at: a.panic_at }));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("records.txt");
    let args = ["bts", "run", "--workers", "2", "--budget", "5", "--fixed-budget", "--output", out.to_str().unwrap()];
    let args = args.into_iter().chain(["faulty", "--panic-at", "1000"]).map(Into::into);
    assert_eq!(bts::cli::run(&registry, args), Exit::Failure);
    check_committed(&std::fs::read(&out).unwrap(), 1000);
}

#[test]
fn a_user_tree_without_failures_counts_exactly() {
    // 1 + 3 + ... + 3^7 nodes.
    let tree = Faulty { branching: 3, height: 7, panic_at: u64::MAX };
    let finished = Run::new("tree", tree).options(small_budget(3)).run(&mut std::io::sink()).unwrap();
    assert_eq!(finished.outcome, Outcome::Complete);
    assert_eq!(finished.summary.totals.nodes, (3u64.pow(8) - 1) / 2);
    assert_eq!(finished.summary.totals.leaves, Some(3u64.pow(7)));
}

/// Options no run can use are refused, in both modes, as the command line refuses them: a random
/// polling run with a node limit of 0 waited for ever.
#[test]
fn options_no_run_can_use_are_refused() {
    for mode in [bts::RunMode::Budget, bts::RunMode::Polling { split: Default::default(), start: Default::default() }] {
        let tree = || Faulty { branching: 3, height: 5, panic_at: u64::MAX };
        // A time limit ends the run if the refusal is missing.
        let bounded = |o: RunOptions| RunOptions { mode, time_limit: Some(std::time::Duration::from_secs(20)), ..o };
        let mut no_nodes = bounded(small_budget(2));
        no_nodes.scheduler.node_limit = Some(0);
        let no_workers = bounded(small_budget(0));
        for (options, what) in [(no_nodes, "a node limit must be at least 1"), (no_workers, "at least one worker")] {
            match Run::new("tree", tree()).options(options).run(&mut std::io::sink()) {
                Err(bts::RunError::Setup(m)) => assert!(m.contains(what), "{m}"),
                other => panic!("{mode:?}: not refused ({what}): {:?}", other.map(|f| f.outcome)),
            }
        }
    }
}

#[test]
fn a_failed_run_leaves_a_checkpoint_holding_the_failed_job() {
    let mut registry = Registry::builtin();
    registry.register::<FaultyArgs, _>("faulty", |a| Ok(Faulty { branching: 3, height: 8, panic_at: a.panic_at }));
    let dir = tempfile::tempdir().unwrap();
    let (out, ck) = (dir.path().join("records.txt"), dir.path().join("run.ckpt"));
    let args = ["bts", "run", "--workers", "2", "--budget", "5", "--fixed-budget"];
    let args = args.into_iter().chain(["--output", out.to_str().unwrap(), "--checkpoint", ck.to_str().unwrap()]);
    let args = args.chain(["faulty", "--panic-at", "1000"]).map(Into::into);
    assert_eq!(bts::cli::run(&registry, args), Exit::Failure);
    let checkpoint = bts_checkpoints::load(&ck).unwrap();
    let output = std::fs::read(&out).unwrap();
    assert_eq!(checkpoint.output_len, output.len() as u64);
    check_committed(&output, 1000);
    // The failed job's start node (1000 or an ancestor) waits in the checkpoint's job list.
    let starts: Vec<u64> = checkpoint.jobs.iter().map(|p| postcard::from_bytes(p.node.as_slice()).unwrap()).collect();
    let mut v = 1000u64;
    let mut ancestors = vec![v];
    while v > 0 {
        v = (v - 1) / 3;
        ancestors.push(v);
    }
    assert!(starts.iter().any(|s| ancestors.contains(s)), "no job covers node 1000: {starts:?}");
    // The run is not over: resuming it would retry the failed job.
    assert!(!checkpoint.is_complete());
}

#[test]
fn a_panicking_oracle_in_polling_mode_stops_the_run_with_the_node_in_the_checkpoint() {
    let mut registry = Registry::builtin();
    registry.register::<FaultyArgs, _>("faulty", |a| Ok(Faulty { branching: 3, height: 9, panic_at: a.panic_at }));
    let dir = tempfile::tempdir().unwrap();
    let (out, ck) = (dir.path().join("records.txt"), dir.path().join("run.ckpt"));
    let args = ["bts", "run", "--mode", "polling", "--workers", "3", "--output", out.to_str().unwrap()];
    let args = args.into_iter().chain(["--checkpoint", ck.to_str().unwrap(), "faulty", "--panic-at", "4000"]);
    assert_eq!(bts::cli::run(&registry, args.map(Into::into)), Exit::Failure);
    let checkpoint = bts_checkpoints::load(&ck).unwrap();
    let output = std::fs::read(&out).unwrap();
    assert_eq!(checkpoint.output_len, output.len() as u64);
    check_committed(&output, 4000);
    let nodes: Vec<u64> = checkpoint.jobs.iter().map(|p| postcard::from_bytes(p.node.as_slice()).unwrap()).collect();
    // The failed node is kept for a resume, on its own or in the subtree of a kept ancestor (the
    // search it failed in is undone).
    let covers = |&v: &u64| std::iter::successors(Some(4000u64), |&x| (x > 0).then(|| (x - 1) / 3)).any(|a| a == v);
    assert!(nodes.iter().any(covers), "no kept node covers the failed node: {nodes:?}");
    // Committed nodes and waiting subtrees add up to the whole tree (3^10 - 1) / 2 nodes.
    let subtree = |v: u64| {
        let (mut size, mut level, mut width) = (0u64, 0u32, 1u64);
        let mut d = 0;
        let mut x = v;
        while x > 0 {
            x = (x - 1) / 3;
            d += 1;
        }
        while d + level <= 9 {
            size += width;
            width *= 3;
            level += 1;
        }
        size
    };
    let waiting: u64 = nodes.iter().map(|&v| subtree(v)).sum();
    assert_eq!(checkpoint.totals.nodes + waiting, (3u64.pow(10) - 1) / 2);
}

/// A checkpoint that cannot be read is a `RunError` too: `load_checkpoint(path)?` works in a
/// function that returns one, as the README's resume line has it.
#[test]
fn a_checkpoint_that_cannot_be_read_is_a_run_error() {
    fn resume(path: &std::path::Path) -> Result<bts::Finished, bts::RunError> {
        let searcher: std::sync::Arc<dyn bts::Searcher> =
            std::sync::Arc::new(bts::TreeSearcher::new(Faulty { branching: 2, height: 3, panic_at: u64::MAX }));
        bts::Run::resume(bts::load_checkpoint(path)?, searcher).run(&mut std::io::sink())
    }
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let error = resume(&empty).unwrap_err();
    assert!(matches!(error, bts::RunError::Load(bts::LoadError::Empty)), "{error}");
    assert_eq!(error.to_string(), "cannot resume: the file is empty");
}

/// A legacy program's searcher used for a second run starts it afresh: the first run's stop no
/// longer makes its workers give failing jobs up (a job that failed for good was given up and
/// handed out again, without end).
#[test]
fn a_searcher_used_again_reports_the_failures_of_its_new_run() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("prog.sh");
    std::fs::write(&program, "#!/bin/sh\n[ \"$BTS_NODE\" = a ] && exit 1\necho 'unexplored 1 a'\necho 'done 1'\n")
        .unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let spec = bts::TreeSpec::new("exec", ["--retries", "2", "--", program.to_str().unwrap()]);
    let searcher = Registry::builtin().build(&spec).unwrap();
    let run = |options: RunOptions| {
        Run::with_searcher(spec.clone(), std::sync::Arc::clone(&searcher)).options(options).run(&mut std::io::sink())
    };
    let one = RunOptions { workers: 1, ..RunOptions::default() };
    // Stopped by a node limit: the runners were told the run stops.
    let limited = SchedulerConfig { node_limit: Some(1), ..SchedulerConfig::default() };
    let first = run(RunOptions { scheduler: limited, ..one.clone() }).unwrap();
    assert_eq!(first.outcome, Outcome::Stopped(bts::StopReason::NodeLimit));
    let second = run(RunOptions { time_limit: Some(std::time::Duration::from_secs(20)), ..one }).unwrap();
    assert!(matches!(second.outcome, Outcome::Failed(_)), "{:?}", second.outcome);
}

/// A complete ternary tree of height 6 whose leaves are records, with an `output` that breaks the
/// rules of `Tree::output` in one of three ways.
struct Careless {
    how: &'static str,
}

impl Tree for Careless {
    type Node = u64;
    type Children<'a> = std::vec::IntoIter<u64>;

    fn root(&self) -> u64 {
        0
    }

    fn children(&self, node: &u64, depth: u32) -> Self::Children<'_> {
        let kids: Vec<u64> = if depth < 6 { (1..=3).map(|i| node * 3 + i).collect() } else { Vec::new() };
        kids.into_iter()
    }

    fn output(&self, node: &u64, depth: u32, out: &mut String) -> bool {
        match self.how {
            // Writes, then says there is no record.
            "junk" if depth < 6 => {
                out.push_str("JUNK");
                false
            }
            "replace" if depth == 6 => {
                *out = node.to_string();
                true
            }
            "newline" if depth == 6 => {
                write!(out, "{node}\n{node}").unwrap();
                true
            }
            _ if depth == 6 => {
                write!(out, "{node}").unwrap();
                true
            }
            _ => false,
        }
    }
}

/// What an output returning false wrote is dropped; an output that replaces the job's records
/// or writes a newline fails the run, where it used to lose records or count two lines as one.
#[test]
fn an_output_that_breaks_the_rules_loses_no_record_without_a_word() {
    // The leaves of the heap-numbered ternary tree of height 6: ids (3^6 - 1) / 2 to (3^7 - 3) / 2.
    let leaves: Vec<String> = ((3u64.pow(6) - 1) / 2..=(3u64.pow(7) - 3) / 2).map(|n| n.to_string()).collect();
    for mode in [bts::RunMode::Budget, bts::RunMode::Polling { split: Default::default(), start: Default::default() }] {
        let options = RunOptions { mode, ..small_budget(2) };
        let mut output = Vec::new();
        let finished =
            Run::new("careless", Careless { how: "junk" }).options(options.clone()).run(&mut output).unwrap();
        assert_eq!(finished.outcome, Outcome::Complete);
        let mut lines: Vec<String> = String::from_utf8(output).unwrap().lines().map(String::from).collect();
        lines.sort_by_key(|l| l.parse::<u64>().unwrap_or(0));
        assert_eq!(lines, leaves, "{mode:?}");
        for (how, says, count_only) in [
            ("replace", "may only append", false),
            ("newline", "a record is one line", false),
            // Counting asks `has_output`, whose default writes the record to throw it away.
            ("newline", "a record is one line", true),
        ] {
            let options = RunOptions { count_only, ..options.clone() };
            let mut output = Vec::new();
            let finished = Run::new("careless", Careless { how }).options(options).run(&mut output).unwrap();
            let Outcome::Failed(failure) = &finished.outcome else { panic!("{how}: {:?}", finished.outcome) };
            assert!(failure.message.contains(says), "{how}: {}", failure.message);
            // What was committed before the failure is whole records, each once.
            let text = String::from_utf8(output).unwrap();
            assert!(text.is_empty() || text.ends_with('\n'), "{how}, {mode:?}: {text:?}");
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort();
            let before = lines.len();
            lines.dedup();
            assert_eq!(lines.len(), before, "{how}, {mode:?}: a record twice");
            assert!(lines.iter().all(|l| leaves.iter().any(|leaf| leaf == l)), "{how}, {mode:?}: {text:?}");
        }
    }
}

/// A tree whose root alone is larger than a frame to a remote worker may be (64 MiB).
struct Heavy;

impl Tree for Heavy {
    type Node = Vec<u8>;
    type Children<'a> = std::iter::Empty<Vec<u8>>;

    fn root(&self) -> Vec<u8> {
        vec![7; 65 << 20]
    }

    fn children(&self, _node: &Vec<u8>, _depth: u32) -> Self::Children<'_> {
        std::iter::empty()
    }
}

#[derive(Parser)]
#[command(name = "heavy", no_binary_name = true)]
struct NoArgs {}

/// A job whose node cannot be sent to a remote worker fails the run, saying why: the worker was
/// dropped for it, its job handed to the next worker, and so on until none was left and the run
/// waited for ever.
#[test]
fn a_node_too_large_for_a_remote_worker_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let address = dir.path().join("address");
    let options = RunOptions {
        workers: 0,
        listen: Some(bts::ListenOptions {
            address_file: Some(address.clone()),
            ..bts::ListenOptions::new("127.0.0.1:0")
        }),
        ..RunOptions::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Run::new("heavy", Heavy).options(options).run(&mut std::io::sink()).map(|f| f.outcome));
    });
    let mut registry = Registry::empty();
    registry.register::<NoArgs, _>("heavy", |_| Ok(Heavy));
    std::thread::spawn(move || {
        let args = ["bts", "worker", "--retry", "5", "--connect-file", address.to_str().unwrap()];
        bts::cli::run(&registry, args.map(Into::into))
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the run did not end within 60 s") {
        Ok(Outcome::Failed(f)) => {
            assert!(f.message.contains("larger than the 64 MiB frames that reach remote workers"), "{f:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// A run called from async code (inside a tokio runtime, as under `#[tokio::main]`), listening for
/// remote workers: bts blocks on its own runtime, which tokio refuses inside another. It used to
/// panic as the run ended, its result lost.
#[test]
fn a_run_listening_for_workers_works_inside_a_tokio_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let finished = runtime.block_on(async {
        let tree = Faulty { branching: 3, height: 7, panic_at: u64::MAX };
        let options = RunOptions { listen: Some(bts::ListenOptions::new("127.0.0.1:0")), ..small_budget(1) };
        Run::new("tree", tree).options(options).run(&mut std::io::sink()).unwrap()
    });
    assert_eq!(finished.outcome, Outcome::Complete);
    assert_eq!(finished.summary.totals.nodes, (3u64.pow(8) - 1) / 2);
}

/// The child of `stop_on_signals_stops_a_library_run_cleanly`, in a process of its own (the
/// handlers are the process's): runs a tree of 21,523,360 nodes with a checkpoint and bts's signal
/// handling, and prints its outcome and node count.
#[test]
fn stop_on_signals_child() {
    let Some(checkpoint) = std::env::var_os("BTS_SIGNALS_CHILD") else { return };
    let tree = Faulty { branching: 3, height: 15, panic_at: u64::MAX };
    let options = RunOptions { checkpoint: Some(checkpoint.into()), ..small_budget(2) };
    let run = Run::new("tree", tree).options(options);
    bts::stop_on_signals(run.stopper());
    println!("ready");
    let finished = run.run(&mut std::io::sink()).unwrap();
    println!("ended {} {}", finished.summary.outcome, finished.summary.totals.nodes);
}

/// `bts::stop_on_signals` gives a library run the command line's Ctrl-C: the run stops cleanly,
/// its checkpoint holds what it counted, and a resume completes the exact count.
#[test]
fn stop_on_signals_stops_a_library_run_cleanly() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = dir.path().join("run.ckpt");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "library::stop_on_signals_child", "--nocapture", "--test-threads", "1"])
        .env("BTS_SIGNALS_CHILD", &checkpoint)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines().map(Result::unwrap);
    assert!(lines.by_ref().any(|l| l.contains("ready")), "the child did not start its run");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let ended = lines.find(|l| l.starts_with("ended ")).expect("the child did not end its run");
    assert!(child.wait().unwrap().success());
    let words: Vec<&str> = ended.split(' ').collect();
    assert_eq!(words[1], "signal", "{ended}");
    let counted: u64 = words[2].parse().unwrap();
    let saved = bts::load_checkpoint(&checkpoint).unwrap();
    assert_eq!(saved.totals.nodes, counted);
    assert!(counted < (3u64.pow(16) - 1) / 2, "the run was not stopped");
    let tree = Faulty { branching: 3, height: 15, panic_at: u64::MAX };
    let searcher = std::sync::Arc::new(bts::TreeSearcher::new(tree));
    let finished = Run::resume(saved, searcher).options(small_budget(2)).run(&mut std::io::sink()).unwrap();
    assert_eq!(finished.outcome, Outcome::Complete);
    assert_eq!(finished.summary.totals.nodes, (3u64.pow(16) - 1) / 2);
}

/// The child of `a_panicking_tree_is_reported_once_with_where_it_panicked`: the command line with
/// the panic hook of `main_with`, on a tree that panics at node 1000.
#[test]
fn panic_report_child() {
    if std::env::var_os("BTS_PANIC_CHILD").is_none() {
        return;
    }
    bts_worker::quiet_caught_panics();
    let mut registry = Registry::builtin();
    registry.register::<FaultyArgs, _>("faulty", |a| Ok(Faulty { branching: 3, height: 8, panic_at: a.panic_at }));
    let args = ["bts", "run", "--workers", "2", "--budget", "5", "--fixed-budget", "faulty", "--panic-at", "1000"];
    assert_eq!(bts::cli::run(&registry, args.map(Into::into)), Exit::Failure);
}

/// A panic in a tree is said by the job's failure and the run's error, which name where it
/// happened; the default hook printed it a third time (it still does with RUST_BACKTRACE).
#[test]
fn a_panicking_tree_is_reported_once_with_where_it_panicked() {
    for backtrace in ["0", "1"] {
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "library::panic_report_child", "--nocapture", "--test-threads", "1"])
            .env("BTS_PANIC_CHILD", "1")
            .env("RUST_BACKTRACE", backtrace)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(err.contains("panicked at"), backtrace == "1", "{err}");
        if backtrace == "1" {
            // The default hook's backtraces, written by the threads that panicked, may cut into
            // the lines bts writes meanwhile.
            continue;
        }
        let failed = err.lines().find(|l| l.starts_with("bts: error: a job failed")).unwrap_or_else(|| panic!("{err}"));
        assert!(failed.contains("cannot expand node 1000 (at tests/library.rs:"), "{failed}");
    }
}
