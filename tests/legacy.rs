//! Legacy programs through `bts run exec`: the examples against their own sequential runs, and
//! programs that fail in every way a program can.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/legacy")
}

/// Compiles the C example into `dir`.
fn topsort(dir: &Path) -> PathBuf {
    let exe = dir.join("topsort");
    let status = Command::new("cc")
        .args(["-O2", "-o", exe.to_str().unwrap(), examples().join("topsort.c").to_str().unwrap()])
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    exe
}

/// Sorted lines of a text.
fn sorted(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// The poset of the tests: two chains of three and a free pair, 10 elements.
const POSET: [&str; 7] = ["10", "0<1", "1<2", "3<4", "4<5", "6<7", "8<9"];

#[test]
fn the_c_example_gives_what_its_own_sequential_run_gives() {
    let dir = tempfile::tempdir().unwrap();
    let exe = topsort(dir.path());
    let plain = Command::new(&exe).args(POSET).output().unwrap();
    assert!(plain.status.success());
    let expected = sorted(&String::from_utf8(plain.stdout).unwrap());
    // "N nodes, M linear extensions" on stderr.
    let report = String::from_utf8(plain.stderr).unwrap();
    let plain_nodes: u64 = report.split(' ').next().unwrap().parse().unwrap();
    // Two chains of three and two pairs: 10! / (3! 3! 2! 2!) linear extensions.
    assert_eq!(expected.len(), 3_628_800 / (6 * 6 * 2 * 2));

    let out = dir.path().join("out.txt");
    let budgets: [&[&str]; 3] =
        [&["--budget", "9", "--fixed-budget"], &[], &["--maxd", "2", "--lmin", "1000", "--budget", "1000"]];
    for budget in budgets {
        let mut args = vec!["run", "--workers", "2", "--output", out.to_str().unwrap(), "--summary-json", "-"];
        args.extend_from_slice(budget);
        args.extend_from_slice(&["exec", "--persistent", "--", exe.to_str().unwrap(), "--bts"]);
        args.extend_from_slice(&POSET);
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(0), "{budget:?}: {}", stderr(&o));
        let s = summary(&o);
        assert_eq!(s["nodes"].as_u64(), Some(plain_nodes), "{budget:?}");
        assert_eq!(s["outputs"].as_u64(), Some(expected.len() as u64));
        assert_eq!(s["leaves"].as_u64(), Some(expected.len() as u64));
        assert_eq!(s["max_depth"].as_u64(), Some(10));
        assert_eq!(sorted(&std::fs::read_to_string(&out).unwrap()), expected, "{budget:?}");
    }
}

