//! Checkpoints end to end: stop and resume in every way, `kill -9` at any moment, bad files.

use crate::util::*;
use bts::trees::Queens;
use bts::{Limits, Tree, search};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
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
        10 => 724,
        13 => 73_712,
        14 => 365_596,
        15 => 2_279_184,
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

/// Waits until the checkpoint at `path` counts more than `nodes` nodes: the run is under way.
fn wait_for_progress(path: &Path, nodes: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while inspect(path)["counters"]["nodes"].as_u64().unwrap() <= nodes {
        assert!(std::time::Instant::now() < deadline, "the run made no progress within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
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
        let before = inspect(&ck);
        let o = bts(&["resume", ck_s, "--workers", &workers, "--node-limit", "600000", "--summary-json", "-"]);
        // Each segment says what it carries on from, and its summary how many segments made it.
        let (nodes, jobs) = (&before["counters"]["nodes"], &before["jobs"]);
        let said = format!("bts: resuming {ck_s} (segment {segments}): {nodes} nodes and ");
        let left = if jobs == 1 { " done, 1 job left".to_string() } else { format!(" done, {jobs} jobs left") };
        assert!(stderr(&o).contains(&said) && stderr(&o).contains(&left), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!(" s in {segments} segments, ")), "{}", stderr(&o));
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
    let a = summary(&again);
    assert_eq!(a["nodes"].as_u64(), Some(nodes));
    // Nor does it count a segment, or time: the run is as the checkpoint holds it.
    let held = inspect(&ck);
    assert_eq!(a["segments"], held["segments"], "{a}\n{held}");
    assert!((a["elapsed_s"].as_f64().unwrap() - held["elapsed_s"].as_f64().unwrap()).abs() < 1e-9, "{a}\n{held}");
    assert_eq!(a["segments"], s["segments"]);
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

    // 1. A time limit. On a loaded machine it may pass before the first job is handed out, so
    // the checkpoint may hold no nodes yet; it must not say the run is complete.
    let mut args = vec!["run", "--workers", "1", "--checkpoint", ck_s, "--time-limit", "0.3"];
    args.extend(SLOW_T1);
    let o = bts(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("time-limit"));
    let nodes_1 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(!inspect(&ck)["complete"].as_bool().unwrap());

    // Each later segment is stopped once its periodic checkpoints show it has done some work.
    let resume = |workers: &str, extra: &[&str]| {
        let mut args = vec!["resume", ck_s, "--workers", workers, "--checkpoint-every", "0.05"];
        args.extend(extra);
        bts_command().args(args).stderr(Stdio::null()).spawn().unwrap()
    };

    // 2. A stop file, created while running.
    let mut child = resume("2", &["--stop-file", stop.to_str().unwrap()]);
    wait_for_progress(&ck, nodes_1);
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
    let mut child = resume("1", &[]);
    wait_for_progress(&ck, nodes_2);
    signal(&child, "-TERM");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let nodes_3 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_3 > nodes_2);

    // 4. SIGHUP (a terminal closing), once the run's stderr is gone: the run neither dies of the
    // hangup nor of the messages it can no longer write (the signal's, the log's, the summary).
    let mut args = vec!["resume", ck_s, "-v", "--checkpoint-every", "0.05"];
    args.extend(["--progress", "never"]);
    let mut child = bts_command().args(args).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stderr.take());
    wait_for_progress(&ck, nodes_3);
    signal(&child, "-HUP");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let nodes_hup = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_hup > nodes_3);

    // 5. SIGINT twice: the second stops at once, the jobs out with workers go to the checkpoint.
    let mut child = resume("2", &[]);
    wait_for_progress(&ck, nodes_hup);
    signal(&child, "-INT");
    signal(&child, "-INT");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(3));
    let nodes_4 = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
    assert!(nodes_4 > nodes_3);

    // 6. To the end: the totals of the whole run are the published ones.
    let o = bts(&["resume", ck_s, "--workers", "2", "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_t1(&s);
    assert_eq!(s["segments"].as_u64(), Some(6));
}

/// A stop ends the jobs out at their next look, however large their budgets, and they hand back
/// the rest of their search: the time limit holds (the first job alone is the whole tree, some 3 s
/// on one core), and the run resumes exactly.
#[test]
fn a_stop_ends_jobs_of_any_budget_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("t1.ckpt");
    let ck_s = ck.to_str().unwrap();
    let mut args = vec!["run", "--workers", "2", "--checkpoint", ck_s, "--time-limit", "0.3"];
    args.extend(["--budget", "inf", "--fixed-budget", "--summary-json", "-"]);
    args.extend(SLOW_T1);
    let o = bts(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!(s["outcome"], "time-limit", "{s}");
    assert!(s["elapsed_s"].as_f64().unwrap() < 2.0, "{s}");
    let held = inspect(&ck);
    assert!(!held["complete"].as_bool().unwrap());
    let o = bts(&["resume", ck_s, "--workers", "2", "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_t1(&s);
}

/// A legacy program whose tree is a root and ten leaves n0..n9, each a record. n9's job sleeps
/// (its pid in the file `$1.pid`) unless the file `$1` exists; the others leave a file `$1.<node>`.
const ONE_SLOW_JOB: &str = r#"#!/bin/sh
case "$BTS_NODE" in
root) for i in 0 1 2 3 4 5 6 7 8 9; do echo "unexplored 1 n$i"; done ;;
n9) if [ ! -e "$1" ]; then echo $$ > "$1.pid"; sleep 60; fi; echo "out n9" ;;
*) echo "out $BTS_NODE"; touch "$1.$BTS_NODE" ;;
esac
echo "done 1"
"#;

