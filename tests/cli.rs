//! End-to-end tests of the `bts` command: real processes in temporary directories.

use crate::util::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn run_uts_t1_reports_the_published_counts_in_the_summary() {
    let o = bts(&["run", "--workers", "2", "--summary-json", "-", "uts", "--preset", "T1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!(s["complete"], true);
    assert_eq!(s["tree"], "uts --preset T1");
    assert_eq!(s["mode"], "budget");
    assert_eq!(s["nodes"], 4_130_071);
    assert_eq!(s["leaves"], 3_305_118);
    assert_eq!(s["max_depth"], 10);
    assert_eq!(s["outputs"], 0);
    assert_eq!(s["workers"], 2);
    assert_eq!(s["budget"]["initial"], 100);
    assert!(s["budget"]["final"].as_u64().unwrap() >= 1);
    assert!(s["elapsed_s"].as_f64().unwrap() > 0.0);
    // Every job but the root's was returned by another job.
    assert_eq!(s["jobs"].as_u64().unwrap(), s["returned"].as_u64().unwrap() + 1);
    assert!(stderr(&o).contains("4130071 nodes"));
}

/// `--budget inf` makes the first job the whole tree: a run of several workers says so, and how to
/// split the tree instead (queens 11 has 2,680 solutions, OEIS A000170).
#[test]
fn an_unlimited_first_budget_on_many_workers_is_warned_of() {
    let warning = "with --budget inf the first job is the whole tree";
    for (workers, extra, warned) in [("2", &[][..], true), ("1", &[], false), ("2", &["--initial-depth", "2"], false)] {
        let mut args = vec!["run", "--workers", workers, "--budget", "inf", "--count-only", "--summary-json", "-"];
        args.extend(extra);
        args.extend(["queens", "--n", "11"]);
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stderr(&o).contains(warning), warned, "{args:?}: {}", stderr(&o));
        assert_eq!(summary(&o)["outputs"], 2_680);
    }
}

/// `command`, run with a limit on `resource` of `soft` under `hard`.
fn limited(command: &mut Command, resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: only setrlimit runs between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
            match libc::setrlimit(resource, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        })
    }
}

/// An output file that reaches the limit of file sizes (`ulimit -f`) stops the run with a message
/// and its checkpoint (SIGXFSZ killed bts without a word); the resume, without the limit, writes
/// every record once (queens 12 has 14,200 solutions, OEIS A000170).
#[test]
fn the_limit_of_file_sizes_stops_a_run_that_can_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (output, checkpoint) = (dir.path().join("out.txt"), dir.path().join("run.ckpt"));
    let mut command = bts_command();
    command.args(["run", "--workers", "2", "--output"]).arg(&output).arg("--checkpoint").arg(&checkpoint);
    command.args(["queens", "--n", "12"]);
    let o = limited(&mut command, libc::RLIMIT_FSIZE, 100 << 10, libc::RLIM_INFINITY).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot write the output file") && stderr(&o).contains("File too large"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("bts resume"), "{}", stderr(&o));
    let o = bts_command().arg("resume").arg(&checkpoint).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&output).unwrap();
    let records: std::collections::HashSet<&str> = text.lines().collect();
    assert_eq!((text.lines().count(), records.len()), (14_200, 14_200));
}

/// A limit of open files too low for a run is refused before anything is written (it panicked
/// deep inside, leaving an empty output file); a low soft limit under a higher hard one is raised.
#[test]
fn too_low_a_limit_of_open_files_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.txt");
    for (soft, hard, refused) in [(10, 10, true), (10, 4096, false)] {
        let mut command = bts_command();
        command.args(["run", "--output"]).arg(&output).args(["--checkpoint"]).arg(dir.path().join("run.ckpt"));
        command.args(["queens", "--n", "8"]);
        let o = limited(&mut command, libc::RLIMIT_NOFILE, soft, hard).output().unwrap();
        if refused {
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(stderr(&o).contains("may open only 10 files at once (ulimit -n)"), "{}", stderr(&o));
            assert!(!output.exists());
            // Rank 0 of a launch tells the other ranks, which would wait for it otherwise.
            let rendezvous = dir.path().join("launch.rdv");
            let mut command = bts_command();
            command.args(["run", "--rendezvous"]).arg(&rendezvous).args(["queens", "--n", "8"]);
            command.env("OMPI_COMM_WORLD_RANK", "0").env("PMIX_NAMESPACE", "bts-test-launch");
            let o = limited(&mut command, libc::RLIMIT_NOFILE, soft, hard).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            let said = std::fs::read_to_string(&rendezvous).unwrap();
            assert!(said.contains("failed") && said.contains("ulimit -n"), "{said}");
        } else {
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
            assert_eq!(std::fs::read_to_string(&output).unwrap().lines().count(), 92);
        }
    }
}