#[test]
fn the_python_example_gives_what_its_own_sequential_run_gives() {
    let script = examples().join("queens.py");
    let plain = Command::new("python3").arg(&script).arg("7").output().expect("python3");
    assert!(plain.status.success());
    let expected = sorted(&String::from_utf8(plain.stdout).unwrap());
    assert_eq!(expected.len(), 40);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let o = bts(&[
        "run",
        "--workers",
        "2",
        "--budget",
        "25",
        "--fixed-budget",
        "--output",
        out.to_str().unwrap(),
        "--summary-json",
        "-",
        "exec",
        "--",
        "python3",
        script.to_str().unwrap(),
        "7",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    let report = String::from_utf8(plain.stderr).unwrap();
    assert_eq!(s["nodes"].as_u64(), report.split(' ').next().unwrap().parse().ok());
    assert!(s["jobs"].as_u64().unwrap() > 10, "the budget should split the run: {s}");
    assert_eq!(sorted(&std::fs::read_to_string(&out).unwrap()), expected);
}

#[test]
fn remote_workers_run_the_same_program_on_their_side() {
    let dir = tempfile::tempdir().unwrap();
    let exe = topsort(dir.path());
    let address = dir.path().join("address");
    let mut args =
        vec!["run", "--workers", "0", "--listen", "127.0.0.1:0", "--address-file", address.to_str().unwrap()];
    args.extend_from_slice(&["--count-only", "--budget", "20", "--fixed-budget", "--summary-json", "-"]);
    args.extend_from_slice(&["exec", "--persistent", "--", exe.to_str().unwrap(), "--bts"]);
    args.extend_from_slice(&POSET);
    let master = bts_command().args(&args).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let worker = bts(&["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"]);
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    let o = master.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(summary(&o)["outputs"], 25_200);
}

/// A remote worker sends a job's answer in one frame: a job that writes more fails there as a job
/// that writes too much does anywhere, saying why (its answer was once sent and refused whole).
#[test]
fn a_remote_workers_job_fails_clearly_when_its_answer_outgrows_a_frame() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "big.py",
        "#!/usr/bin/env python3\nimport sys\nline = b'out ' + b'y' * (1 << 20) + b'\\n'\n\
         for _ in range(100): sys.stdout.buffer.write(line)\nprint('done 1', flush=True)\n",
    );
    let address = dir.path().join("address");
    let address = address.to_str().unwrap();
    let run = ["run", "--workers", "0", "--listen", "127.0.0.1:0", "--address-file", address, "--progress", "never"];
    let exec = ["exec", "--retries", "0", "--", program.to_str().unwrap()];
    let mut master = bts_command().args([&run[..], &exec].concat()).stderr(Stdio::piped()).spawn().unwrap();
    let mut worker = bts_command().args(["worker", "--connect-file", address, "--threads", "1"]).spawn().unwrap();
    let status = wait_bounded(&mut master, Duration::from_secs(120));
    let mut log = String::new();
    std::io::Read::read_to_string(master.stderr.as_mut().unwrap(), &mut log).unwrap();
    wait_bounded(&mut worker, Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{log}");
    let says = "more than 63 MiB of records, nodes and solutions before its `done` (a remote worker sends a job's \
                answer in one frame)";
    assert!(log.contains(says), "{log}");
}

/// A program that fails, in the way its first argument says, when it is given node n7. Its tree:
/// the root, ten children n0..n9, each with five leaves nX.0..nX.4; every leaf is a record.
const FAULTY: &str = r#"
import os, sys, time
mode, persistent = sys.argv[1], sys.argv[2] == "persistent"
# A branch and bound's records are solutions.
record = "solution 1" if mode in ("badsolution", "spacedsolution", "prunedlate", "optimisedout") else "out"
def job(node, marker):
    if node == "n7" and mode == "quiet":
        print(f"faulty: failing at {node} ({mode})", file=sys.stderr, flush=True)
        time.sleep(60)
    if node == "root":
        for i in range(10): print(f"unexplored 1 n{i}")
    elif node.count(".") == 0:
        for i in range(5): print(f"unexplored 2 {node}.{i}")
    else:
        print(f"{record} {node}")
    if node == "n7" and not (mode == "once" and os.path.exists(marker)):
        print(f"{record} partial record of a failing job", flush=True)
        print(f"faulty: failing at {node} ({mode})", file=sys.stderr, flush=True)
        if mode == "once":
            open(marker, "w").close()
            os._exit(3)
        if mode == "exit": os._exit(3)
        if mode == "signal": os.kill(os.getpid(), 9)
        if mode == "malformed": print("hello bts", flush=True)
        if mode == "nodone": return
        if mode == "closeout": os.close(1); time.sleep(60)
        if mode == "nonewline": sys.stdout.write("done 1"); sys.stdout.flush(); time.sleep(60)
        if mode == "lingers": print("done 1", flush=True); time.sleep(60)
        if mode == "slow": time.sleep(60)
        if mode == "longline": sys.stdout.write("x" * (20 << 20)); sys.stdout.flush(); time.sleep(60)
        if mode == "done0": print("done 0", flush=True); return
        if mode == "baredone": print("done", flush=True); return
        if mode == "leaves": print("done 1 leaves=2", flush=True); return
        if mode == "shallow": print("done 1 max_depth=0", flush=True); return
        if mode == "pruned": print("done 0 pruned=1", flush=True); return
        if mode == "badsolution": print("solution -9223372036854775808 r", flush=True); return
        if mode == "spacedsolution": print("solution  5 r", flush=True); return
        if mode == "solution": print("solution 5 r", flush=True); return
        if mode == "prunedlate": print("done 0 pruned=1", flush=True); return
        if mode == "optimisedout": print("out r", flush=True); return
    print("done 1", flush=True)
marker = sys.argv[3]
if persistent:
    for line in sys.stdin:
        # A branch and bound's job line has the least value before the node.
        job(line.rstrip("\n").split(" ", 4 if record == "out" else 5)[-1], marker)
else:
    job(os.environ["BTS_NODE"], marker)
"#;

/// Runs the faulty program under bts: exit status, stderr, summary.
fn run_faulty(dir: &Path, mode: &str, persistent: bool, extra: &[&str]) -> (Option<i32>, String, Value) {
    // Written once: writing it again could meet a process of the run before still starting it
    // ("Text file busy").
    let script = match dir.join("faulty.py") {
        path if path.exists() => path,
        _ => script(dir, "faulty.py", &format!("#!/usr/bin/env python3\n{FAULTY}")),
    };
    let marker = dir.join(format!("marker-{mode}"));
    let out = dir.join(format!("out-{mode}"));
    let mut args = vec!["run", "--workers", "2", "--budget", "1", "--fixed-budget", "--output", out.to_str().unwrap()];
    // No progress estimate: its probes would run the program on n7 too, and take its one failure.
    args.extend_from_slice(&["--summary-json", "-", "--progress", "never"]);
    args.extend_from_slice(extra);
    args.push("exec");
    if persistent {
        args.push("--persistent");
    }
    if ["badsolution", "spacedsolution", "prunedlate", "optimisedout"].contains(&mode) {
        args.push("--optimise");
    }
    // A short timeout where the program hangs; elsewhere one that a loaded machine's Python starts keep to.
    let timeout = if ["nodone", "slow", "quiet", "nonewline", "lingers"].contains(&mode) { "2" } else { "30" };
    args.extend_from_slice(&["--job-timeout", timeout, "--", script.to_str().unwrap(), mode]);
    args.extend_from_slice(&[if persistent { "persistent" } else { "oneshot" }, marker.to_str().unwrap()]);
    let o = bts(&args);
    let s = String::from_utf8_lossy(&o.stdout).lines().last().and_then(|l| serde_json::from_str(l).ok());
    (o.status.code(), stderr(&o), s.unwrap_or(Value::Null))
}

#[test]
fn failing_programs_stop_the_run_naming_the_node_the_line_and_their_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = "took longer than --job-timeout 2 s";
    let cases: [(&str, bool, &str); 24] = [
        ("exit", true, "ended before `done` (exit status 3)"),
        ("exit", false, "ended before `done` (exit status 3)"),
        ("signal", true, "killed by signal 9"),
        ("signal", false, "killed by signal 9"),
        ("malformed", true, "not a line of the protocol; the offending line: \"hello bts\""),
        ("nodone", false, "ended before `done` (exit status 0)"),
        ("nodone", true, "took longer than --job-timeout 2 s"),
        ("slow", false, "took longer than --job-timeout 2 s"),
        // What bts knows of why it waited or why the answer ended.
        ("closeout", true, "the program closed its stdout before `done` (it is still running)"),
        ("closeout", false, "the program closed its stdout before `done` (it is still running)"),
        ("quiet", true, &format!("{timeout}; the program wrote nothing for this job (does it flush its output?")),
        (
            "nonewline",
            true,
            &format!("{timeout}; the program wrote a line without its newline, which bts cannot take yet: \"done 1\""),
        ),
        ("lingers", false, &format!("{timeout}: the program said `done` but did not exit")),
        ("longline", true, "a line longer than 16777216 bytes; the offending line: \"xxxx"),
        ("done0", true, "`done 0`"),
        ("baredone", false, "not a line of the protocol: not `done <visited> [leaves=<n>]"),
        ("leaves", false, "more leaves than visited nodes; the offending line: \"done 1 leaves=2\""),
        ("shallow", true, "a deepest depth above the job's own node, at depth 1"),
        ("pruned", false, "`pruned=` in a plain enumeration, which prunes nothing"),
        (
            "badsolution",
            false,
            "not `solution <value> <record>`, in lower case, one space apart, with a value from -2^63+1",
        ),
        ("spacedsolution", false, "not a line of the protocol: not `solution <value> <record>`"),
        ("solution", true, "a `solution` line in a plain enumeration (a branch and bound needs --optimise)"),
        ("prunedlate", false, "`done 0` after records, nodes or solutions: a job whose own node was pruned"),
        ("optimisedout", true, "an `out` line in a branch and bound, whose records are its best solutions"),
    ];
    for (mode, persistent, message) in cases {
        let ck = dir.path().join(format!("ck-{mode}-{persistent}"));
        let (code, log, s) = run_faulty(dir.path(), mode, persistent, &["--checkpoint", ck.to_str().unwrap()]);
        let case = format!("{mode} (persistent: {persistent})");
        assert_eq!(code, Some(1), "{case}: {log}");
        assert!(log.contains("a job failed at node \"n7\""), "{case}: {log}");
        assert!(log.contains(message), "{case}: expected {message:?} in {log}");
        assert!(log.contains(&format!("faulty: failing at n7 ({mode})")), "{case}: no stderr tail in {log}");
        assert!(log.contains("(after 3 attempts); the end of the program's stderr"), "{case}: {log}");
        assert!(log.contains("stderr: faulty: failing at n7") && log.contains("faulty.py#"), "{case}: {log}");
        assert!(!log.contains("panicked"));
        // Nothing of the failed job was committed; the checkpoint holds it.
        let out = std::fs::read_to_string(dir.path().join(format!("out-{mode}"))).unwrap();
        assert!(!out.contains("partial") && !out.contains("n7."), "{case}: {out}");
        assert_eq!(s["outcome"], "failed");
        let checkpoint = bts_checkpoints::load(&ck).unwrap();
        assert!(checkpoint.jobs.iter().any(|p| p.node.as_slice() == b"n7"), "{case}");
        assert_eq!(checkpoint.output_len, out.len() as u64);
    }
}

/// A program that cannot start (here: not executable for a moment; in life too many processes or
/// open files, a full disk) is tried again after a pause long enough for a passing shortage: the
/// run carries on, exact. Without the pause, the three attempts took a millisecond and the run
/// stopped.
#[test]
fn a_program_that_cannot_start_for_a_moment_is_tried_again_after_a_pause() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // The root job hands back five leaves, then takes its own execute bit away.
    let program = script(
        dir.path(),
        "leaves.sh",
        "#!/bin/sh\nif [ \"$BTS_NODE\" = root ]; then\n  for k in 1 2 3 4 5; do echo \"unexplored 1 c$k\"; done\n  \
         chmod -x \"$0\"\nelse\n  echo \"out $BTS_NODE\"\nfi\necho \"done 1\"\n",
    );
    let summary_path = dir.path().join("summary.json");
    let mut child = bts_command()
        .args(["run", "--workers", "1", "--budget", "1", "--fixed-budget", "--count-only", "--summary-json"])
        .arg(&summary_path)
        .args(["exec", "--"])
        .arg(&program)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let executable = || std::fs::metadata(&program).unwrap().permissions().mode() & 0o111 != 0;
    wait_until(Duration::from_secs(60), || !executable(), || "the root job never ran".into());
    std::thread::sleep(Duration::from_millis(300));
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let log = stderr_of(&mut child);
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("cannot start") && log.contains("trying again on a fresh process in 1 s (1 of 2)"), "{log}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary_path).unwrap()).unwrap();
    assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(6), Some(5)), "{s}");
}