/// A run killed when dropped (at the end of a test, or when it fails half way), with the process
/// group whose id is in `group_file` (bts runs each legacy program in a group of its own).
struct Killed {
    master: std::process::Child,
    group_file: std::path::PathBuf,
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.master.kill();
        let _ = self.master.wait();
        if let Ok(group) = std::fs::read_to_string(&self.group_file) {
            let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{}", group.trim())]).status();
        }
    }
}

#[test]
fn a_stop_saves_the_run_at_once_so_a_kill_before_the_jobs_come_back_loses_only_them() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out, program, fast) =
        (dir.path().join("r.ckpt"), dir.path().join("r.txt"), dir.path().join("slow.sh"), dir.path().join("fast"));
    std::fs::write(&program, ONE_SLOW_JOB).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let mut args = vec!["run", "--workers", "2", "--budget", "1", "--fixed-budget", "--progress", "never"];
    args.extend(["--checkpoint", ck_s, "--output", out_s, "exec", "--", program.to_str().unwrap()]);
    args.push(fast.to_str().unwrap());
    let master = bts_command().args(&args).stderr(Stdio::null()).spawn().unwrap();
    let run = Killed { master, group_file: dir.path().join("fast.pid") };
    // Every job but n9's is done while n9's sleeps.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let done = || (0..9).filter(|i| dir.path().join(format!("fast.n{i}")).exists()).count();
    while done() < 9 || !run.group_file.exists() {
        assert!(std::time::Instant::now() < deadline, "the jobs did not start within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(inspect(&ck)["counters"]["nodes"], 0, "only the run's first checkpoint yet");
    // Told to stop, the run saves itself before n9's job comes back; then it is killed (a batch
    // system's grace period running out).
    signal(&run.master, "-TERM");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while inspect(&ck)["counters"]["nodes"] == 0 {
        assert!(std::time::Instant::now() < deadline, "no checkpoint written within 10 s of the stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(run);
    // The root and the nine fast leaves (committed before the stop, but for a report on a loaded
    // machine); n9's job is kept by its start node.
    let saved = inspect(&ck);
    assert!(saved["counters"]["nodes"].as_u64().unwrap() > 1, "{saved}");
    assert_eq!(saved["complete"], false);
    // Resumed, n9's job is done again, and quickly; each record is in the output once.
    std::fs::write(&fast, "").unwrap();
    let o = bts(&["resume", ck_s, "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!((summary(&o)["nodes"].as_u64(), summary(&o)["outputs"].as_u64()), (Some(11), Some(10)));
    assert_records_once(&out, 10);
}

/// A run quit at once (a second signal) leaves no program running: the job that was still out
/// with a worker dies with bts, whatever its thread was doing.
#[test]
fn a_run_quit_at_once_leaves_no_program_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, slow) = (dir.path().join("q.ckpt"), dir.path().join("slow"));
    let program = script(dir.path(), "slow.sh", ONE_SLOW_JOB);
    let mut args = vec!["run", "--workers", "2", "--budget", "1", "--fixed-budget", "--progress", "never"];
    args.extend(["--checkpoint", ck.to_str().unwrap(), "--count-only", "exec", "--", program.to_str().unwrap()]);
    args.push(slow.to_str().unwrap());
    let master = bts_command().args(&args).stderr(Stdio::null()).spawn().unwrap();
    let mut run = Killed { master, group_file: dir.path().join("slow.pid") };
    let started = || std::fs::read_to_string(&run.group_file).is_ok_and(|p| p.ends_with('\n'));
    wait_until(Duration::from_secs(30), started, || "n9's job did not start within 30 s".into());
    let pid = std::fs::read_to_string(&run.group_file).unwrap().trim().to_string();
    let alive = || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(alive());
    signal(&run.master, "-INT");
    // The same signal again within 50 ms counts once (see `stopped_by_timeout_...`).
    std::thread::sleep(Duration::from_millis(100));
    signal(&run.master, "-INT");
    assert_eq!(wait_bounded(&mut run.master, Duration::from_secs(30)).code(), Some(3));
    wait_until(Duration::from_secs(5), || !alive(), || format!("the job's program {pid} outlived bts by 5 s"));
}

/// GNU `timeout` sends its SIGTERM to bts and then to its process group, microseconds apart: that
/// is one stop, which waits for the jobs out (here legacy jobs of a second) and saves, not a second
/// signal's quitting at once. The kernel merges the two when both arrive before the first is
/// handled; sent 10 ms apart they are two deliveries, and still one stop. (100 ms apart, the second
/// quits at once: `a_run_quit_at_once_leaves_no_program_behind`.) Resumed, every record is written
/// once.
#[test]
fn a_run_stopped_by_timeout_stops_once_and_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out, marks) = (dir.path().join("t.ckpt"), dir.path().join("out"), dir.path().join("started"));
    let text = "#!/bin/sh\nif [ \"$BTS_NODE\" = root ]; then\n  for i in 0 1 2 3 4 5; do echo \"unexplored 1 n$i\"; done\n\
                else\n  touch \"$1.$BTS_NODE\"; sleep 1; echo \"out $BTS_NODE\"\nfi\necho 'done 1'\n";
    let program = script(dir.path(), "slow.sh", text);
    let mut run = vec!["run", "--workers", "2", "--progress", "never", "--checkpoint", ck.to_str().unwrap()];
    run.extend(["--output", out.to_str().unwrap(), "exec", "--", program.to_str().unwrap(), marks.to_str().unwrap()]);
    let stopped_once = |code: Option<i32>, log: &str| {
        assert_eq!(code, Some(3), "{log}");
        assert!(log.contains("SIGTERM: stopping once the workers hand their work back"), "{log}");
        assert!(!log.contains("second signal"), "{log}");
    };
    let o = Command::new("timeout")
        .args(["--preserve-status", "0.5", env!("CARGO_BIN_EXE_bts")])
        .args(&run)
        .output()
        .unwrap();
    stopped_once(o.status.code(), &stderr(&o));
    // The jobs that started, by the marks they leave.
    let marked = || {
        let files = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path());
        files.filter(|p| p.extension().is_some_and(|e| e.to_string_lossy().starts_with('n'))).collect::<Vec<_>>()
    };
    for _ in 0..2 {
        marked().iter().for_each(|p| std::fs::remove_file(p).unwrap());
        let mut child = bts_command().args(["resume", ck.to_str().unwrap()]).stderr(Stdio::piped()).spawn().unwrap();
        wait_until(Duration::from_secs(30), || !marked().is_empty(), || "no job started".into());
        let pid = child.id() as libc::pid_t;
        // SAFETY: kill only sends a signal to the child, which has not been waited for.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(10));
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = wait_bounded(&mut child, Duration::from_secs(60));
        let log = stderr_of(&mut child);
        stopped_once(status.code(), &log);
    }
    let o = bts(&["resume", ck.to_str().unwrap(), "--progress", "never"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_records_once(&out, 6);
}

/// A failed run leaves no program running, not even one a thread started as the run failed: the
/// job after the failed one, on its way to start as bts killed its programs, used to outlive it
/// (in about half the runs).
#[test]
fn a_failed_run_leaves_no_program_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let text = "#!/bin/sh\necho $$ >> \"$1\"\nif [ \"$BTS_NODE\" = root ]; then\n\
                for i in 1 2 3 4 5 6; do echo \"unexplored 1 c$i\"; done\n  echo 'done 1'\nelse\n  sleep 60\nfi\n";
    let program = script(dir.path(), "stuck.sh", text);
    let args = ["run", "--workers", "2", "--progress", "never", "--count-only", "exec", "--job-timeout", "1"];
    let args = [&args[..], &["--retries", "0", "--", program.to_str().unwrap(), pids.to_str().unwrap()]].concat();
    for _ in 0..4 {
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    }
    let alive = |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    let started = std::fs::read_to_string(&pids).unwrap();
    let outlived = || started.lines().filter(|p| alive(p)).collect::<Vec<_>>();
    wait_until(Duration::from_secs(5), || outlived().is_empty(), || format!("programs outlived bts: {:?}", outlived()));
}

/// A program dies with bts even when bts is killed with -9 and has no time to kill it, with what
/// it started (here a shell script's `sleep`): it would otherwise run on, to its --job-timeout,
/// beside the resumed run doing its job again.
#[test]
fn a_program_dies_with_bts_killed_by_signal_9() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("slow.pid");
    let text = "#!/bin/sh\ncase \"$BTS_NODE\" in\nroot) echo 'unexplored 1 a';;\n\
                a) echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; sleep 60;;\nesac\necho 'done 1'\n";
    let program = script(dir.path(), "slow.sh", text);
    let args = ["run", "--workers", "1", "--progress", "never", "--count-only", "exec", "--"];
    let master = bts_command()
        .args([&args[..], &[program.to_str().unwrap(), pid_file.to_str().unwrap()]].concat())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut run = Killed { master, group_file: pid_file.clone() };
    wait_until(Duration::from_secs(30), || pid_file.exists(), || "the job did not start within 30 s".into());
    // The program's group: the script and its sleep.
    let group = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    let members = || {
        let stats = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok());
        // Fields after the command's closing parenthesis: state, ppid, pgrp.
        stats
            .filter_map(|s| s.rsplit_once(") ").map(|(_, rest)| rest.split(' ').map(String::from).collect::<Vec<_>>()))
            .filter(|f| f[2] == group && f[0] != "Z")
            .count()
    };
    wait_until(Duration::from_secs(10), || members() >= 2, || "the script's sleep did not start".into());
    signal(&run.master, "-KILL");
    wait_bounded(&mut run.master, Duration::from_secs(10));
    let outlived = || format!("{} of the job's processes outlived bts by 5 s", members());
    wait_until(Duration::from_secs(5), || members() == 0, outlived);
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
    // Spelled as the summary and the command line spell them.
    assert_eq!((&info["options"]["order"], &info["options"]["mode"]), (&json!("fifo"), &json!("budget")));
    assert_eq!(info["options"]["budget"]["initial"], 7);
    assert_eq!(info["options"]["budget"]["fixed"], true);
    assert_eq!(info["options"]["count_only"], true);
    assert_eq!((&info["format_version"], &info["branch_and_bound"]), (&json!(7), &json!(false)));
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