/// A launcher that binds a process to fewer CPUs than its search threads (OpenMPI binds each rank
/// of a small launch to one core) would halve the run unseen: bts says so.
#[test]
fn search_threads_confined_to_fewer_cpus_are_warned_of() {
    use std::os::unix::process::CommandExt;
    // SAFETY: sysconf only reads.
    if unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } < 2 {
        return; // one CPU: nothing to confine to
    }
    let warning = "search threads, which will share it: under mpirun give --bind-to none";
    let run = |args: &[&str], confined: bool| {
        let mut command = bts_command();
        command.args(args);
        if confined {
            // SAFETY: only sched_setaffinity runs between fork and exec, on a set built before.
            unsafe {
                command.pre_exec(|| {
                    let mut one: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(0, &mut one);
                    match libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) {
                        0 => Ok(()),
                        _ => Err(std::io::Error::last_os_error()),
                    }
                });
            }
        }
        let o = command.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        stderr(&o).contains(warning)
    };
    let queens = |workers| ["run", "--workers", workers, "--count-only", "queens", "--n", "6"];
    assert!(run(&queens("2"), true));
    assert!(!run(&queens("1"), true));
    // More threads than the machine's CPUs, unconfined, is the user's choice.
    assert!(!run(&queens("4"), false));
}

#[test]
fn run_options_may_follow_the_tree_options() {
    let o = bts(&["run", "uts", "--preset", "T5", "--workers", "1", "--order", "fifo", "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!(
        (s["nodes"].as_u64(), s["workers"].as_u64(), s["order"].as_str()),
        (Some(4_147_582), Some(1), Some("fifo"))
    );
}

#[test]
fn output_records_are_whole_lines_each_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("boards.txt");
    let o = bts(&[
        "run",
        "--workers",
        "3",
        "--budget",
        "2",
        "--fixed-budget",
        "--output",
        out.to_str().unwrap(),
        "queens",
        "--n",
        "9",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    let mut boards: Vec<Vec<usize>> =
        text.lines().map(|l| l.split(' ').map(|c| c.parse().expect("a column")).collect()).collect();
    assert_eq!(boards.len(), 352);
    for b in &boards {
        assert_eq!(b.len(), 9);
        for r in 0..9 {
            for s in 0..r {
                assert!(b[r] != b[s] && r - s != b[r].abs_diff(b[s]), "{b:?} is not a solution");
            }
        }
    }
    boards.sort();
    boards.dedup();
    assert_eq!(boards.len(), 352);
}

#[test]
fn count_only_counts_records_without_writing_them() {
    let o = bts(&["run", "--count-only", "--summary-json", "-", "queens", "--n", "8"]);
    assert_eq!(o.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(stdout.lines().count(), 1, "only the summary: {stdout}");
    assert_eq!(summary(&o)["outputs"], 92);
}

#[test]
fn every_budget_control_gives_the_same_exact_count() {
    let runs: [&[&str]; 6] = [
        &["--budget", "1", "--fixed-budget"],
        &["--budget", "inf", "--fixed-budget"],
        &["--budget", "50", "--scale", "4", "--lmin", "2", "--lmax", "3", "--maxd", "2"],
        &["--initial-depth", "3", "--order", "fifo"],
        &["--budget", "10", "--lmax", "1", "--scale", "1000"],
        &["--maxd", "1", "--lmin", "100"],
    ];
    for options in runs {
        let mut args = vec!["run", "--workers", "2", "--summary-json", "-"];
        args.extend_from_slice(options);
        args.extend_from_slice(&["uts", "--preset", "T3"]);
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(0), "{options:?}: {}", stderr(&o));
        let s = summary(&o);
        assert_eq!(
            (s["nodes"].as_u64(), s["leaves"].as_u64(), s["max_depth"].as_u64()),
            (Some(4_112_897), Some(3_599_034), Some(1572)),
            "{options:?}"
        );
    }
}

#[test]
fn node_limit_stops_at_exactly_that_many_nodes_with_status_3() {
    let o = bts(&["run", "--workers", "2", "--node-limit", "12345", "--summary-json", "-", "uts", "--preset", "T1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!(
        (s["complete"].as_bool(), s["nodes"].as_u64(), s["outcome"].as_str()),
        (Some(false), Some(12345), Some("node-limit"))
    );
    // A limit beyond the tree's size is no limit.
    let o = bts(&["run", "--node-limit", "100000000", "--summary-json", "-", "queens", "--n", "6"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn time_limit_stops_a_long_run_with_status_3() {
    let started = Instant::now();
    let o = bts(&["run", "--workers", "1", "--time-limit", "0.3", "--summary-json", "-", "uts", "--preset", "T1XXL"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(10));
    let s = summary(&o);
    assert_eq!(s["outcome"], "time-limit");
    assert!(s["nodes"].as_u64().unwrap() > 0);
}

#[test]
fn sigint_stops_the_run_cleanly_with_status_3() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut child = bts_command()
        .args(["run", "--workers", "2", "--summary-json", json.to_str().unwrap(), "uts", "--preset", "T1XXL"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "-INT");
    let status = wait_bounded(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(3));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["outcome"], "signal");
}

#[test]
fn a_hangup_stops_the_run_unless_nohup_ignores_it() {
    let run = ["run", "--workers", "1", "--progress", "never", "uts", "--preset", "T1XXL"];
    // Under nohup the hangup is ignored: the run goes on until SIGTERM.
    let mut child = Command::new("nohup")
        .arg(env!("CARGO_BIN_EXE_bts"))
        .args(run)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "-HUP");
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "a hangup stopped a run started under nohup");
    signal(&child, "-TERM");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(20)).code(), Some(3));
    // Without it, the hangup stops the run cleanly.
    let mut child = bts_command().args(run).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "-HUP");
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(20)).code(), Some(3));
}