/// A run stopping for its time limit waits for its jobs out, a hung program's up to its
/// --job-timeout: a first signal then ends the wait at once (it counted as a first stop, and only
/// a second quit), saving what is committed; the resumed run writes every record once.
#[test]
fn a_signal_ends_a_stops_wait_for_a_hung_program() {
    let dir = tempfile::tempdir().unwrap();
    let (hang, reached) = (dir.path().join("hang"), dir.path().join("reached"));
    std::fs::write(&hang, "").unwrap();
    let program = script(
        dir.path(),
        "hangs.py",
        &format!(
            "#!/usr/bin/env python3\nimport os, sys, time\nfor line in sys.stdin:\n    node = line.rstrip('\\n').split(' ', 4)[-1]\n    \
             if node == 'root':\n        print('\\n'.join(f'unexplored 1 c{{i}}' for i in range(8)))\n    \
             elif node == 'c3' and os.path.exists({hang:?}):\n        open({reached:?}, 'w').close()\n        \
             time.sleep(120)\n    print(f'out {{node}}\\ndone 1', flush=True)\n"
        ),
    );
    let (checkpoint, output) = (dir.path().join("run.ckpt"), dir.path().join("out.txt"));
    let mut command = bts_command();
    command.args(["run", "--workers", "2", "--budget", "1", "--fixed-budget", "--time-limit", "3", "--checkpoint"]);
    command.arg(&checkpoint).arg("--output").arg(&output);
    command.args(["exec", "--persistent", "--job-timeout", "100", "--"]).arg(&program);
    let started = std::time::Instant::now();
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    wait_until(Duration::from_secs(60), || reached.exists(), || "the program never reached its hanging node".into());
    // The time limit's stop has begun.
    std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
    signal(&child, "-INT");
    let status = wait_bounded(&mut child, Duration::from_secs(20));
    let said = stderr_of(&mut child);
    assert_eq!(status.code(), Some(3), "{said}");
    assert!(
        said.contains("SIGINT (Ctrl-C): the run was stopping already: saving what is committed and quitting now"),
        "{said}"
    );
    std::fs::remove_file(&hang).unwrap();
    let o = bts_command().arg("resume").arg(&checkpoint).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut records = sorted(&std::fs::read_to_string(&output).unwrap());
    records.dedup();
    let expected: Vec<String> = (0..8).map(|i| format!("c{i}")).chain(["root".to_string()]).collect();
    assert_eq!(records, expected);
    assert_eq!(std::fs::read_to_string(&output).unwrap().lines().count(), 9);
}

#[test]
fn a_job_that_fails_once_is_redone_on_a_fresh_process_and_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    for persistent in [true, false] {
        let (code, log, s) = run_faulty(dir.path(), "once", persistent, &[]);
        assert_eq!(code, Some(0), "{log}");
        assert!(log.contains("trying again on a fresh process in 0.1 s (1 of 2)"), "{log}");
        // 1 + 10 + 50 nodes, the 50 leaves each a record, and not the failed attempt's.
        assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(61), Some(50)), "{s}");
        let out = std::fs::read_to_string(dir.path().join("out-once")).unwrap();
        assert_eq!(sorted(&out).len(), 50);
        assert!(!out.contains("partial"));
        std::fs::remove_file(dir.path().join("marker-once")).unwrap();
    }
}

#[test]
fn programs_that_cannot_run_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable.py");
    std::fs::write(&script, "print('done 1')\n").unwrap();
    // Executable, but the system cannot run them: a #! line naming no program, and no #! line.
    let shebang = self::script(dir.path(), "bad-shebang.sh", "#!/nonexistent/sh\necho 'done 1'\n");
    let garbage = self::script(dir.path(), "garbage", "\x01\x02 not a program\n");
    // Windows line ends: the kernel looks for "/bin/sh\r", or env for "sh\r".
    let crlf = self::script(dir.path(), "crlf.sh", "#!/bin/sh\r\necho 'done 1'\r\n");
    let crlf_env = self::script(dir.path(), "crlf-env.sh", "#!/usr/bin/env sh\r\necho 'done 1'\r\n");
    let cases = [
        (vec!["run", "exec", "--", script.to_str().unwrap()], "is not executable"),
        (vec!["run", "exec", "--persistent", "--", shebang.to_str().unwrap()], "names \"/nonexistent/sh\""),
        (vec!["run", "exec", "--", garbage.to_str().unwrap()], "neither a binary nor a script with a #! line"),
        (vec!["run", "exec", "--", crlf.to_str().unwrap()], "ends in a carriage return (Windows line ends)"),
        (vec!["run", "exec", "--", crlf_env.to_str().unwrap()], "part of \"/usr/bin/env sh\\r\": convert"),
        (vec!["run", "exec", "--", "/tmp"], "is a directory, not a program"),
        (vec!["run", "exec", "--", "/dev/null"], "is not a regular file"),
        (vec!["run", "exec", "--", "/nonexistent/program"], "no such file"),
        (vec!["run", "exec", "--", "no-such-program-anywhere"], "not found on PATH"),
        (vec!["run", "exec"], "PROGRAM"),
        (vec!["run", "exec", "--job-timeout", "0", "--", "true"], "not a number of seconds from 1e-9"),
        (vec!["run", "exec", "--job-timeout", "1e-12", "--", "true"], "not a number of seconds from 1e-9"),
    ];
    for (args, message) in cases {
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

/// A persistent program that exits 1 after each `done` loses nothing, and is said to: whether bts
/// finds it gone before it sends the next job (it said nothing), or after (that job was failed,
/// and with `--retries 0` the run).
#[test]
fn a_persistent_program_that_ends_after_its_done_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "once.sh",
        "#!/bin/sh\nread -r job\ncase \"$job\" in *root) printf 'unexplored 1 a\\nunexplored 1 b\\n' ;; esac\n\
         echo done 1\nexit 1\n",
    );
    for _ in 0..3 {
        let exec = ["exec", "--persistent", "--retries", "0", "--", program.to_str().unwrap()];
        let o = bts(&[&["run", "--workers", "1", "--summary-json", "-"][..], &exec].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(summary(&o)["nodes"], 3);
        let said = stderr(&o);
        let warning = "the program ended (exit status 1) after its `done` of the job at node \"root\"; a fresh process";
        assert!(said.contains(warning), "{said}");
    }
}

/// A program's stderr shows as warnings up to 20 lines a second: the rest go to the debug log
/// (`-vv`), and their count is told (a chatty program printed 200,000 warnings).
#[test]
fn a_chatty_programs_stderr_is_held_back_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "chatty.sh",
        "#!/bin/sh\ni=0\nwhile [ $i -lt 500 ]; do echo \"progress $i\" >&2; i=$((i+1)); done\n\
         sleep 1.2\necho 'after a quiet second' >&2\necho done 1\n",
    );
    let shown = |verbose: &[&str]| {
        let o = bts(&[
            &["run", "--workers", "1", "--progress", "never"],
            verbose,
            &["exec", "--", program.to_str().unwrap()],
        ]
        .concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        (stderr(&o).matches("stderr: progress").count(), stderr(&o))
    };
    let (lines, said) = shown(&[]);
    assert_eq!(lines, 20, "{said}");
    assert!(said.contains("programs' stderr: 480 more lines, past 20 a second"), "{said}");
    // A new second shows lines again, once the held ones are told.
    let told = said.find("480 more lines").unwrap();
    assert!(said.find("WARN stderr: after a quiet second").is_some_and(|at| at > told), "{said}");
    // All of them at debug level (the progress estimate's probes of the program may add theirs).
    assert!(shown(&["-vv"]).0 >= 500);
}