/// A run replaces its checkpoint file: `bts run` (and a resume writing elsewhere) refuses a file
/// holding another run's unfinished checkpoint, or anything that is not a checkpoint, rather than
/// lose it; a complete run's checkpoint and an empty file may go.
#[test]
fn a_run_does_not_replace_an_unfinished_checkpoint_or_a_file_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (unfinished, source, complete, empty) = (path("days.ckpt"), path("notes.py"), path("done.ckpt"), path("new"));
    let o = bts(&["run", "--checkpoint", &unfinished, "--count-only", "--node-limit", "500", "queens", "--n", "8"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    std::fs::write(&source, "print('keep me')\n").unwrap();
    for (target, message) in [(&unfinished, "holds the checkpoint of an unfinished run"), (&source, "cannot be read")] {
        let o = bts(&["run", "--checkpoint", target, "--count-only", "queens", "--n", "4"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(message), "{}", stderr(&o));
        let o = bts(&["resume", &unfinished, "--checkpoint", target, "--count-only"]);
        if target == &unfinished {
            // Carrying a run on in its own file is what resume is for.
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        } else {
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(stderr(&o).contains(message), "{}", stderr(&o));
        }
    }
    assert_eq!(std::fs::read_to_string(&source).unwrap(), "print('keep me')\n");
    // The resumed run completed in place: its file may now be replaced, as may an empty one.
    std::fs::write(&complete, std::fs::read(&unfinished).unwrap()).unwrap();
    std::fs::write(&empty, "").unwrap();
    for target in [&complete, &empty] {
        let o = bts(&["run", "--checkpoint", target, "--count-only", "queens", "--n", "4"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// A checkpoint named through a symbolic link is the file the link names: saves replace that file
/// (a rename over the link would leave it stale), and its lock is that file's.
#[test]
fn a_checkpoint_named_through_a_link_is_the_file_it_names() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    let (real, link) = (dir.path().join("store/run.ckpt"), dir.path().join("link.ckpt"));
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let nodes = || inspect(&real)["counters"]["nodes"].as_u64().unwrap();
    let o = bts(&[
        "run",
        "--checkpoint",
        link.to_str().unwrap(),
        "--count-only",
        "--node-limit",
        "500",
        "queens",
        "--n",
        "8",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(link.is_symlink());
    assert_eq!(nodes(), 500);
    let o = bts(&["resume", link.to_str().unwrap(), "--node-limit", "500"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(link.is_symlink());
    assert_eq!(nodes(), 1000);
    // One lock, whichever name: beside the file, none beside the link.
    assert!(dir.path().join("store/.run.ckpt.lock").exists());
    assert!(!dir.path().join(".link.ckpt.lock").exists());
}

#[test]
fn an_output_file_shorter_than_the_committed_records_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    std::fs::write(&out, "short\n").unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not this run's output"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "short\n");
}

#[test]
fn a_missing_output_file_is_refused_saying_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    let held = std::fs::metadata(&out).unwrap().len();
    std::fs::remove_file(&out).unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("is missing: the run wrote {held} bytes")), "{}", stderr(&o));
    assert!(!out.exists(), "a refused resume made the output");
}

#[test]
fn a_missing_output_file_that_held_nothing_yet_is_made_afresh() {
    // As after a full disk: the run stopped before its first records were committed, and the
    // user removed the output to make room.
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("run.ckpt"), dir.path().join("out.txt"));
    let o = bts(&["run", "--checkpoint", ck.to_str().unwrap(), "--output", out.to_str().unwrap()]
        .into_iter()
        .chain(["--node-limit", "1", "queens", "--n", "9"])
        .collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(inspect(&ck)["output"]["committed_bytes"], 0);
    std::fs::remove_file(&out).unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check_queens_output(&out, 9);
}

#[test]
fn an_output_or_checkpoint_that_is_not_a_regular_file_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (fifo, folder) = (fifo.to_str().unwrap(), dir.path().to_str().unwrap());
    for (option, path) in [("--output", "/dev/null"), ("--output", fifo), ("--output", folder), ("--checkpoint", fifo)]
    {
        // A pipe without a reader would block a plain open: the run must not wait for one.
        let mut child = bts_command()
            .args(["run", option, path, "queens", "--n", "5"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_bounded(&mut child, Duration::from_secs(20));
        let message = stderr_of(&mut child);
        assert_eq!(status.code(), Some(2), "{option} {path}: {message}");
        assert!(message.contains("not a regular file"), "{option} {path}: {message}");
    }
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

/// Waits until `path` exists (a run has written its first checkpoint).
fn wait_for(path: &Path) {
    wait_until(Duration::from_secs(30), || path.exists(), || format!("{} never appeared", path.display()));
}

/// A run of queens stopped by its node limit: its checkpoint and output file, both in `dir`.
fn stopped_queens_run(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (ck, out) = (dir.join("run.ckpt"), dir.join("out.txt"));
    stop_queens_run(&ck, &out);
    (ck, out)
}

/// Runs queens until its node limit, with checkpoint `ck` and output `out`.
fn stop_queens_run(ck: &Path, out: &Path) {
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
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(std::fs::metadata(out).unwrap().len() > 0, "the test needs records written before the stop");
}

#[test]
fn a_second_bts_on_the_same_checkpoint_or_output_is_refused_until_the_first_dies() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("run.ckpt"), dir.path().join("out.txt"));
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let mut args = vec!["run", "--workers", "1", "--checkpoint", ck_s, "--output", out_s];
    // A run far longer than the attempts below (each waits a second for the lock): it is killed.
    args.extend(["uts", "--preset", "T1L", "-g", "10"]);
    let mut first = bts_command().args(&args).stderr(Stdio::null()).spawn().unwrap();
    wait_for(&ck);
    let other = dir.path().join("other");
    let other_s = other.to_str().unwrap();
    let attempts: [(&[&str], &str); 4] = [
        (&["resume", ck_s], "in use by another bts"),
        (&["resume", ck_s, "--checkpoint", other_s], "the output file"),
        (&["run", "--checkpoint", ck_s, "--count-only", "queens", "--n", "5"], "the checkpoint"),
        (&["run", "--output", out_s, "queens", "--n", "5"], "the output file"),
    ];
    for (second, what) in attempts {
        let o = bts(second);
        assert_eq!(o.status.code(), Some(2), "{second:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(what) && stderr(&o).contains("in use"), "{second:?}: {}", stderr(&o));
    }
    assert!(stderr(&bts(&["resume", ck_s])).contains(&format!("(process {})", first.id())));
    assert!(!other.exists(), "a refused resume wrote a checkpoint");
    // The lock dies with its process: after kill -9 the run resumes.
    signal(&first, "-KILL");
    first.wait().unwrap();
    let o = bts(&["resume", ck_s, "--time-limit", "0.2"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

#[test]
fn an_output_rewritten_or_appended_to_after_the_run_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    let records = std::fs::read(&out).unwrap();
    // Another run's records in the same number of bytes: the length alone would pass.
    let mut lines: Vec<&[u8]> = records.split_inclusive(|&b| b == b'\n').collect();
    lines.reverse();
    let rewritten = lines.concat();
    assert_ne!(rewritten, records);
    let appended = [&records[..], b"a line of the user's\n"].concat();
    // Longer, and not this run's at all: no advice to cut it to the committed length.
    let longer = [&rewritten[..], b"a line of the user's\n"].concat();
    let cut = records[..records.len() - 1].to_vec();
    for (content, message) in [
        (&cut, "it was cut short, or it is not this run's output"),
        (&rewritten, "is not this run's output"),
        (&appended, "bytes more than this checkpoint's run wrote"),
        (&longer, "is not this run's output"),
    ] {
        std::fs::write(&out, content).unwrap();
        let o = bts(&["resume", ck.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(message), "expected '{message}' in {}", stderr(&o));
        assert_eq!(&std::fs::read(&out).unwrap(), content, "a refused resume changed the output");
    }
    // The run's own output resumes to the exact records.
    std::fs::write(&out, &records).unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check_queens_output(&out, 10);
}

/// Whether records are written is the checkpoint's: a resume that asks otherwise is refused,
/// saying which way the run goes.
#[test]
fn a_resume_cannot_switch_between_writing_and_counting_records() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    let o = bts(&["resume", ck.to_str().unwrap(), "--count-only"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("its run writes them, so it resumes without --count-only"), "{}", stderr(&o));
    let counted = dir.path().join("counted.ckpt");
    let run = ["run", "--checkpoint", counted.to_str().unwrap(), "--count-only", "--node-limit", "100"];
    let o = bts(&[&run[..], &["queens", "--n", "8"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = bts(&["resume", counted.to_str().unwrap(), "--output", dir.path().join("o.txt").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("its run counts them only (--count-only), so it resumes without --output"),
        "{}",
        stderr(&o)
    );
    assert!(out.exists());
}

#[test]
fn resuming_a_complete_checkpoint_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    assert_eq!(bts(&["resume", ck.to_str().unwrap()]).status.code(), Some(0));
    let (ck_bytes, out_bytes) = (std::fs::read(&ck).unwrap(), std::fs::read(&out).unwrap());
    for _ in 0..5 {
        let o = bts(&["resume", ck.to_str().unwrap(), "--workers", "2", "--summary-json", "-"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(summary(&o)["outputs"], solutions(10));
        // The run ends at once, but its local workers were there: the summary counts them.
        assert_eq!(summary(&o)["workers"], 2, "{}", stderr(&o));
        assert_eq!(std::fs::read(&ck).unwrap(), ck_bytes);
        assert_eq!(std::fs::read(&out).unwrap(), out_bytes);
    }
    // Budget options given to a run that is over never applied: its summary shows its own.
    let own = summary(&bts(&["resume", ck.to_str().unwrap(), "--summary-json", "-"]));
    let args = ["--budget", "7", "--fixed-budget", "--order", "fifo", "--summary-json", "-"];
    let o = bts(&[&["resume", ck.to_str().unwrap()][..], &args].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!((&summary(&o)["budget"], &summary(&o)["order"]), (&own["budget"], &own["order"]));
    assert_eq!(own["order"], "lifo");
    // With remote workers only, none of which comes: nothing to wait for either, in either mode.
    for mode in ["budget", "polling"] {
        let mut resume = bts_command()
            .args(["resume", ck.to_str().unwrap(), "--workers", "0", "--listen", "127.0.0.1:0", "--progress", "never"])
            .args(["--mode", mode])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert_eq!(wait_bounded(&mut resume, Duration::from_secs(10)).code(), Some(0), "{mode}");
        assert_eq!(std::fs::read(&out).unwrap(), out_bytes);
    }
}

#[test]
fn records_written_after_a_periodic_checkpoint_are_cut_but_a_refused_resume_cuts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    // The checkpoint as a periodic one: the run may have written records after it.
    let mut checkpoint = bts_checkpoints::load(&ck).unwrap();
    checkpoint.seal.as_mut().unwrap().ended = false;
    bts_checkpoints::write(&ck, &checkpoint).unwrap();
    let mut content = std::fs::read(&out).unwrap();
    content.extend_from_slice(b"0 2 4 6 8 1 3 5 7 9\n");
    std::fs::write(&out, &content).unwrap();
    let o = bts(&["resume", ck.to_str().unwrap(), "--hist", "/nonexistent-dir/h.csv"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), content, "a refused resume cut the output");
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check_queens_output(&out, 10);
}

#[test]
fn a_version_1_checkpoint_resumes_with_its_output_checked_by_length() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = stopped_queens_run(dir.path());
    let checkpoint = bts_checkpoints::load(&ck).unwrap();
    let payload = postcard::to_allocvec(&checkpoint).unwrap();
    let mut v1 = bts_checkpoints::encode(&checkpoint);
    v1.truncate(24);
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    v1[12..20].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&v1[8..20]);
    crc.update(&payload);
    v1[20..24].copy_from_slice(&crc.finalize().to_le_bytes());
    v1.extend_from_slice(&payload);
    std::fs::write(&ck, &v1).unwrap();
    assert_eq!(bts_checkpoints::load(&ck).unwrap().seal, None);
    assert_eq!(inspect(&ck)["format_version"], 1);
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("checked by its length only"), "{}", stderr(&o));
    check_queens_output(&out, 10);
}

#[test]
fn a_failed_final_checkpoint_still_reports_the_run_and_keeps_the_previous_one() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, stop, json) = (dir.path().join("run.ckpt"), dir.path().join("stop"), dir.path().join("s.json"));
    let ck_s = ck.to_str().unwrap();
    let mut args = vec!["run", "--workers", "1", "--checkpoint", ck_s, "--stop-file", stop.to_str().unwrap()];
    args.extend(["--summary-json", json.to_str().unwrap()]);
    args.extend(SLOW_T1);
    let child = bts_command().args(&args).stderr(Stdio::piped()).spawn().unwrap();
    wait_for(&ck);
    // Some work committed before the stop, for the summary to report.
    std::thread::sleep(Duration::from_millis(300));
    let first = std::fs::read(&ck).unwrap();
    // The next write fails: a folder is in the way of its temporary file.
    std::fs::create_dir(dir.path().join(".run.ckpt.tmp")).unwrap();
    std::fs::write(&stop, "").unwrap();
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("bts: stopped early") || err.contains("nodes,"), "no summary: {err}");
    assert!(err.contains(&format!("cannot write the checkpoint {ck_s}")), "{err}");
    assert!(err.contains("still valid"), "{err}");
    assert!(err.contains(&format!("the stop file {} appeared: stopping", stop.display())), "{err}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["outcome"], "stop-file");
    assert!(s["nodes"].as_u64().unwrap() > 0);
    assert_eq!(std::fs::read(&ck).unwrap(), first, "the previous checkpoint changed");
    assert_eq!(inspect(&ck)["counters"]["nodes"], 0);
}

#[test]
fn a_checkpoint_with_a_time_no_clock_can_take_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, _) = stopped_queens_run(dir.path());
    let mut checkpoint = bts_checkpoints::load(&ck).unwrap();
    checkpoint.elapsed_s = 1e300;
    std::fs::write(&ck, bts_checkpoints::encode(&checkpoint)).unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("elapsed_s") && !stderr(&o).contains("panicked"), "{}", stderr(&o));
}

/// Copies the files of folder `from` into a new folder `to`.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_copy_of_a_run_folder_resumes_in_the_copy_and_leaves_the_original_alone() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    std::fs::create_dir(&original).unwrap();
    let (ck, out) = stopped_queens_run(&original);
    let copy = dir.path().join("copy");
    copy_folder(&original, &copy);
    let before = (std::fs::read(&ck).unwrap(), std::fs::read(&out).unwrap());
    let o = bts(&["resume", copy.join("run.ckpt").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check_queens_output(&copy.join("out.txt"), 10);
    assert_eq!(inspect(&copy.join("run.ckpt"))["complete"], true);
    assert_eq!((std::fs::read(&ck).unwrap(), std::fs::read(&out).unwrap()), before, "the original was written");
}

#[test]
fn a_moved_checkpoint_whose_output_lies_outside_its_folder_needs_output() {
    let dir = tempfile::tempdir().unwrap();
    let (first, out) = (dir.path().join("first"), dir.path().join("out.txt"));
    std::fs::create_dir(&first).unwrap();
    let ck = first.join("run.ckpt");
    stop_queens_run(&ck, &out);
    let copy = dir.path().join("copy");
    copy_folder(&first, &copy);
    let before = std::fs::read(&out).unwrap();
    let o = bts(&["resume", copy.join("run.ckpt").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("moved or copied") && stderr(&o).contains("--output"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // Given a copy of the output, the copy carries on there.
    let copied_out = copy.join("out.txt");
    std::fs::copy(&out, &copied_out).unwrap();
    let o = bts(&["resume", copy.join("run.ckpt").to_str().unwrap(), "--output", copied_out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check_queens_output(&copied_out, 10);
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // In place, the checkpoint needs nothing more.
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    check_queens_output(&out, 10);
}

/// A run whose records cannot go to stdout any more (its reader went away) breaks off (exit 1) and
/// says what a run resumed from its last save does again: the nodes visited and the records
/// printed since, as the summary and the checkpoint count them. The resumed run completes with
/// the published count of solutions.
#[test]
fn a_run_that_breaks_off_says_what_resuming_does_again() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, s) = (dir.path().join("c.ck"), dir.path().join("s.json"));
    let mut run = bts_command()
        .args(["run", "--workers", "2", "--progress", "never", "--checkpoint", ck.to_str().unwrap()])
        .args(["--checkpoint-every", "0.02", "--summary-json", s.to_str().unwrap(), "queens", "--n", "14"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Reads records until a checkpoint has saved some, then goes away.
    let mut stdout = std::io::BufReader::new(run.stdout.take().unwrap());
    let mut line = String::new();
    let saved = || ck.exists() && inspect(&ck)["counters"]["outputs"].as_u64().unwrap() > 0;
    while !saved() {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0, "the run ended first");
    }
    drop(stdout);
    let status = wait_bounded(&mut run, Duration::from_secs(30));
    let log = stderr_of(&mut run);
    assert_eq!(status.code(), Some(1), "{log}");
    let said: Value = serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
    assert_eq!(said["outcome"], "failed", "{log}");
    let held = inspect(&ck)["counters"].clone();
    let nodes = said["nodes"].as_u64().unwrap() - held["nodes"].as_u64().unwrap();
    let records = said["outputs"].as_u64().unwrap() - held["outputs"].as_u64().unwrap();
    let expected = format!(
        "carries on from it (the {nodes} nodes visited since are visited again, and the {records} records sent to \
         stdout since are printed again)"
    );
    assert!(log.contains(&expected), "expected {expected:?} in {log}");
    let o =
        bts_command().args(["resume", ck.to_str().unwrap(), "--summary-json", s.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said: Value = serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
    // 14 queens: 365,596 solutions (OEIS A000170).
    assert_eq!(said["outputs"], 365_596);
}

/// An output file removed, cut short or written to by something else while the run writes to it
/// stops the run at its next save (exit 1, naming the file): it used to end `complete`, its
/// records gone or mixed with another's.
#[test]
fn an_output_file_removed_or_cut_during_the_run_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    for tamper in ["remove", "cut", "append"] {
        let out = dir.path().join(format!("out-{tamper}"));
        let ck = dir.path().join(format!("ck-{tamper}"));
        let json = dir.path().join(format!("s-{tamper}.json"));
        let mut run = bts_command()
            .args(["run", "--workers", "1", "--progress", "never", "--checkpoint-every", "0.05", "--checkpoint"])
            .args([ck.to_str().unwrap(), "--summary-json", json.to_str().unwrap()])
            .args(["--output", out.to_str().unwrap(), "queens", "--n", "16"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let size = || std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        wait_until(Duration::from_secs(60), || size() > 1 << 20, || "no records written".into());
        match tamper {
            "remove" => std::fs::remove_file(&out).unwrap(),
            // Not to a block boundary: no hole is left where the records were.
            "cut" => std::fs::OpenOptions::new().write(true).open(&out).unwrap().set_len(100).unwrap(),
            _ => std::io::Write::write_all(
                &mut std::fs::OpenOptions::new().append(true).open(&out).unwrap(),
                b"a line of someone else's\n",
            )
            .unwrap(),
        }
        let status = wait_bounded(&mut run, Duration::from_secs(60));
        let log = stderr_of(&mut run);
        assert_eq!(status.code(), Some(1), "{tamper}: {log}");
        let said = match tamper {
            "remove" => format!("{} was removed, moved or replaced", out.display()),
            "cut" => format!("{} was cut short", out.display()),
            _ => format!("something else wrote 25 bytes to the output file {}", out.display()),
        };
        assert!(log.contains(&format!("{said} while the run wrote to it")), "{tamper}: {log}");
        // What the run did is told, as for any failure.
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!((&s["complete"], &s["outcome"]), (&false.into(), &"failed".into()), "{tamper}: {s}");
        let saved = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
        assert!(s["nodes"].as_u64().unwrap() >= saved && saved > 0, "{tamper}: {s}");
        assert!(log.contains(&format!("bts: failed: {} nodes", s["nodes"])), "{tamper}: {log}");
    }
}

/// A checkpoint whose folder is removed during the run cannot be saved at its end (exit 1), and
/// the message does not send the user to a checkpoint that is gone with it.
#[test]
fn a_checkpoint_whose_folder_is_gone_is_not_offered_for_resuming() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ck");
    std::fs::create_dir(&folder).unwrap();
    let ck = folder.join("run.ckpt");
    let mut run = bts_command()
        .args(["run", "--workers", "1", "--progress", "never", "--checkpoint-every", "0.05", "--checkpoint"])
        .args([ck.to_str().unwrap(), "--count-only", "queens", "--n", "17"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), || ck.exists(), || "no checkpoint written".into());
    std::fs::remove_dir_all(&folder).unwrap();
    signal(&run, "-TERM");
    let status = wait_bounded(&mut run, Duration::from_secs(60));
    let log = stderr_of(&mut run);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("no earlier checkpoint is left there"), "{log}");
    assert!(!log.contains("carries on from it"), "{log}");
}

/// A run whose records went to stdout carries on in a file only if the file holds them: a missing
/// one is refused saying where the records went, and the captured stdout resumes exactly. A
/// checkpoint's own output that became a folder is named as the checkpoint's, not as --output.
#[test]
fn resume_messages_say_where_the_records_went() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, captured) = (dir.path().join("ck"), dir.path().join("stdout.txt"));
    let run = bts_command()
        .args(["run", "--workers", "1", "--progress", "never", "--node-limit", "5000", "--checkpoint"])
        .args([ck.to_str().unwrap(), "queens", "--n", "10"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    std::fs::write(&captured, &run.stdout).unwrap();
    let missing = dir.path().join("missing.txt");
    let o = bts(&["resume", ck.to_str().unwrap(), "--output", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("of records to stdout; to carry on in a file"), "{}", stderr(&o));
    let o = bts(&["resume", ck.to_str().unwrap(), "--output", captured.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("(the run wrote its records to stdout)"), "{}", stderr(&o));
    check_queens_output(&captured, 10);

    let (ck, out) = (dir.path().join("ck2"), dir.path().join("out.txt"));
    let o = bts(&[
        "run",
        "--workers",
        "1",
        "--node-limit",
        "5000",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "queens",
        "--n",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    std::fs::remove_file(&out).unwrap();
    std::fs::create_dir(&out).unwrap();
    let o = bts(&["resume", ck.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("error: the checkpoint's output file"), "{}", stderr(&o));
}

/// The summary of a run that ends with a checkpoint gives the time the checkpoint holds, so that a
/// resumed run never reports less time than the segment before it did.
#[test]
fn a_stopped_runs_summary_gives_its_checkpoints_time() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("c.ck");
    let mut times = Vec::new();
    // To the nanosecond: the summary's time is a Duration.
    let same_time = |held: &Value, said: Option<f64>| {
        let (held, said) = (held["elapsed_s"].as_f64().unwrap(), said.unwrap());
        assert!((held - said).abs() < 1e-9, "the checkpoint holds {held} s, the summary said {said} s");
    };
    let first = ["run", "--workers", "1", "--count-only", "--summary-json", "-", "--node-limit", "1", "--checkpoint"];
    let o = bts(&[&first[..], &[ck.to_str().unwrap(), "queens", "--n", "8"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    times.push(summary(&o)["elapsed_s"].as_f64().unwrap());
    same_time(&inspect(&ck), times.last().copied());
    for _ in 0..3 {
        let o = bts(&["resume", ck.to_str().unwrap(), "--node-limit", "1", "--summary-json", "-"]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        times.push(summary(&o)["elapsed_s"].as_f64().unwrap());
        same_time(&inspect(&ck), times.last().copied());
    }
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

/// A budget without limit is `null` in JSON: u64::MAX would come out as another number in
/// readers that keep numbers as doubles (jq, JavaScript).
#[test]
fn an_unlimited_budget_is_null_in_json_and_resumes_unlimited() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("inf.ckpt");
    let ck_s = ck.to_str().unwrap();
    let run = ["run", "--budget", "inf", "--fixed-budget", "--checkpoint", ck_s, "--count-only", "--summary-json", "-"];
    let o = bts(&[&run[..], &["--node-limit", "1000", "queens", "--n", "10"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(summary(&o)["budget"], json!({"initial": null, "final": null}));
    let report = inspect(&ck);
    assert_eq!((&report["budget"], &report["options"]["budget"]["initial"]), (&Value::Null, &Value::Null), "{report}");
    let o = bts(&["resume", ck_s, "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // 724 solutions (OEIS A000170).
    assert_eq!((summary(&o)["outputs"].as_u64(), summary(&o)["budget"]["final"].is_null()), (Some(724), true));
}

/// The command a stopped run shows for resuming works when pasted into a shell, spaces and all.
#[test]
fn the_resume_hint_can_be_pasted_into_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("my runs");
    std::fs::create_dir(&folder).unwrap();
    let ck = folder.join("it's a run.ckpt");
    let first = bts(&["run", "--checkpoint", ck.to_str().unwrap(), "--node-limit", "50", "queens", "--n", "8"]);
    assert_eq!(first.status.code(), Some(3), "{}", stderr(&first));
    let err = stderr(&first);
    let hint = err.split("resume with: bts ").nth(1).and_then(|h| h.lines().next()).expect(&err);
    let o = Command::new("sh")
        .args(["-c", &format!("\"$BTS\" {hint} --summary-json -")])
        .env("BTS", env!("CARGO_BIN_EXE_bts"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{hint}: {}", stderr(&o));
    assert_eq!(summary(&o)["nodes"], 2057, "{hint}");
}

/// A run resumed with a newly fixed budget keeps the b it had reached, instead of its first one
/// (100: hundreds of thousands of tiny jobs), and still counts exactly.
#[test]
fn a_budget_fixed_on_resume_is_the_one_reached() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, s) = (dir.path().join("f.ckpt"), dir.path().join("s.json"));
    let (ck_s, s_s) = (ck.to_str().unwrap(), s.to_str().unwrap());
    let run = ["run", "--progress", "never", "--checkpoint", ck_s, "--count-only", "--node-limit", "1500000"];
    let o = bts(&[&run[..], &["uts", "--preset", "T1"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let reached = inspect(&ck)["budget"].as_u64().unwrap();
    assert!(reached > 1000, "b grew to only {reached}");
    let resume = ["resume", ck_s, "--progress", "never", "--summary-json", s_s];
    let o = bts(&[&resume[..], &["--fixed-budget", "--node-limit", "1500000"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let said: Value = serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
    assert_eq!(said["budget"], json!({"initial": reached, "final": reached}));
    let o = bts(&resume);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_t1(&serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap());
}

/// A checkpoint whose folder is removed during the run is not called valid: periodic saves that
/// fail say that none is left, and so does the run's end (here a stop, then an output that went
/// with the folder).
#[test]
fn a_checkpoint_whose_folder_is_removed_is_not_called_valid() {
    let dir = tempfile::tempdir().unwrap();
    for output_inside in [false, true] {
        let folder = dir.path().join(format!("run-{output_inside}"));
        std::fs::create_dir(&folder).unwrap();
        let checkpoint = folder.join("run.ckpt");
        let output = if output_inside { folder.join("out.txt") } else { dir.path().join("out.txt") };
        let mut child = bts_command()
            .args(["run", "--workers", "2", "--checkpoint-every", "0.1", "--checkpoint"])
            .arg(&checkpoint)
            .arg("--output")
            .arg(&output)
            .args(["queens", "--n", "17"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until(Duration::from_secs(60), || checkpoint.is_file(), || "no checkpoint was written".into());
        std::fs::remove_dir_all(&folder).unwrap();
        if !output_inside {
            // Two periodic saves fail (at most 0.1 s apart); then stop.
            std::thread::sleep(Duration::from_millis(500));
            signal(&child, "-INT");
        }
        let status = wait_bounded(&mut child, Duration::from_secs(60));
        let log = stderr_of(&mut child);
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(!log.contains("stays valid") && !log.contains("still valid"), "{log}");
        assert!(!log.contains("carries on from it"), "{log}");
        match output_inside {
            false => assert!(log.contains("no checkpoint is left there (its file or folder is gone)"), "{log}"),
            true => assert!(log.contains("(its file or folder is gone): the run cannot be resumed"), "{log}"),
        }
    }
    // Random polling stopped at once keeps its last save: gone, it is not offered for resuming.
    let checkpoint = dir.path().join("polling.ckpt");
    let mut child = bts_command()
        .args(["run", "--mode", "polling", "--workers", "2", "--count-only", "--checkpoint"])
        .arg(&checkpoint)
        .args(["queens", "--n", "17"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), || checkpoint.is_file(), || "no checkpoint was written".into());
    std::fs::remove_file(&checkpoint).unwrap();
    signal(&child, "-INT");
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, "-TERM");
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let log = stderr_of(&mut child);
    if !checkpoint.exists() {
        assert!(log.contains("no checkpoint is left at") && !log.contains("carries on from it"), "{log}");
        assert!(!log.contains("holds the run") && !log.contains("resume with"), "{log}");
    }
    assert!(matches!(status.code(), Some(1 | 3)), "{log}");
}