/// A run's output, summary or history given the tree's own file (its input, its program) would
/// destroy it, and a resume could never read it again: refused, the file left as it was.
#[test]
fn a_file_the_tree_reads_is_not_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let items = dir.path().join("items.txt");
    std::fs::write(&items, "10\n6 5\n5 4\n4 3\n").unwrap();
    let items_s = items.to_str().unwrap();
    let program = script(dir.path(), "prog.sh", "#!/bin/sh\necho 'done 1'\n");
    let with_eq = format!("--file={items_s}");
    let cases: [(Vec<&str>, &str); 3] = [
        (vec!["run", "--output", items_s, "knapsack", "--file", items_s], "--output"),
        (vec!["run", "--summary-json", items_s, "knapsack", &with_eq], "--summary-json"),
        (vec!["run", "--hist", program.to_str().unwrap(), "exec", "--", program.to_str().unwrap()], "--hist"),
    ];
    for (args, option) in cases {
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("the tree's own file") && stderr(&o).contains(option), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read_to_string(&items).unwrap(), "10\n6 5\n5 4\n4 3\n");
    assert_eq!(std::fs::read_to_string(&program).unwrap(), "#!/bin/sh\necho 'done 1'\n");
}

/// Bad input: exit status 2, one line naming the problem, no panic.
#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let out = out.to_str().unwrap();
    let rendezvous = dir.path().join("launch");
    let rendezvous = rendezvous.to_str().unwrap();
    let cases: [(&[&str], &str); 76] = [
        (&["run", "nosuchtree"], "unknown tree 'nosuchtree'"),
        (&["run", "--budget", "18446744073709551615", "uts"], "is the number that stands for inf: give inf"),
        (&["run", "-v", "-q", "uts"], "the argument '--verbose...' cannot be used with '--quiet'"),
        (&["run", "--time-limit", "1e-12", "uts"], "'1e-12' is not a number of seconds from 1e-9"),
        (&["run"], "no tree given"),
        (&["run", "--budget", "0", "uts"], "budget must be at least 1"),
        (&["run", "--budget", "lots", "uts"], "not a budget"),
        (&["run", "--workers", "two", "uts"], "--workers"),
        (&["run", "--workers", "0", "uts"], "--workers 0"),
        (&["run", "--time-limit", "-1", "uts"], "not a number of seconds from 1e-9"),
        // A value that starts as an option would is a bad value still, not an unknown option.
        (&["run", "--budget", "-inf", "uts"], "'-inf' is not a budget"),
        (&["run", "--lmin", "-inf", "uts"], "'-inf' is not a number >= 0"),
        (&["run", "--time-limit", "-inf", "uts"], "'-inf' is not a number of seconds from 1e-9"),
        (&["run", "--output", "", "uts"], "invalid value '' for '--output <FILE>': an empty file name"),
        (&["run", "--node-limit", "0", "uts"], "--node-limit"),
        (&["run", "--scale", "1", "uts"], "--scale"),
        (&["run", "--lmin", "3", "--lmax", "2", "uts"], "--lmax (2) must not be below --lmin (3)"),
        (&["run", "--count-only", "--output", out, "uts"], "cannot be used with"),
        (&["run", "--output", "/nonexistent-dir/out.txt", "queens", "--n", "4"], "cannot write the output file"),
        (&["run", "uts", "-t", "7"], "uts: invalid value '7'"),
        (&["run", "uts", "-d", "0"], "-d must be at least 1"),
        (&["run", "uts", "-d", "1", "-b", "1e17"], "-b must be at most 2147483647"),
        (&["run", "queens"], "--n"),
        (&["run", "gw", "--delta", "1"], "gw: invalid value '1'"),
        // A negative number for a tree's option is a bad value, not an unknown option; a number
        // with blanks around it is refused by every option alike.
        (&["run", "queens", "--n", "-1"], "queens: invalid value '-1' for '--n <N>'"),
        (&["run", "gw", "--delta", "-5", "--seed", "1"], "gw: invalid value '-5'"),
        (&["run", "--node-limit", " 5", "uts"], "' 5' is not a whole number"),
        (&["estimate", "--threads", "-1", "queens", "--n", "6"], "invalid value '-1' for '--threads <N>'"),
        (&["worker", "--connect", "127.0.0.1:9", "--threads", "-1"], "invalid value '-1' for '--threads <N>'"),
        (&["worker", "--connect", "127.0.0.1:9", "--retry", "-1"], "'-1' is not 0 or a number of seconds from 1e-9"),
        (&["run", "--time-limit", "5 ", "uts"], "'5 ' is not a number of seconds from 1e-9"),
        // Seconds no clock can take.
        (&["run", "--time-limit", "1e300", "uts"], "not a number of seconds from 1e-9"),
        (&["run", "--checkpoint-every", "1e300", "uts"], "not a number of seconds from 1e-9"),
        (&["run", "--listen", "127.0.0.1:0", "--worker-timeout", "1e300", "uts"], "not a number of seconds from 1e-9"),
        (&["worker", "--connect", "127.0.0.1:9", "--retry", "1e300"], "is not 0 or a number of seconds"),
        (&["worker", "--connect", "127.0.0.1:0"], "port 0 cannot be connected to: give the port the master listens on"),
        (&["run", "exec", "--job-timeout", "1e300", "--", "true"], "not a number of seconds from 1e-9"),
        (&["run", "--freq", "/nonexistent-dir/f.txt", "queens", "--n", "4"], "job sizes (--freq) file"),
        // Options of remote workers, without them.
        (&["run", "--worker-timeout", "3", "queens", "--n", "4"], "--worker-timeout needs --listen ADDR"),
        (
            &["run", "--mode", "polling", "--snapshot-every", "5", "queens", "--n", "4"],
            "--snapshot-every needs --listen ADDR",
        ),
        (
            &["run", "--listen", "127.0.0.1:0", "--snapshot-every", "5", "queens", "--n", "4"],
            "--snapshot-every applies to --mode polling",
        ),
        (
            &["run", "--mode", "polling", "--listen", "127.0.0.1:0", "--snapshot-every", "0", "uts"],
            "not a number of seconds from 1e-9",
        ),
        (&["run", "--token-file", "t", "queens", "--n", "4"], "--token-file needs --listen ADDR"),
        // A tree's option before the tree's name.
        (&["run", "--n", "8", "queens"], "error: --n is an option of queens: put it after the tree's name"),
        (&["run", "--preset=T1", "uts"], "error: --preset is an option of uts: put it after"),
        (&["run", "--retries", "0", "exec", "--", "true"], "error: --retries is an option of exec: put it after"),
        // A run option misspelt before the tree: clap's tip, and the advice in case it is the tree's.
        (&["run", "--worker", "2", "queens"], "a similar argument exists: '--workers'; if --worker is an option of"),
        (&["estimate", "--n", "8", "queens"], "bts estimate [OPTIONS] queens --n"),
        // A run option that took the tree's name for its value; a run option given to estimate.
        (
            &["run", "--summary-json", "uts", "--preset", "T1"],
            "--summary-json took `uts` for its value, and --preset was left before the tree's name: give \
             --summary-json its value: bts run [OPTIONS] --summary-json <FILE> uts ...",
        ),
        (&["run", "--checkpoint", "queens", "--n", "4"], "--checkpoint took `queens` for its value, and --n was left"),
        (
            &["run", "--checkpoint", "exec", "--", "./prog"],
            "--checkpoint took `exec` for its value, and `./prog` was read as the tree: give --checkpoint its value: \
             bts run --checkpoint <FILE> exec ...",
        ),
        (
            &["estimate", "--mode", "polling", "queens", "--n", "6"],
            "--mode is an option of `bts run`, not of `bts estimate`",
        ),
        (
            &["estimate", "queens", "--n", "6", "--workers", "2"],
            "--workers is an option of `bts run`, not of `bts estimate`",
        ),
        // A negative number is a bad value, not an option.
        (&["estimate", "--probes", "-1", "queens", "--n", "8"], "invalid value '-1' for '--probes <K>'"),
        (&["estimate", "--probe-seed", "-1", "queens", "--n", "8"], "invalid value '-1' for '--probe-seed <S>'"),
        // A run option after the tree's, misspelt or in its short form; a program without `--`.
        (&["run", "queens", "--n", "8", "--wokers", "2"], "'--wokers' found; did you mean the option --workers?"),
        (&["estimate", "queens", "--n", "8", "--probs", "3"], "did you mean the option --probes?"),
        (&["run", "queens", "--n", "8", "-q"], "options take their long form: --quiet (or -q before queens)"),
        (&["run", "exec", "./prog", "5"], "a program and its arguments go after `--`: bts run exec [OPTIONS] --"),
        (&["run", "queens", "--nn", "8"], "tip: a similar argument exists: '--n'"),
        // Values no run can use, and options that would be silently ignored.
        (&["run", "--workers", "100000", "queens", "--n", "4"], "at most 4096 worker threads"),
        (&["run", "--output", "-", "queens", "--n", "4"], "records go to stdout when --output is not given"),
        (
            &["run", "--node-limit", "0", "queens", "--n", "4"],
            "'0' is not a whole number of at least 1 (and below 2^64)",
        ),
        (&["run", "--scale", "1", "queens", "--n", "4"], "'1' is not a whole number of at least 2 (and below 2^64)"),
        (&["run", "--hist", "-", "queens", "--n", "4"], "--hist -: `-` names no file here (give ./- for a file"),
        (&["run", "--checkpoint", "-", "queens", "--n", "4"], "--checkpoint -: `-` names no file here"),
        (&["worker", "--connect-file", "-"], "--connect-file -: `-` names no file here"),
        (&["run", "--fixed-budget", "--maxd", "2", "queens", "--n", "4"], "--maxd does not apply with --fixed-budget"),
        (&["run", "--fixed-budget", "--initial-depth", "1", "queens", "--n", "4"], "--initial-depth does not apply"),
        (&["run", "--stop-file", "/nonexistent-dir/stop", "queens", "--n", "4"], "could never appear"),
        (&["run", "--listen", "bad", "queens", "--n", "4"], "expected HOST:PORT"),
        (&["run", "--listen", "127.0.0.1:99999", "queens", "--n", "4"], "expected HOST:PORT"),
        (&["worker", "--connect", "nonsense"], "expected HOST:PORT"),
        (&["run", "--listen", "127.0.0.1:0", "--worker-timeout", "0.01", "queens", "--n", "4"], "too short"),
        // Rank 0 of a launch refuses what its other ranks refuse: it would wait for them for good.
        (&["run", "--rendezvous", rendezvous, "--workers", "0", "queens", "--n", "4"], "--workers 0 leaves the worker"),
        (&["run", "--rendezvous", rendezvous, "--address-file", out, "queens", "--n", "4"], "is the run's address"),
    ];
    for (args, message) in cases {
        let o = bts(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: expected '{message}' in: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn an_argument_that_is_not_text_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    let o = bts_command().args(["run", "exec", "--", "cat"]).arg(bad).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the argument 'caf\u{FFFD}.txt' is not UTF-8 text"), "{err}");
}

#[test]
fn help_is_not_an_error() {
    for args in [&["--help"][..], &["run", "--help"], &["run", "uts", "--help"], &["trees"]] {
        let o = bts(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(!o.stdout.is_empty());
    }
    let run_help = String::from_utf8_lossy(&bts(&["run", "--help"]).stdout).into_owned();
    for word in ["--budget", "--fixed-budget", "--lmin", "--lmax", "--maxd", "--initial-depth", "uts", "queens", "gw"] {
        assert!(run_help.contains(word), "run --help lacks {word}");
    }
}

/// A reader that went away had what it wanted (`bts trees | head -1`): no panic, exit 0. A stdout
/// that cannot be written (a full disk) is an error, exit 1.
#[test]
fn commands_that_print_survive_a_closed_or_full_stdout() {
    let commands: [&[&str]; 4] =
        [&["trees"], &["run", "queens", "--help"], &["estimate", "--probes", "50", "queens", "--n", "6"], &["--help"]];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = bts_command().args(args).stdout(writer).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        if args != ["--help"] {
            let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
            let o = bts_command().args(args).stdout(full).output().unwrap();
            assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
            assert!(stderr(&o).contains("cannot write to stdout"), "{args:?}: {}", stderr(&o));
        }
    }
}

/// A stdout closed when bts starts (`>&-`), which Rust's runtime opens on /dev/null: records,
/// a summary or a listing sent there would be lost without a word. A run refuses to start (exit 2)
/// and says what to do; a command that prints fails (exit 1); a run that writes nothing there goes on.
#[test]
fn a_closed_stdout_is_not_written_to_as_if_it_were_open() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = dir.path().join("c.ckpt");
    let closed = |args: &[&str]| {
        let o = Command::new("sh")
            .args(["-c", "exec \"$0\" \"$@\" >&-", env!("CARGO_BIN_EXE_bts")])
            .args(args)
            .output()
            .unwrap();
        (o.status.code(), stderr(&o))
    };
    let queens = ["--progress", "never", "queens", "--n", "6"];
    let (code, log) = closed(&[&["run"][..], &queens].concat());
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("stdout is closed, so the records have nowhere to go: give --output FILE"), "{log}");
    let (code, log) = closed(&[&["run", "--count-only", "--summary-json", "-"][..], &queens].concat());
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("stdout is closed, so the summary cannot go there"), "{log}");
    let (code, log) = closed(&["trees"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("cannot write to stdout: it is closed"), "{log}");
    let (code, log) = closed(&[&["run", "--count-only"][..], &queens].concat());
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("4 outputs"), "{log}");
    // A run whose records go to stdout, resumed with stdout closed, keeps its checkpoint.
    let o = bts(&[
        "run",
        "--progress",
        "never",
        "--node-limit",
        "50",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "queens",
        "--n",
        "8",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let (code, log) = closed(&["resume", checkpoint.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("resume it with stdout open"), "{log}");
    let o = bts(&["resume", "--progress", "never", checkpoint.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(o.stdout.iter().filter(|&&b| b == b'\n').count(), 92, "the 92 solutions of 8 queens");
}

#[test]
fn every_command_has_its_own_help() {
    let out = |args: &[&str]| {
        let o = bts(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // `bts help run` is `bts run --help`, with every option, not clap's empty page.
    assert_eq!(out(&["help", "run"]), out(&["run", "--help"]));
    assert!(out(&["help", "run"]).contains("--fixed-budget"));
    assert!(out(&["help", "estimate"]).contains("--probes"));
    assert!(out(&["help"]).contains("resume"));
    let resume = out(&["resume", "--help"]);
    assert!(resume.contains("Usage: bts resume <CHECKPOINT> [RUN-OPTIONS]"), "{resume}");
    assert!(resume.contains("--workers") && !resume.contains("Usage: bts run"), "{resume}");
    // A resumed run keeps the checkpoint's mode, budget and output unless told otherwise.
    for option in ["--mode <MODE>", "--budget <B>", "--order <ORDER>", "--output <FILE>"] {
        let line = resume.lines().find(|l| l.trim_start().starts_with(option)).unwrap();
        assert!(line.contains("[default: the checkpoint's]"), "{line}");
    }
    assert!(out(&["run", "--help"]).contains("[default: budget]"));
    for (tree, usage) in [("uts", "Usage: bts run uts [OPTIONS]"), ("queens", "Usage: bts run queens --n <N>")] {
        let text = out(&["run", tree, "--help"]);
        assert!(text.contains(usage), "{text}");
    }
    // A tree's help under estimate shows estimate's usage.
    let text = out(&["estimate", "queens", "--help"]);
    assert!(text.contains("Usage: bts estimate queens --n <N>"), "{text}");
    // A worker needs one of two ways to find its master, and says both.
    let o = bts(&["worker"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--connect <HOST:PORT>") && stderr(&o).contains("--connect-file <F>"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_checkpoint_warning_about_stdout_waits_for_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("c.ckpt");
    let ck = ck.to_str().unwrap();
    // UTS has no output records: nothing could be written twice.
    let o = bts(&["run", "--checkpoint", ck, "--progress", "never", "uts", "--preset", "T1", "-d", "5"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("WARN"), "{}", stderr(&o));
    let o = bts(&["run", "--checkpoint", ck, "--progress", "never", "queens", "--n", "6"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("records written since the last checkpoint would be written again"));
    assert_eq!(o.stdout.iter().filter(|&&b| b == b'\n').count(), 4, "the 4 solutions of 6-queens");
}

#[test]
fn output_file_is_truncated_not_appended() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.txt");
    std::fs::write(&out, "stale\n".repeat(1000)).unwrap();
    let o = bts(&["run", "--output", out.to_str().unwrap(), "queens", "--n", "5"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(Path::new(&out)).unwrap().lines().count(), 10);
}

/// A refused run leaves the output file as it was, whatever option is wrong; also as rank 0 of a
/// cluster launch, which says in its rendezvous file that it failed, but not in a file of another
/// kind given as the rendezvous file by mistake (it once wrote over a checkpoint so).
#[test]
fn a_refused_run_leaves_every_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (out, ck, json) = (path("out.txt"), path("run.ckpt"), path("s.json"));
    // The files bts keeps beside a checkpoint while it replaces it, and while it runs.
    let (tmp, lock) = (path(".run.ckpt.tmp"), path(".run.ckpt.lock"));
    let (rendezvous, rendezvous_tmp) = (path("launch"), path(".launch.tmp"));
    let (link, pipe) = (path("link"), path("pipe"));
    std::os::unix::fs::symlink(&json, &link).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 18] = [
        (&["--summary-json", &out], "given as both --output and --summary-json"),
        (&["--checkpoint", &out], "given as both --output and --checkpoint"),
        (&["--hist", &out], "given as both --output and --hist"),
        (&["--freq", &out], "given as both --output and --freq"),
        (&["--hist", &json, "--summary-json", &json], "given as both --summary-json and --hist"),
        (&["--hist", "/nonexistent-dir/h.csv"], "cannot write the history (--hist) file"),
        (&["--checkpoint", "/nonexistent-dir/c"], "cannot write the checkpoint file"),
        (&["--listen", &busy], "cannot listen"),
        (
            &["--checkpoint", &ck, "--summary-json", &tmp],
            "is the temporary file of --checkpoint, which bts writes over",
        ),
        (&["--checkpoint", &ck, "--hist", &lock], "is the lock file of --checkpoint, which bts writes over"),
        (&["--rendezvous", &rendezvous, "--hist", &rendezvous_tmp], "is the temporary file of --rendezvous"),
        (&["--rendezvous", &ck, "--checkpoint", &ck], "given as both --checkpoint and --rendezvous"),
        (&["--rendezvous", &out], "given as both --output and --rendezvous"),
        (&["--rendezvous", &json], "the run would replace it with a rendezvous file"),
        // Nor another file as the address file, which the run would also remove as it ends, nor
        // a device (/dev/null was once replaced so; a pipe here, which would do no harm), a pipe
        // or a link.
        (&["--listen", "127.0.0.1:0", "--address-file", &json], "the run would replace it with an address file"),
        (&["--rendezvous", &pipe], "is a pipe or a device, not a regular file"),
        (&["--listen", "127.0.0.1:0", "--address-file", &pipe], "is a pipe or a device"),
        (&["--rendezvous", &link], "is a symbolic link"),
    ];
    for launch in [None, Some("launch-1")] {
        for (options, message) in cases {
            for file in [&out, &ck, &json, &tmp, &lock] {
                std::fs::write(file, "precious\n").unwrap();
            }
            let mut args = vec!["run", "--output", &out];
            args.extend_from_slice(options);
            args.extend_from_slice(&["queens", "--n", "6"]);
            let mut command = bts_command();
            if let Some(launch) = launch {
                command.env("PMIX_RANK", "0").env("PMIX_NAMESPACE", launch);
            }
            // Bounded: a pipe given as the rendezvous file once blocked the run at its first read.
            let mut child = command.args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
            let status = wait_bounded(&mut child, Duration::from_secs(60));
            let log = stderr_of(&mut child);
            assert_eq!(status.code(), Some(2), "{options:?}: {log}");
            assert!(log.contains(message), "{options:?}: expected '{message}' in {log}");
            for file in [&out, &ck, &json, &tmp, &lock] {
                assert_eq!(std::fs::read_to_string(file).unwrap(), "precious\n", "{options:?} changed {file}");
            }
        }
    }
    // Nor an input file.
    let items = path("items.txt");
    std::fs::write(&items, "10\n6 5\n5 4\n").unwrap();
    let o = bts_command()
        .env("PMIX_RANK", "0")
        .env("PMIX_NAMESPACE", "launch-2")
        .args(["run", "--rendezvous", &items, "knapsack", "--file", &items])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--rendezvous would overwrite it"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&items).unwrap(), "10\n6 5\n5 4\n");
}

/// A run refused for its mode (random polling cannot split a legacy program's search) creates no
/// file either.
#[test]
fn a_run_refused_for_its_mode_creates_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let (out, ck, token) = (dir.path().join("out.txt"), dir.path().join("run.ckpt"), dir.path().join("tok"));
    let files = ["--output", out.to_str().unwrap(), "--checkpoint", ck.to_str().unwrap()];
    // A missing token file is made only for a run that goes ahead.
    let listen = ["--listen", "127.0.0.1:0", "--token-file", token.to_str().unwrap()];
    let o = bts(&[&["run", "--mode", "polling"][..], &files, &listen, &["exec", "--", "/bin/true"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("random polling needs a tree that can split its search"), "{}", stderr(&o));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn programs_the_readme_builds_in_the_repository_are_ignored_by_git() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let ignored = std::fs::read_to_string(format!("{root}/.gitignore")).unwrap();
    let built: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cc ")?.split(" -o ").nth(1)?.split_whitespace().next())
        .collect();
    assert!(built.contains(&"topsort"), "{built:?}");
    for name in built {
        assert!(ignored.lines().any(|l| l == format!("/{name}")), ".gitignore lacks /{name}");
    }
}

/// A program of a library user's (here bts under another name) names itself in its hints: `bts
/// resume` would not know its trees.
#[test]
fn hints_name_the_program_that_gives_them() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("mytrees");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bts"), &program).unwrap();
    let ck = dir.path().join("ck");
    let o = std::process::Command::new(&program)
        .args([
            "run",
            "--workers",
            "1",
            "--node-limit",
            "10",
            "--checkpoint",
            ck.to_str().unwrap(),
            "queens",
            "--n",
            "8",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("resume with: mytrees resume {}", ck.display())), "{}", stderr(&o));
}

/// A program built on the library names itself, not `bts`, in the commands its help and its
/// messages tell the user to type (here the bts binary under another name, as `main_with` runs).
#[test]
fn a_program_of_its_own_names_itself_in_the_commands_it_shows() {
    let dir = tempfile::tempdir().unwrap();
    let mytree = dir.path().join("mytree");
    // A link, not a copy: a copy's open descriptor, inherited by a program another test starts
    // meanwhile, makes it busy ("text file busy") for a while.
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bts"), &mytree).unwrap();
    let run = |args: &[&str]| Command::new(&mytree).args(args).output().unwrap();
    let out = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let help = run(&["--help"]);
    assert!(out(&help).contains("Usage: mytree <COMMAND>"), "{}", out(&help));
    assert!(out(&help).contains("mytree run [RUN-OPTIONS] <TREE>"), "{}", out(&help));
    let tree_help = run(&["run", "queens", "--help"]);
    assert!(out(&tree_help).contains("Usage: mytree run queens --n <N>"), "{}", out(&tree_help));
    for text in [out(&help), out(&tree_help), out(&run(&["resume", "--help"]))] {
        assert!(!text.contains("bts "), "{text}");
    }
    // A run refused for an unfinished checkpoint says how to carry it on.
    let ck = dir.path().join("run.ckpt");
    let stopped = run(&["run", "--node-limit", "1000", "--checkpoint", ck.to_str().unwrap(), "queens", "--n", "10"]);
    assert_eq!(stopped.status.code(), Some(3), "{}", stderr(&stopped));
    assert!(stderr(&stopped).contains(&format!("resume with: mytree resume {}", ck.display())), "{}", stderr(&stopped));
    let refused = run(&["run", "--checkpoint", ck.to_str().unwrap(), "queens", "--n", "8"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains(&format!("carry it on with mytree resume {}", ck.display())),
        "{}",
        stderr(&refused)
    );
}

/// `--summary-json /dev/stdout` (or `/dev/stderr`) with the stream redirected to a file adds the
/// summary to what bts wrote there: opened anew, the file was cut, and the records gone.
#[test]
fn a_summary_to_dev_stdout_keeps_what_was_written_there() {
    let dir = tempfile::tempdir().unwrap();
    for (stream, path) in [("stdout", "/dev/stdout"), ("stderr", "/dev/stderr")] {
        let file = dir.path().join(stream);
        let redirected = || std::fs::File::create(&file).unwrap();
        let mut command = bts_command();
        command.args(["run", "--progress", "never", "--summary-json", path, "queens", "--n", "6"]);
        let status = match stream {
            "stdout" => command.stdout(redirected()).status(),
            _ => command.stdout(Stdio::null()).stderr(redirected()).status(),
        };
        assert_eq!(status.unwrap().code(), Some(0));
        let text = std::fs::read_to_string(&file).unwrap();
        let json: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(json["outputs"], 4, "{text}");
        let before = text.lines().count() - 1;
        match stream {
            // The four solutions of 6-queens, then the summary.
            "stdout" => assert_eq!(before, 4, "{text}"),
            _ => assert!(text.starts_with("bts: complete: ") && before >= 2, "{text}"),
        }
    }
}

/// Another file option naming the file stdout or stderr goes to is refused, before the file is
/// touched: written from two places, the records were cut or overwritten (a checkpoint replaced
/// them all).
#[test]
fn a_file_that_stdout_or_stderr_goes_to_is_no_other_options_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let f = file.to_str().unwrap();
    for (option, stream) in [("--hist", 1), ("--checkpoint", 1), ("--output", 1), ("--output", 2), ("--freq", 2)] {
        std::fs::write(&file, "kept\n").unwrap();
        let redirected = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
        let mut command = bts_command();
        command.args(["run", "--progress", "never", option, f, "queens", "--n", "6"]);
        let o = match stream {
            1 => command.stdout(redirected).stderr(Stdio::piped()).output(),
            _ => command.stderr(redirected).output(),
        }
        .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(o.status.code(), Some(2), "{option} {stream}: {text}");
        let said = if stream == 1 { stderr(&o) } else { text.clone() };
        let name = if stream == 1 { "stdout" } else { "stderr" };
        assert!(said.contains(&format!("is the file {name} goes to")), "{option}: {said}");
        assert!(text.starts_with("kept\n"), "{option}: {text}");
    }
}

/// A summary to a named pipe reaches its reader: the check that the file can be written opened and
/// closed the pipe, which told the reader its end had come, and the summary then waited for ever.
#[test]
fn a_summary_to_a_named_pipe_reaches_its_reader() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::read_to_string(fifo).unwrap()
    });
    let mut child = bts_command()
        .args(["run", "--progress", "never", "--summary-json", fifo.to_str().unwrap(), "queens", "--n", "6"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(wait_bounded(&mut child, Duration::from_secs(30)).code(), Some(0));
    let json: Value = serde_json::from_str(&reader.join().unwrap()).unwrap();
    assert_eq!(json["outputs"], 4);
}

/// A run that visited no node (its time limit came before any worker) has no leaves or depths to
/// speak of: `null`, not the root's depth 0.
#[test]
fn a_run_that_visited_nothing_has_no_leaves_or_depth() {
    let args = ["run", "--workers", "0", "--listen", "127.0.0.1:0", "--time-limit", "0.3", "--progress", "never"];
    let o = bts(&[&args[..], &["--summary-json", "-", "queens", "--n", "8"]].concat());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!((&s["nodes"], &s["leaves"], &s["max_depth"]), (&Value::from(0), &Value::Null, &Value::Null), "{s}");
}

/// A file written only as the run ends (the summary) in a folder the run may not write to is
/// refused before the run, not after it (a read-only file system under root, where permissions do
/// not hold; a folder of mode 555 for anyone else).
#[test]
fn a_summary_that_could_not_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let folder = dir.path().join("read-only");
    std::fs::create_dir(&folder).unwrap();
    let summary = folder.join("s.json");
    let run = format!("{} run --summary-json {} queens --n 6", env!("CARGO_BIN_EXE_bts"), summary.display());
    // SAFETY: geteuid only reads.
    let o = if unsafe { libc::geteuid() } == 0 {
        let script = format!("mount -t tmpfs -o ro,size=64k tmpfs {} && {run}", folder.display());
        match Command::new("unshare").args(["-m", "--propagation", "private", "sh", "-c", &script]).output() {
            Ok(o) if !stderr(&o).contains("unshare:") && !stderr(&o).contains("mount:") => o,
            _ => return eprintln!("skipped: no private mount namespace here"),
        }
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
        Command::new("sh").args(["-c", &run]).output().unwrap()
    };
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot write the summary file") && stderr(&o).contains("its folder"),
        "{}",
        stderr(&o)
    );
    // Refused before the run: no solution was printed.
    assert!(o.stdout.is_empty(), "{}", String::from_utf8_lossy(&o.stdout));
    // A folder given as the summary, likewise.
    let o = bts(&["run", "--summary-json", dir.path().to_str().unwrap(), "queens", "--n", "6"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a folder") && o.stdout.is_empty(), "{}", stderr(&o));
}

/// How a new run starts means nothing to a resumed one: `--initial-depth` on `bts resume` is
/// refused (it was taken and never used), and its help does not offer it.
#[test]
fn resume_refuses_a_first_jobs_depth_limit() {
    let o = bts(&["resume", "nonexistent.ckpt", "--initial-depth", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--initial-depth is the depth limit of a new run's first job"), "{}", stderr(&o));
    let help = String::from_utf8_lossy(&bts(&["resume", "--help"]).stdout).into_owned();
    assert!(help.contains("--maxd") && !help.contains("--initial-depth"), "{help}");
}