#[test]
fn log_lines_go_to_the_log_tagged_with_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("logger.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"log hello from $BTS_NODE\"\necho 'done 1'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = bts(&["run", "-v", "--workers", "1", "exec", "--root", "the root", "--", script.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("hello from the root") && stderr(&o).contains("logger.sh#0"), "{}", stderr(&o));
}

/// Nodes are bytes: a node that is not UTF-8, or ends in a carriage return, reaches the program
/// that continues it exactly as the program that returned it wrote it, in both modes.
#[test]
fn nodes_and_records_travel_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "bytes.py",
        r#"#!/usr/bin/env python3
import os, sys
def job(node, argument):
    assert argument is None or argument == node, (argument, node)
    out = sys.stdout.buffer
    if node == b"root":
        out.write(b"unexplored 1 \xff\r\nunexplored 1 a\xfe b\n")
    out.write(b"out " + node.hex().encode() + b"\ndone 1\n")
    out.flush()
if sys.argv[1] == "persistent":
    for line in sys.stdin.buffer:
        job(line[:-1].split(b" ", 4)[4], None)
else:
    job(os.environb[b"BTS_NODE"], os.fsencode(sys.argv[2]))
"#,
    );
    let expected = sorted(&format!("{}\nff0d\n61fe2062\n", hex(b"root")));
    for persistent in [true, false] {
        let mut args = vec!["run", "--workers", "2", "--budget", "1", "--fixed-budget", "exec"];
        if persistent {
            args.push("--persistent");
        }
        args.extend_from_slice(&["--", program.to_str().unwrap()]);
        args.extend_from_slice(if persistent { &["persistent"] } else { &["oneshot", "{node}"] });
        let o = bts(&args);
        assert_eq!(o.status.code(), Some(0), "persistent: {persistent}: {}", stderr(&o));
        assert_eq!(sorted(&String::from_utf8(o.stdout).unwrap()), expected, "persistent: {persistent}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A persistent program that numbers its answers (`done ... job=<n>`) has each checked against its
/// job: a late, repeated `done` fails the job it would have answered, which is then done again on a
/// fresh process, and the run is exact.
#[test]
fn a_late_repeated_done_cannot_answer_the_next_job() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("repeated");
    let program = script(
        dir.path(),
        "twice.py",
        r#"#!/usr/bin/env python3
import os, sys
marker, n, late = sys.argv[1], 0, False
for line in sys.stdin:
    n += 1
    if late:
        # The previous job's `done` again, once the next job is given.
        print(f"done 1 job={n - 1}", flush=True)
        late = False
    node = line.rstrip("\n").split(" ", 4)[4]
    if node == "root":
        for i in range(10): print(f"unexplored 1 n{i}")
    elif "." not in node:
        for i in range(5): print(f"unexplored 2 {node}.{i}")
    else:
        print(f"out {node}")
    print(f"done 1 job={n}", flush=True)
    if node == "n7" and not os.path.exists(marker):
        open(marker, "w").close()
        late = True
"#,
    );
    // No progress estimate: its probes would run the program on n7 too, and be the ones to repeat.
    let args =
        ["run", "--workers", "1", "--budget", "1", "--fixed-budget", "--progress", "never", "--summary-json", "-"];
    let args = [&args[..], &["exec"]].concat();
    let o = bts(&[&args[..], &["--persistent", "--", program.to_str().unwrap(), marker.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(marker.exists(), "the program never repeated itself");
    assert!(stderr(&o).contains("a `done` for job"), "{}", stderr(&o));
    let s = summary(&o);
    // 1 + 10 + 50 nodes, the 50 leaves each a record.
    assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(61), Some(50)), "{s}");
}

/// A one-shot job ends at its `done` and the program's exit: what the program left running in the
/// background is killed with its process group, even while it holds the program's stdout open (it
/// used to hold every job until its timeout); something that escaped the group is reported.
#[test]
fn one_shot_jobs_end_at_done_and_exit_whatever_the_program_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "helper.sh",
        r#"#!/bin/sh
case "$BTS_NODE" in
root) i=0; while [ $i -lt 6 ]; do echo "unexplored 1 n$i"; i=$((i+1)); done
      # Out of the group for sure (setsid has run) before the job ends.
      setsid sh -c 'touch "$0"; exec sleep 3' "$BTS_ESCAPED" &
      while [ ! -e "$BTS_ESCAPED" ]; do sleep 0.01; done ;;
*) echo "out $BTS_NODE"; sleep 30 & ;;
esac
echo "done 1"
"#,
    );
    let args = ["run", "--workers", "2", "--budget", "1", "--fixed-budget", "--summary-json", "-", "exec"];
    let o = bts_command()
        .env("BTS_ESCAPED", dir.path().join("escaped"))
        .args([&args[..], &["--job-timeout", "20", "--", program.to_str().unwrap()]].concat())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(7), Some(6)), "{s}");
    assert!(s["elapsed_s"].as_f64().unwrap() < 15.0, "jobs waited for their background helpers: {s}");
    assert!(stderr(&o).contains("left its process group"), "{}", stderr(&o));
}

/// A program that dies before its `done` while something it started in the background holds its
/// stdout fails its job at once, not when the helper exits or at the job's timeout.
#[test]
fn a_program_that_dies_leaving_a_helper_on_its_stdout_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(dir.path(), "dies.sh", "#!/bin/sh\nsleep 30 &\nread -r line\necho 'died' >&2\nexit 1\n");
    for persistent in [false, true] {
        let mut args = vec!["run", "--workers", "1", "--summary-json", "-", "--progress", "never", "exec"];
        if persistent {
            args.push("--persistent");
        }
        args.extend_from_slice(&["--retries", "0", "--job-timeout", "60", "--", program.to_str().unwrap()]);
        let started = std::time::Instant::now();
        let o = bts(&args);
        let log = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{log}");
        assert!(log.contains("the program ended before `done` (exit status 1)"), "{log}");
        assert!(started.elapsed() < Duration::from_secs(20), "waited for the helper: {log}");
    }
}

/// A job that fails for good ends the run at once, with the error, although another job still
/// runs (here one that would take 30 s); the checkpoint holds both, and nothing is left running:
/// on the master's workers, and on a remote worker, which the run's end makes give its job up.
#[test]
fn a_failed_job_ends_the_run_without_waiting_for_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "failhang.sh",
        r#"#!/bin/sh
case "$BTS_NODE" in
root) printf 'unexplored 1 a\nunexplored 1 b\ndone 1\n' ;;
a) sleep 0.5; echo crash >&2; exit 1 ;;
b) touch "$0.b"; sleep 30; echo "done 1" ;;
esac
"#,
    );
    let address = dir.path().join("address");
    let exec = ["exec", "--retries", "0", "--", program.to_str().unwrap()];
    for remote in [false, true] {
        let _ = std::fs::remove_file(dir.path().join("failhang.sh.b"));
        let ck = dir.path().join(format!("ck-{remote}"));
        let mut run = vec!["run", "--fixed-budget", "--progress", "never", "--checkpoint", ck.to_str().unwrap()];
        match remote {
            false => run.extend(["--workers", "2"]),
            true => {
                run.extend(["--workers", "0", "--listen", "127.0.0.1:0", "--address-file", address.to_str().unwrap()])
            }
        }
        let started = std::time::Instant::now();
        let master =
            bts_command().args([&run[..], &exec].concat()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let worker = remote.then(|| {
            wait_until(Duration::from_secs(30), || address.exists(), || "no address file".into());
            bts_command().args(["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"]).output()
        });
        let o = master.wait_with_output().unwrap();
        let log = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "remote {remote}: {log}");
        assert!(log.contains("a job failed at node \"a\"") && log.contains("exit status 1"), "{log}");
        if let Some(w) = worker {
            let w = w.unwrap();
            assert!(!stderr(&w).contains("panicked"), "{}", stderr(&w));
        }
        assert!(started.elapsed() < Duration::from_secs(20), "remote {remote}: waited for the other job: {log}");
        let mut nodes: Vec<Vec<u8>> =
            bts_checkpoints::load(&ck).unwrap().jobs.iter().map(|p| p.node.as_slice().to_vec()).collect();
        nodes.sort();
        assert_eq!(nodes, [b"a".to_vec(), b"b".to_vec()]);
        assert!(dir.path().join("failhang.sh.b").exists(), "job b never ran");
    }
}

/// A persistent program may exit after any `done` (here after each): it is started again for the
/// next job, without a failure counted (the job used to fail when it reached the exiting process);
/// and what a fresh process writes before its first job (a `log` line as it starts) is part of
/// that job's answer, whatever the number of workers (it used to stop the run as written after a
/// `done` when the program was quicker than its first job).
#[test]
fn a_persistent_program_may_exit_after_done_and_speak_before_its_first_job() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "onejob.sh",
        r#"#!/bin/sh
echo "log starting up"
read -r kw b m d node
if [ "$d" -lt 6 ]; then echo "unexplored $((d+1)) ${node}0"; echo "unexplored $((d+1)) ${node}1"; else echo "out $node"; fi
echo "done 1"
"#,
    );
    // Exits a moment after its `done`, when its next job is on its way: that job finds it gone.
    let lingering = script(
        dir.path(),
        "lingering.sh",
        r#"#!/bin/sh
read -r kw b m d node
if [ "$d" -lt 6 ]; then echo "unexplored $((d+1)) ${node}0"; echo "unexplored $((d+1)) ${node}1"; else echo "out $node"; fi
echo "done 1"
sleep 0.02
"#,
    );
    let cases = [("1", &program), ("2", &program), ("3", &program), ("3", &program), ("2", &lingering)];
    for (workers, program) in cases {
        let args = ["run", "--workers", workers, "--summary-json", "-", "--progress", "never", "exec", "--persistent"];
        let o = bts(&[&args[..], &["--retries", "0", "--root", "r", "--", program.to_str().unwrap()]].concat());
        let log = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{workers} workers: {log}");
        assert!(!log.contains("WARN"), "{workers} workers: {log}");
        let s = summary(&o);
        // A binary tree of depth 6: 127 nodes, its 64 leaves the records.
        assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(127), Some(64)), "{s}");
    }
}

/// A job whose try fails while the run stops (Ctrl-C) is not tried again then, but it is no failed
/// run either: it goes back to the job list (exit 3), and the resumed run does it (it used to end
/// the run `failed`, exit 1).
#[test]
fn a_job_that_fails_as_the_run_stops_is_kept_for_the_resumed_run() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "slowfail.sh",
        r#"#!/bin/sh
case "$BTS_NODE" in
root) touch "$0.started"; sleep 1
      if [ ! -e "$0.failed" ]; then touch "$0.failed"; exit 3; fi
      printf 'unexplored 1 a\nunexplored 1 b\n' ;;
*) echo "out $BTS_NODE" ;;
esac
echo "done 1"
"#,
    );
    let (ck, out) = (dir.path().join("ck"), dir.path().join("out"));
    let mut run = bts_command()
        .args(["run", "--workers", "1", "--progress", "never", "--checkpoint", ck.to_str().unwrap()])
        .args(["--output", out.to_str().unwrap(), "exec", "--", program.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = dir.path().join("slowfail.sh.started");
    wait_until(Duration::from_secs(30), || started.exists(), || "the job did not start".into());
    signal(&run, "-INT");
    let status = wait_bounded(&mut run, Duration::from_secs(30));
    let log = stderr_of(&mut run);
    assert_eq!(status.code(), Some(3), "{log}");
    assert!(log.contains("given up as the run or its worker stops"), "{log}");
    let o = bts(&["resume", ck.to_str().unwrap(), "--summary-json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(summary(&o)["nodes"].as_u64(), Some(3));
    assert_eq!(sorted(&std::fs::read_to_string(&out).unwrap()), ["a", "b"]);
}

/// A one-shot program gets its node in its arguments and environment: a node returned that cannot
/// go there (a NUL byte, or longer than the system passes in one string, `{node}` in a longer
/// argument included) fails the job that returned it, saying why, instead of every try of the job
/// that would get it. A node just short of the limit goes through.
#[test]
fn a_node_a_one_shot_program_cannot_be_given_is_refused_where_it_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "bignode.py",
        "#!/usr/bin/env python3\nimport os, sys\nsizes = {'nul': 0, 'long': 200000, 'edge': 131062}\n\
         if os.environ['BTS_NODE'] == 'root':\n    node = b'a\\0b' if sys.argv[1] == 'nul' else b'x' * sizes[sys.argv[1]]\n    \
         sys.stdout.buffer.write(b'unexplored 1 ' + node + b'\\n')\nprint('done 1')\n",
    );
    let program = program.to_str().unwrap();
    let cases: [(&[&str], Option<&str>); 4] = [
        (&["nul"], Some("it holds a NUL byte")),
        (&["long"], Some("its 200000 bytes make the environment string BTS_NODE=<node> 200009 bytes long, more than")),
        (
            &["edge", "--start-node={node}"],
            Some("its 131062 bytes make the argument \"--start-node={node}\" 131075 bytes"),
        ),
        (&["edge"], None),
    ];
    for (args, why) in cases {
        let run = ["run", "--workers", "1", "--progress", "never", "exec", "--root", "root", "--", program];
        let o = bts(&[&run[..], args].concat());
        let log = stderr(&o);
        let Some(why) = why else {
            assert_eq!(o.status.code(), Some(0), "{args:?}: {log}");
            continue;
        };
        assert_eq!(o.status.code(), Some(1), "{args:?}: {log}");
        // Said once, by the run's error: the log line as the job failed only says the run stops.
        let said = format!("a node that a one-shot program cannot be given: {why}");
        assert_eq!(log.matches(&said).count(), 1, "{args:?}: {log}");
        assert!(log.contains("a job failed; the run stops"), "{args:?}: {log}");
        assert!(log.contains("1 job was left (give --checkpoint FILE to keep it)"), "{args:?}: {log}");
        assert!(log.contains("a job failed at node \"root\"") && log.contains("(after 1 attempt)"), "{args:?}: {log}");
    }
    // A root that cannot go there is refused before the run.
    let root = "r".repeat(131_063);
    let o = bts(&["run", "--progress", "never", "exec", "--root", &root, "--", program, "edge"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let refusal = "a one-shot program cannot be given the root (--root): its 131063 bytes make the environment string";
    assert!(stderr(&o).contains(refusal), "{}", stderr(&o));
    let o = bts(&["run", "--progress", "never", "exec", "--persistent", "--root", &root, "--", "cat"]);
    assert!(!stderr(&o).contains("cannot be given the root"), "{}", stderr(&o));
}

/// A persistent program that crashes after its `done`, before it answers the next job, is not said
/// to have ended "before `done`": it is warned of, and the next job goes to a fresh process as its
/// first, not counted as a failed attempt (whether it failed depended on when bts found the
/// program gone). A program that crashes on that job fails it there.
#[test]
fn a_program_that_crashes_after_its_answer_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "crash.py",
        "#!/usr/bin/env python3\nimport sys\nline = sys.stdin.readline()\n\
         print('unexplored 1 a' if line.endswith(' root\\n') else 'out x')\nprint('done 1', flush=True)\nsys.stdin.readline()\nsys.exit(4)\n",
    );
    let args = ["run", "--workers", "1", "--progress", "never", "exec", "--persistent", "--retries", "0"];
    let o = bts(&[&args[..], &["--", program.to_str().unwrap()]].concat());
    let log = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    let told = "the program ended (exit status 4) after its `done` of the job at node \"root\"; a fresh process takes \
                the next job";
    assert!(log.contains(told) && !log.contains("before `done`"), "{log}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "x\n");
    // A program that crashes on every job but the root's fails the next one on its fresh process.
    let program = script(
        dir.path(),
        "crashes.py",
        "#!/usr/bin/env python3\nimport sys\nline = sys.stdin.readline()\nif not line.endswith(' root\\n'): sys.exit(4)\n\
         print('unexplored 1 a\\ndone 1', flush=True)\nsys.stdin.readline()\nsys.exit(4)\n",
    );
    let o = bts(&[&args[..], &["--", program.to_str().unwrap()]].concat());
    let log = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(log.contains("a job failed at node \"a\": the program ended before `done` (exit status 4)"), "{log}");
}

/// A program that floods bts with records before its `done` fails its job clearly instead of
/// growing bts's memory without bound.
#[test]
fn a_job_that_answers_without_end_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "flood.py",
        "#!/usr/bin/env python3\nimport sys\nline = b'out ' + b'y' * (1 << 20) + b'\\n'\nwhile True: sys.stdout.buffer.write(line)\n",
    );
    let o = bts(&["run", "--workers", "1", "exec", "--retries", "0", "--", program.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("more than 256 MiB of records, nodes and solutions before its `done`"),
        "{}",
        stderr(&o)
    );
    // Empty nodes count too: each costs bts memory.
    let program = script(
        dir.path(),
        "empties.py",
        "#!/usr/bin/env python3\nimport sys, time\nfor _ in range(100): sys.stdout.buffer.write(b'unexplored 1 \\n' * 100000)\n\
         sys.stdout.flush()\ntime.sleep(60)\n",
    );
    let o = bts(&["run", "--workers", "1", "exec", "--retries", "0", "--", program.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("more than 256 MiB of records, nodes and solutions before its `done`"),
        "{}",
        stderr(&o)
    );
}

/// A branch and bound's solutions count towards that limit, but only those the master could keep
/// are held: a job's best, or all of its best value with `--all-best`. 300 MB of solutions, each
/// better than the last (a first descent) or all ties, take no memory; distinct ties that the run
/// must keep fail the job as records do.
#[test]
fn a_job_holds_only_the_solutions_the_run_could_keep() {
    let dir = tempfile::tempdir().unwrap();
    // 4,500 solutions of 64 KiB each, then `done 1`; `rising`: values 1, 2, ...; else all 7.
    let program = script(
        dir.path(),
        "solutions.py",
        "#!/usr/bin/env python3\nimport sys\nrising = sys.argv[1] == 'rising'\nsys.stdin.readline()\n\
         pad = b'y' * 65536\nfor i in range(4500):\n    value = i + 1 if rising else 7\n    \
         sys.stdout.buffer.write(b'solution %d %d ' % (value, i) + pad + b'\\n')\nprint('done 1', flush=True)\n",
    );
    let program = program.to_str().unwrap();
    let run = ["run", "--workers", "1", "--progress", "never", "--summary-json", "-"];
    for (how, value, first) in [("rising", 4500, "4499 "), ("ties", 7, "0 ")] {
        let exec = ["exec", "--persistent", "--optimise", "--retries", "0", "--", program, how];
        let o = bts(&[&run[..], &exec].concat());
        assert_eq!(o.status.code(), Some(0), "{how}: {}", stderr(&o));
        assert_eq!(summary(&o)["best"]["value"], value, "{how}");
        // The best of the job, or the first of its ties, as the master keeps it.
        assert!(String::from_utf8_lossy(&o.stdout).starts_with(first), "{how}");
    }
    let exec = ["exec", "--persistent", "--optimise", "--retries", "0", "--", program, "ties"];
    let o = bts(&[&["run", "--workers", "1", "--progress", "never", "--all-best"][..], &exec].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("more than 256 MiB of records, nodes and solutions"), "{}", stderr(&o));
}

/// Binary strings of length up to 7 (255 nodes, each a record), persistent; the first process
/// answers its third job twice (a stray `done` after its `done`), numbering its answers if told,
/// or (`partial`) writes the start of a line after it.
const TWICE: &str = r#"#!/usr/bin/env python3
import os, sys, time
numbered, marker = sys.argv[1] == "numbered", sys.argv[2]
for n, line in enumerate(sys.stdin, 1):
    _, budget, _, depth, node = line.rstrip("\n").split(" ", 4)
    stack, visited = ["" if node == "root" else node], 0
    while stack:
        s = stack.pop()
        if visited == int(budget):
            print(f"unexplored {len(s)} {s}")
            continue
        visited += 1
        print(f"out b{s}")
        if len(s) < 7:
            stack += [s + "1", s + "0"]
    done = f"done {visited}" + (f" job={n}" if numbered else "")
    late = n == 3 and not os.path.exists(marker)
    if late and sys.argv[1] == "partial":
        # The start of a line, with the answer: one write.
        open(marker, "w").close()
        sys.stdout.write(f"{done}\nout late")
        sys.stdout.flush()
        continue
    print(done, flush=True)
    if late:
        # A whole second answer, a moment later.
        open(marker, "w").close()
        time.sleep(0.05)
        print(done, flush=True)
"#;

/// A stray second answer could be taken for the next job's: without `job=` numbers the run cannot
/// be trusted and stops (exit 1); with them each answer is checked and the count is exact.
#[test]
fn a_program_that_writes_after_its_done_stops_the_run_unless_it_numbers_its_answers() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(dir.path(), "twice.py", TWICE);
    let out = dir.path().join("out.txt");
    let run =
        ["run", "--workers", "1", "--budget", "5", "--fixed-budget", "--progress", "never", "--summary-json", "-"];
    let run = [&run[..], &["--output", out.to_str().unwrap(), "exec", "--persistent", "--"]].concat();
    let marker = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    for mode in ["plain", "partial"] {
        let o = bts(&[&run[..], &[program.to_str().unwrap(), mode, &marker(mode)]].concat());
        assert_eq!(o.status.code(), Some(1), "{mode}: {}", stderr(&o));
        assert!(stderr(&o).contains("number its answers"), "{mode}: {}", stderr(&o));
        // The line belongs to the job before, which is named, not to the job it was found in.
        let said = stderr(&o);
        let (_, failed) = said.split_once("a job failed at node ").expect("the failed job named");
        let (failed, late) = failed.split_once(": the program wrote after its `done` of the job at node ").unwrap();
        let late = late.split_once(':').unwrap().0;
        assert_ne!(failed, late, "{mode}: {said}");
    }
    let o = bts(&[&run[..], &[program.to_str().unwrap(), "numbered", &marker("numbered")]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!((summary(&o)["nodes"].as_u64(), summary(&o)["outputs"].as_u64()), (Some(255), Some(255)));
    assert_records_once(&out, 255);
}

/// A one-shot program's stdin is empty (a program that reads it first goes on at once), and its
/// last line, `done`, may lack its newline.
#[test]
fn a_one_shot_program_reads_an_empty_input_and_may_end_without_a_newline() {
    let dir = tempfile::tempdir().unwrap();
    let program =
        script(dir.path(), "reader.sh", "#!/bin/sh\ncat >/dev/null\nprintf 'out %s\\ndone 1' \"$BTS_NODE\"\n");
    let run = ["run", "--workers", "1", "--progress", "never", "--summary-json", "-"];
    let o = bts(&[&run[..], &["exec", "--job-timeout", "5", "--", program.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().next(), Some("root"));
    assert_eq!((summary(&o)["nodes"].as_u64(), summary(&o)["outputs"].as_u64()), (Some(1), Some(1)));
}

/// A stop waits only for the legacy jobs under way: those queued at a worker go back unstarted
/// (they ran too, holding the stop up as long again), on the master's threads and on a remote
/// worker, and the run resumes to its exact count (a root and six leaves).
#[test]
fn a_stop_hands_back_the_legacy_jobs_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "sleepy.sh",
        "#!/bin/sh
if [ \"$BTS_NODE\" = root ]; then
  for i in 1 2 3 4 5 6; do echo \"unexplored 1 c$i\"; done
         else
  sleep \"$NAP\"
fi
echo 'done 1'
",
    );
    let ck = dir.path().join("run.ckpt");
    let address = dir.path().join("address");
    let exec = ["exec", "--", program.to_str().unwrap()];
    for remote in [false, true] {
        let _ = std::fs::remove_file(&ck);
        let mut run = vec!["run", "--progress", "never", "--time-limit", "1", "--checkpoint", ck.to_str().unwrap()];
        match remote {
            false => run.extend(["--workers", "2"]),
            true => {
                run.extend(["--workers", "0", "--listen", "127.0.0.1:0", "--address-file", address.to_str().unwrap()])
            }
        }
        let started = std::time::Instant::now();
        let mut master = bts_command()
            .env("NAP", "4")
            .args([&run[..], &exec].concat())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let worker = remote.then(|| {
            let mut w = bts_command();
            w.env("NAP", "4").args(["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"]);
            w.output().unwrap()
        });
        wait_bounded(&mut master, std::time::Duration::from_secs(30));
        let o = master.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        // The jobs under way end 4 s after they started; those queued behind them took 4 s more.
        assert!(started.elapsed() < std::time::Duration::from_secs(7), "remote {remote}: {:?}", started.elapsed());
        if let Some(w) = worker {
            assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
        }
        let o = bts_command()
            .env("NAP", "0")
            .args(["resume", ck.to_str().unwrap(), "--workers", "2", "--summary-json", "-"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(summary(&o)["nodes"].as_u64(), Some(7), "{}", stderr(&o));
    }
}

/// A job that fails while the run stops is not tried again: retries would hold the stop up by
/// `--job-timeout` each. It goes back to the job list, and the run stops as told (exit 3).
#[test]
fn a_job_failing_as_the_run_stops_is_not_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "hang.sh",
        "#!/bin/sh\ncase \"$BTS_NODE\" in\nroot) echo 'unexplored 1 a'; echo 'unexplored 1 b';;\na) sleep 40;;\nesac\n\
         echo 'done 1'\n",
    );
    let ck = dir.path().join("run.ckpt");
    let address = dir.path().join("address");
    let exec = ["exec", "--job-timeout", "2", "--retries", "5", "--", program.to_str().unwrap()];
    // On the master's workers, and on a remote worker, which the master tells of the stop.
    for remote in [false, true] {
        let _ = std::fs::remove_file(&address);
        let _ = std::fs::remove_file(&ck);
        let started = std::time::Instant::now();
        let mut run = vec!["run", "--progress", "never", "--time-limit", "0.5", "--checkpoint", ck.to_str().unwrap()];
        match remote {
            false => run.extend(["--workers", "2"]),
            true => {
                run.extend(["--workers", "0", "--listen", "127.0.0.1:0", "--address-file", address.to_str().unwrap()])
            }
        }
        let mut master =
            bts_command().args([&run[..], &exec].concat()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let worker = remote.then(|| bts(&["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"]));
        wait_bounded(&mut master, std::time::Duration::from_secs(30));
        let o = master.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(stderr(&o).contains("job given up as the run or its worker stops"), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("(after 1 attempt, not tried again as the run or its worker stops)"),
            "{}",
            stderr(&o)
        );
        // Six attempts would take 12 s.
        assert!(started.elapsed() < std::time::Duration::from_secs(8), "remote {remote}: {:?}", started.elapsed());
        if let Some(w) = worker {
            assert!(!stderr(&w).contains("panicked"), "{}", stderr(&w));
            // Which machine's program failed.
            assert!(stderr(&o).contains("(on the remote worker at 127.0.0.1:"), "{}", stderr(&o));
        }
        // The checkpoint keeps the job, to be run again on resuming.
        assert!(bts_checkpoints::load(&ck).unwrap().jobs.iter().any(|p| p.node.as_slice() == b"a"));
    }
}

/// A remote worker told to leave (a signal) does not try a failing job again either: it would hold
/// its leaving up by `--job-timeout` a try. The job goes back to the job list, and another worker
/// does it (the run used to fail).
#[test]
fn a_leaving_remote_worker_does_not_try_a_failing_job_again() {
    let dir = tempfile::tempdir().unwrap();
    // Job a hangs the first time only.
    let program = script(
        dir.path(),
        "hang.sh",
        "#!/bin/sh\ncase \"$BTS_NODE\" in\nroot) echo 'unexplored 1 a'; echo 'unexplored 1 b';;\n\
         a) if [ ! -e \"$0.started\" ]; then touch \"$0.started\"; sleep 40; fi;;\nesac\necho 'done 1'\n",
    );
    let address = dir.path().join("address");
    let run = ["run", "--progress", "never", "--workers", "0", "--listen", "127.0.0.1:0", "--address-file"];
    let exec = ["exec", "--job-timeout", "2", "--retries", "5", "--", program.to_str().unwrap()];
    let mut master = bts_command()
        .args([&run[..], &[address.to_str().unwrap()], &exec].concat())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let worker = bts_command()
        .args(["worker", "--connect-file", address.to_str().unwrap(), "--threads", "2"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = dir.path().join("hang.sh.started");
    wait_until(std::time::Duration::from_secs(30), || started.exists(), || "the job did not start".into());
    let asked = std::time::Instant::now();
    signal(&worker, "-TERM");
    let w = worker.wait_with_output().unwrap();
    // Six attempts would take 12 s.
    assert!(asked.elapsed() < std::time::Duration::from_secs(8), "{:?}: {}", asked.elapsed(), stderr(&w));
    assert!(stderr(&w).contains("left the run"), "{}", stderr(&w));
    let other = bts(&["worker", "--connect-file", address.to_str().unwrap(), "--threads", "1"]);
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    wait_bounded(&mut master, std::time::Duration::from_secs(30));
    let o = master.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("not tried again as the run or its worker stops"), "{}", stderr(&o));
    assert!(stderr(&o).contains("complete: 3 nodes"), "{}", stderr(&o));
}

/// `--job-timeout` holds while bts writes a job line too: a persistent program that never reads
/// its input, given a node longer than a pipe holds, fails its job in time.
#[test]
fn a_program_that_does_not_read_its_job_line_fails_it_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(dir.path(), "deaf.sh", "#!/bin/sh\nexec sleep 30\n");
    let root = "x".repeat(100_000);
    let started = std::time::Instant::now();
    let run = ["run", "--workers", "1", "--progress", "never", "exec", "--persistent", "--retries", "0"];
    let o = bts(&[&run[..], &["--job-timeout", "1", "--root", &root, "--", program.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("it did not read its job line"), "{}", &stderr(&o)[..2000.min(stderr(&o).len())]);
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "{:?}", started.elapsed());
    // The error names the node by its start, not its 100 kB.
    assert!(stderr(&o).len() < 5000, "{} bytes of messages", stderr(&o).len());
}

/// Reports that would overflow the run's totals fail their job: the run stops with an error
/// instead of wrapping around or crashing.
#[test]
fn a_done_that_would_overflow_the_totals_fails_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "huge.sh",
        "#!/bin/sh\nif [ \"$BTS_NODE\" = root ]; then echo 'unexplored 1 a'; echo 'unexplored 1 b'; echo 'done 1'; \
         else echo 'done 18446744073709551615'; fi\n",
    );
    let args = ["run", "--workers", "1", "--budget", "inf", "--fixed-budget", "--summary-json", "-", "exec"];
    let o = bts(&[&args[..], &["--", program.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("a job failed: the report of job 1 would overflow the run's totals"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    // Pruned nodes are a total too (a branch and bound's).
    let program = script(
        dir.path(),
        "pruned.sh",
        "#!/bin/sh
if [ \"$BTS_NODE\" = root ]; then echo 'unexplored 1 a'; echo 'unexplored 1 b'; fi; \
         echo 'done 1 pruned=18446744073709551615'\n",
    );
    let o = bts(&[&args[..], &["--optimise", "--", program.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("would overflow the run's totals"), "{}", stderr(&o));
}

#[test]
fn budgets_are_soft_a_job_may_visit_more_than_its_budget_and_is_counted_as_it_says() {
    // The tree of FAULTY; a job at nX ignores its budget of 1 and finishes its five leaves, as lrs
    // finishes the leaves on its stack. A node returned at the job's own depth is still refused.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("soft.sh");
    let program = r#"#!/bin/sh
case "$BTS_NODE" in
  root) for i in 0 1 2 3 4 5 6 7 8 9; do echo "unexplored 1 n$i"; done; echo "done 1" ;;
  up) echo "unexplored 1 side"; echo "done 1" ;;
  side) echo "unexplored 1 again"; echo "done 1" ;;
  *) for i in 0 1 2 3 4; do echo "out $BTS_NODE.$i"; done; echo "done 6 leaves=5 max_depth=2" ;;
esac
"#;
    std::fs::write(&script, program).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap();
    let args = ["run", "--workers", "2", "--budget", "1", "--fixed-budget", "--summary-json", "-", "--count-only"];
    let o = bts(&[&args[..], &["exec", "--", script]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = summary(&o);
    assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64(), s["jobs"].as_u64()), (Some(61), Some(50), Some(11)), "{s}");
    let o = bts(&[&args[..], &["exec", "--root", "up", "--retries", "0", "--", script]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("a node returned at depth 1, not below the job's depth"), "{}", stderr(&o));
}

/// `slow.sh` in `dir`: the root has one child, `a`, whose job touches `slow.sh.started` and then
/// takes `seconds`.
fn slow_program(dir: &Path, seconds: u32) -> PathBuf {
    let text = format!(
        "#!/bin/sh\ncase \"$BTS_NODE\" in\nroot) echo 'unexplored 1 a';;\na) touch \"$0.started\"; sleep {seconds};;\nesac\n\
         echo 'done 1'\n"
    );
    script(dir, "slow.sh", &text)
}

/// A remote worker whose master is gone gives up its running jobs (the master had put them back
/// in its list): it leaves after `--retry` seconds, not when a long job ends.
#[test]
fn a_worker_that_loses_its_master_gives_up_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let program = slow_program(dir.path(), 30);
    let address = dir.path().join("address");
    let mut master = bts_command()
        .args(["run", "--progress", "never", "--workers", "0", "--listen", "127.0.0.1:0", "--address-file"])
        .args([address.to_str().unwrap(), "exec", "--", program.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), || address.exists(), || "no address file".into());
    let mut worker = bts_command()
        .args(["worker", "--connect-file", address.to_str().unwrap(), "--threads", "1", "--retry", "1"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = dir.path().join("slow.sh.started");
    wait_until(Duration::from_secs(30), || started.exists(), || "the job did not start".into());
    signal(&master, "-KILL");
    master.wait().unwrap();
    let lost = std::time::Instant::now();
    let status = wait_bounded(&mut worker, Duration::from_secs(40));
    assert_eq!(status.code(), Some(1));
    assert!(lost.elapsed() < Duration::from_secs(15), "the worker waited for its job: {:?}", lost.elapsed());
}

/// One host whose set-up is wrong (here: a worker started where the program's data file is
/// missing) does not fail the run: its failed jobs are done elsewhere, and it gets no more.
#[test]
fn a_remote_worker_whose_jobs_fail_is_shunned_and_the_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
    std::fs::create_dir_all(&good).unwrap();
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(good.join("data"), "").unwrap();
    // The root, 20 children, 5 leaves each; every leaf a record. It needs ./data.
    let program = script(
        dir.path(),
        "tree.py",
        "#!/usr/bin/env python3\nimport os, sys, time\n\
         if not os.path.exists('data'): sys.exit('tree.py: ./data: no such file')\n\
         node = os.environ['BTS_NODE']\ntime.sleep(0.01)\n\
         if node == 'root':\n    for i in range(20): print(f'unexplored 1 c{i}')\n\
         elif '.' not in node:\n    for i in range(5): print(f'unexplored 2 {node}.{i}')\n\
         else:\n    print(f'out {node}')\nprint('done 1')\n",
    );
    let address = dir.path().join("address");
    let master = bts_command()
        .current_dir(&good)
        .args(["run", "--progress", "never", "--workers", "1", "--budget", "1", "--fixed-budget"])
        .args(["--listen", "127.0.0.1:0", "--address-file", address.to_str().unwrap(), "--summary-json", "-"])
        .args(["exec", "--", program.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), || address.exists(), || "no address file".into());
    let worker = bts_command()
        .current_dir(&bad)
        .args(["worker", "--connect-file", address.to_str().unwrap(), "--threads", "1", "--retry", "5"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = master.wait_with_output().unwrap();
    let log = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    let s = summary(&o);
    assert_eq!((s["nodes"].as_u64(), s["outputs"].as_u64()), (Some(121), Some(100)), "{s}");
    let records: Vec<String> =
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with('c')).map(String::from).collect();
    assert_eq!(sorted(&records.join("\n")).len(), 100);
    assert!(log.contains("it is tried on a worker elsewhere"), "{log}");
    assert!(
        log.contains("the remote worker where it failed gets no more jobs") && log.contains("./data: no such file"),
        "{log}"
    );
    let w = worker.wait_with_output().unwrap();
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    let told = "the master gives this worker no more jobs: the job at node \"c";
    assert_eq!(stderr(&w).matches(told).count(), 1, "{}", stderr(&w));
}

/// A stop that waits long for the jobs out with workers says so (here a job of 5 s).
#[test]
fn a_stop_that_waits_for_its_workers_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let program = slow_program(dir.path(), 5);
    let mut run = bts_command()
        .args(["run", "--progress", "never", "--workers", "1", "exec", "--", program.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = dir.path().join("slow.sh.started");
    wait_until(Duration::from_secs(30), || started.exists(), || "the job did not start".into());
    signal(&run, "-INT");
    wait_bounded(&mut run, Duration::from_secs(30));
    let log = stderr_of(&mut run);
    assert!(log.contains("the stop waits for the jobs out with 1 worker"), "{log}");
}
