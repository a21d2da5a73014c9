//! Remote workers end to end: real master and worker processes on loopback, killed, stopped and
//! attacked.

use crate::util::*;
use bts_protocol::codec::encode_frame;
use bts_protocol::{FromWorker, Preamble, ReportBatch, WorkerFrame};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A master process listening on loopback, with its stderr collected.
pub(crate) struct Master {
    child: Child,
    pub(crate) address: String,
    dir: tempfile::TempDir,
    log: std::thread::JoinHandle<String>,
}

impl Master {
    /// Starts `bts run --listen 127.0.0.1:0 --address-file ... ARGS` and waits for its address.
    pub(crate) fn start(args: &[&str]) -> Master {
        Self::start_with(Command::new(env!("CARGO_BIN_EXE_bts")), &["run"], args)
    }

    /// Starts `COMMAND HEAD --listen 127.0.0.1:0 --address-file ... ARGS`.
    pub(crate) fn start_with(mut command: Command, head: &[&str], args: &[&str]) -> Master {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("address");
        let summary = dir.path().join("summary.json");
        command.args(head).args(["--listen", "127.0.0.1:0", "--address-file", file.to_str().unwrap()]);
        command.args(["--summary-json", summary.to_str().unwrap()]).args(args);
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        // Drain the log as it comes, so that a chatty master never blocks on a full pipe.
        let mut stderr = child.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let address = loop {
            if let Ok(text) = std::fs::read_to_string(&file)
                && !text.trim().is_empty()
            {
                break text.trim().to_string();
            }
            assert!(Instant::now() < deadline, "the master never wrote its address");
            std::thread::sleep(Duration::from_millis(10));
        };
        Master { child, address, dir, log }
    }

    fn address_file(&self) -> PathBuf {
        self.dir.path().join("address")
    }

    /// Waits for the master to end: its exit code, summary and log.
    pub(crate) fn finish(mut self) -> (Option<i32>, Value, String) {
        let status = wait_bounded(&mut self.child, Duration::from_secs(120));
        let log = self.log.join().unwrap();
        let summary = std::fs::read_to_string(self.dir.path().join("summary.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(Value::Null);
        (status.code(), summary, log)
    }
}

pub(crate) fn worker(args: &[&str]) -> Child {
    bts_command().arg("worker").args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Waits (two minutes at most) for a worker to end: its exit code and log.
pub(crate) fn worker_output(mut child: Child) -> (Option<i32>, String) {
    let mut stderr = child.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = wait_bounded(&mut child, Duration::from_secs(120));
    (status.code(), log.join().unwrap())
}

fn token_file(dir: &Path, name: &str, token: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, token).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn remote_workers_alone_count_exactly_and_commit_each_record_once() {
    let out = tempfile::NamedTempFile::new().unwrap();
    let out_s = out.path().to_str().unwrap().to_string();
    let master = Master::start(&[
        "--workers",
        "0",
        "--budget",
        "20",
        "--fixed-budget",
        "--output",
        &out_s,
        "queens",
        "--n",
        "10",
    ]);
    let file = master.address_file();
    let w1 = worker(&["--connect-file", file.to_str().unwrap(), "--threads", "2"]);
    let w2 = worker(&["--connect", &master.address, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(summary["outputs"], 724);
    assert_eq!(summary["workers"], 3);
    for w in [w1, w2] {
        let (code, log) = worker_output(w);
        assert_eq!(code, Some(0), "{log}");
    }
    assert_records_once(out.path(), 724);
}

#[test]
fn a_killed_remote_worker_loses_nothing_and_workers_may_join_late() {
    let master = Master::start(&["--workers", "1", "uts", "--preset", "T1", "-g", "20"]);
    let file = master.address_file();
    let mut doomed = worker(&["--connect-file", file.to_str().unwrap(), "--threads", "2"]);
    std::thread::sleep(Duration::from_millis(700));
    signal(&doomed, "-KILL");
    doomed.wait().unwrap();
    let late = worker(&["--connect", &master.address, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&summary);
    assert!(log.contains("worker lost; its jobs go back to the job list"), "{log}");
    assert_eq!(summary["workers"], 4);
    assert_eq!(worker_output(late).0, Some(0));
}

#[test]
fn a_silent_remote_worker_is_dropped_and_its_jobs_done_again() {
    let master = Master::start(&["--workers", "1", "--worker-timeout", "1", "uts", "--preset", "T1", "-g", "20"]);
    let mut silent = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(700));
    signal(&silent, "-STOP");
    let (code, summary, log) = master.finish();
    signal(&silent, "-KILL");
    silent.wait().unwrap();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&summary);
    assert!(log.contains("silent for"), "{log}");
}

/// A master suspended for longer than --worker-timeout (SIGSTOP, a paused machine) does not drop
/// its workers as silent when it is continued: it was the one that stood still.
#[test]
fn a_suspended_master_keeps_its_workers() {
    for mode in ["budget", "polling"] {
        let run = ["--mode", mode, "--workers", "0", "--worker-timeout", "1", "uts", "--preset", "T1", "-g", "20"];
        let master = Master::start(&run);
        let w = worker(&["--connect", &master.address, "--threads", "2"]);
        std::thread::sleep(Duration::from_millis(600));
        signal(&master.child, "-STOP");
        std::thread::sleep(Duration::from_millis(2500));
        signal(&master.child, "-CONT");
        let (code, s, log) = master.finish();
        assert_eq!(code, Some(0), "{mode}: {log}");
        assert_t1(&s);
        assert!(!log.contains("silent for") && !log.contains("lost"), "{mode}: {log}");
        assert_eq!(s["workers"], 2, "{mode}: the worker joined once: {s}");
        assert_eq!(worker_output(w).0, Some(0), "{mode}");
    }
}

/// Kills the master of `run` (`wait` after a worker with `--retry` seconds to rejoin joined it):
/// the worker's exit code and log, and how long it took to end after the master.
fn master_killed_under_a_worker(run: &[&str], retry: &str, wait: Duration) -> (Option<i32>, String, Duration) {
    let mut master = Master::start(run);
    let w = worker(&["--connect", &master.address, "--threads", "1", "--retry", retry]);
    std::thread::sleep(wait);
    signal(&master.child, "-KILL");
    master.child.wait().unwrap();
    let started = Instant::now();
    let (code, log) = worker_output(w);
    (code, log, started.elapsed())
}

#[test]
fn workers_exit_with_a_clear_message_when_the_master_dies() {
    let run = ["--workers", "0", "uts", "--preset", "T1", "-g", "20"];
    let (code, log, took) = master_killed_under_a_worker(&run, "2", Duration::from_millis(500));
    assert_eq!(code, Some(1), "{log}");
    // It tried to join the run again for --retry seconds.
    assert!(log.contains("lost the master") && log.contains("cannot reach it again"), "{log}");
    assert!(took < Duration::from_secs(15));
}

/// A worker whose master dies gives up a long job of a built-in tree at once (here the whole
/// tree, some 80 s of search): the master had put it back in its list.
#[test]
fn a_worker_gives_up_its_long_job_when_the_master_dies() {
    let run = ["--workers", "0", "--fixed-budget", "--budget", "inf", "--count-only", "queens", "--n", "17"];
    let (code, log, took) = master_killed_under_a_worker(&run, "1", Duration::from_millis(1500));
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("lost the master"), "{log}");
    assert!(took < Duration::from_secs(15), "it finished its job first: {took:?}");
}

/// A worker that cannot reach its master says, after a while, what it waits for; `--retry 0`
/// tries once.
#[test]
fn a_worker_says_what_it_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    for (args, waiting, error) in [
        (
            vec!["--connect-file", empty.to_str().unwrap(), "--retry", "2.5"],
            true,
            "to hold an address (for 2.5 s at most)",
        ),
        (vec!["--connect-file", empty.to_str().unwrap(), "--retry", "2.5"], true, "held no address within 2.5 s"),
        (vec!["--connect-file", "/nonexistent/address", "--retry", "2.5"], true, "did not appear within 2.5 s"),
        (vec!["--connect", "127.0.0.1:1", "--retry", "2.5"], true, "cannot connect to the master at 127.0.0.1:1"),
        (vec!["--connect", "127.0.0.1:1", "--retry", "0"], false, "cannot connect to the master at 127.0.0.1:1"),
    ] {
        let started = Instant::now();
        let (code, log) = worker_output(worker(&args));
        assert_eq!(code, Some(1), "{args:?}: {log}");
        assert_eq!(log.contains("waiting for the master"), waiting, "{args:?}: {log}");
        assert!(log.contains(error), "{args:?}: {log}");
        assert!(started.elapsed() < Duration::from_secs(if waiting { 10 } else { 2 }), "{args:?}");
    }
}

/// README's launch of a run and its workers at once: the master makes the token file as it starts,
/// and a worker started before it waits for the token as it waits for the address file.
#[test]
fn a_worker_started_before_its_master_waits_for_the_token_too() {
    let dir = tempfile::tempdir().unwrap();
    let (token, address) = (dir.path().join("token"), dir.path().join("address"));
    let (token, address) = (token.to_str().unwrap(), address.to_str().unwrap());
    let w = worker(&["--connect-file", address, "--token-file", token, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    let mut master = bts_command()
        .args(["run", "--workers", "0", "--listen", "127.0.0.1:0", "--token-file", token, "--address-file", address])
        .args(["--summary-json", "-", "--progress", "never", "uts", "--preset", "T1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    wait_bounded(&mut master, Duration::from_secs(60));
    let mut out = String::new();
    master.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_t1(&serde_json::from_str(out.lines().last().unwrap()).unwrap());
}

/// A worker whose master lost it joins the run again: after a network cut or a suspended machine
/// (here SIGSTOP for longer than --worker-timeout: the master drops it, and it hears nothing), and
/// after the master itself died and was resumed on the same address file. The counts stay exact.
#[test]
fn a_worker_that_loses_its_master_joins_its_run_again() {
    let master = Master::start(&["--workers", "0", "--worker-timeout", "1", "uts", "--preset", "T1", "-g", "20"]);
    let w = worker(&["--connect-file", master.address_file().to_str().unwrap(), "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(500));
    signal(&w, "-STOP");
    std::thread::sleep(Duration::from_millis(2500));
    signal(&w, "-CONT");
    let (code, s, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&s);
    assert!(log.contains("worker lost"), "{log}");
    assert_eq!(s["workers"], 2, "the worker joined twice: {s}");
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("lost the master"), "{log}");
    // It was dropped, and may have been stopped without knowing it: said (unless its first word
    // after the stop met a reset connection instead of the master's close).
    let told = "or dropped this worker for a silence longer than its --worker-timeout";
    assert!(log.contains(told) || log.contains("the connection to the master failed"), "{log}");

    // The master killed, then resumed on the same address file, again and again (a supervisor
    // restarting a master that crashes): the same worker carries on each time, for its --retry
    // counts from the first of these losses, not the number of them.
    let dir = tempfile::tempdir().unwrap();
    let (ck, address) = (dir.path().join("t1.ckpt"), dir.path().join("address"));
    let (ck_s, address_s) = (ck.to_str().unwrap(), address.to_str().unwrap());
    let listen = ["--listen", "127.0.0.1:0", "--address-file", address_s, "--progress", "never"];
    let summary_file = dir.path().join("summary.json");
    let summary_s = summary_file.to_str().unwrap();
    let mut master = bts_command()
        .args(["run", "--workers", "0", "--checkpoint", ck_s, "--checkpoint-every", "0.1"])
        .args(listen)
        .args(["uts", "--preset", "T1", "-g", "40"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while !address.exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let w = worker(&["--connect-file", address_s, "--threads", "1"]);
    let mut nodes = 0;
    for kill in 0..4 {
        // The worker has joined this master and done some work for it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while inspect(&ck)["counters"]["nodes"].as_u64().unwrap_or(0) <= nodes {
            assert!(Instant::now() < deadline, "no progress within 30 s after kill {kill}");
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(&master, "-KILL");
        master.wait().unwrap();
        nodes = inspect(&ck)["counters"]["nodes"].as_u64().unwrap();
        std::fs::remove_file(&address).unwrap();
        let resume = ["resume", ck_s, "--workers", "0", "--summary-json", summary_s];
        master = bts_command().args(resume).args(listen).stderr(Stdio::null()).spawn().unwrap();
    }
    assert_eq!(wait_bounded(&mut master, Duration::from_secs(60)).code(), Some(0));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary_file).unwrap()).unwrap();
    assert_t1(&s);
    assert_eq!(s["segments"], 5);
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.matches("lost the master").count() >= 4, "{log}");
}

#[test]
fn wrong_tokens_are_refused_with_exit_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let right = token_file(dir.path(), "right", "correct horse battery staple\n");
    let wrong = token_file(dir.path(), "wrong", "Tr0ub4dor&3");
    let master = Master::start(&["--workers", "1", "--token-file", &right, "uts", "--preset", "T1", "-g", "10"]);
    let (code, log) = worker_output(worker(&["--connect", &master.address, "--token-file", &wrong]));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("wrong token"), "{log}");
    let (code, log) = worker_output(worker(&["--connect", &master.address]));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("the master requires a token, and this worker has none"), "{log}");
    // The right token works (white space around it does not matter).
    let ok = worker(&["--connect", &master.address, "--token-file", &right, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&summary);
    assert!(log.contains("token"), "{log}");
    assert_eq!(worker_output(ok).0, Some(0));
    // A master without a token (on loopback) is told from one with another.
    let mut open = Master::start(&["--workers", "0", "queens", "--n", "4"]);
    let (code, log) = worker_output(worker(&["--connect", &open.address, "--token-file", &right]));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("the master has no token, and this worker has one"), "{log}");
    signal(&open.child, "-KILL");
    open.child.wait().unwrap();
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let o = bts(&["run", "--listen", "0.0.0.0:0", "queens", "--n", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("without a token"), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), "t", "s3cret");
    let o = bts(&["run", "--listen", "0.0.0.0:0", "--token-file", &token, "queens", "--n", "4"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = bts(&["run", "--workers", "0", "queens", "--n", "4"]);
    assert_eq!(o.status.code(), Some(2));
    let o = bts(&["worker"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Opens a connection and sends `bytes`.
fn send_raw(address: &str, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(address).unwrap();
    let _ = s.write_all(bytes);
    s
}

/// A connection that has completed the handshake (the master has no token).
fn handshake(address: &str) -> TcpStream {
    use bts_protocol::MasterFrame;
    use bts_protocol::auth;
    use bts_protocol::codec::FrameDecoder;
    let mut s = TcpStream::connect(address).unwrap();
    let nonce = auth::nonce();
    s.write_all(&Preamble::CURRENT.to_bytes()).unwrap();
    s.write_all(&frame(&WorkerFrame::Hello { threads: 1, nonce, peer_address: None })).unwrap();
    let mut preamble = [0u8; 12];
    s.read_exact(&mut preamble).unwrap();
    let mut decoder = FrameDecoder::new();
    let mut next = |s: &mut TcpStream| loop {
        if let Some(f) = decoder.decode::<MasterFrame>().unwrap() {
            return f;
        }
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        decoder.feed(&buf[..n]);
    };
    let MasterFrame::Challenge { nonce: theirs, .. } = next(&mut s) else { panic!("no challenge") };
    s.write_all(&frame(&WorkerFrame::Auth { tag: auth::worker_tag(b"", &theirs, &nonce) })).unwrap();
    assert!(matches!(next(&mut s), MasterFrame::Welcome(_)));
    s
}

fn frame(f: &WorkerFrame) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(f, &mut out).unwrap();
    out
}

#[test]
fn bad_peers_are_dropped_with_a_log_line_and_the_run_goes_on() {
    let master = Master::start(&["--workers", "1", "--worker-timeout", "3", "uts", "--preset", "T1", "-g", "30"]);
    let addr = master.address.clone();
    let preamble = Preamble::CURRENT.to_bytes();
    let mut keep = Vec::new();
    // Random bytes and an HTTP request.
    let noise: Vec<u8> = (0..2000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    keep.push(send_raw(&addr, &noise));
    // Twenty HTTP requests: strangers of one kind with the noise (what they sent aside), counted
    // rather than logged within a second.
    for _ in 0..20 {
        keep.push(send_raw(&addr, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    }
    // A valid preamble, then a length prefix of 4 GiB, and one of 64 KiB: more than a handshake needs.
    keep.push(send_raw(&addr, &[&preamble[..], &u32::MAX.to_le_bytes()].concat()));
    keep.push(send_raw(&addr, &[&preamble[..], &(64u32 << 10).to_le_bytes()].concat()));
    // A handshake that never finishes.
    keep.push(send_raw(&addr, &preamble));
    // Another protocol version: the master answers with its own preamble and hangs up.
    let mut other = Preamble { version: 99 }.to_bytes().to_vec();
    other.extend(frame(&WorkerFrame::Hello { threads: 1, nonce: [0; 32], peer_address: None }));
    let mut old = send_raw(&addr, &other);
    let mut answer = [0u8; 12];
    old.read_exact(&mut answer).unwrap();
    assert_eq!(Preamble::parse(&answer), Some(Preamble::CURRENT));
    // A message before the handshake.
    let early = WorkerFrame::Message { thread: 0, message: FromWorker::Reports(ReportBatch::default()) };
    keep.push(send_raw(&addr, &[&preamble[..], &frame(&early)].concat()));
    // A worker that completes the handshake, then reports a job it never had.
    let mut liar = handshake(&addr);
    let report = bts_protocol::JobReport {
        id: bts_protocol::JobId(999_999),
        visited: 1,
        leaves: Some(1),
        max_depth: Some(0),
        outputs: 0,
        returned: 0,
        output_bytes: 0,
        elapsed_ns: 1,
        counters: Vec::new(),
        pruned: 0,
    };
    let lie = WorkerFrame::Message {
        thread: 0,
        message: FromWorker::Reports(ReportBatch { reports: vec![report], ..ReportBatch::default() }),
    };
    liar.write_all(&frame(&lie)).unwrap();
    keep.push(liar);
    // Far too many connections, idle: they hold no slot a worker needs.
    let flood: Vec<TcpStream> = (0..600).filter_map(|_| TcpStream::connect(&addr).ok()).collect();
    assert!(flood.len() > 512);
    // The run goes on: a real worker joins while they are open, and the totals are exact.
    let good = worker(&["--connect", &addr, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    drop(flood);
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&summary);
    assert_eq!(worker_output(good).0, Some(0));
    for line in [
        "not a bts worker",
        // Two of a kind (the second counted in the next line, if any).
        "bytes is larger than the limit of 4096",
        "the handshake took too long",
        "protocol version 99",
        "out of order: Message before the handshake",
        "connections in their handshake: the oldest dropped to make room",
        "broke the protocol: report for job 999999",
    ] {
        assert!(log.contains(line), "no log line with '{line}' in:\n{log}");
    }
    let strangers = log.lines().filter(|l| l.contains("not a bts worker")).count();
    assert!(strangers < 5, "{strangers} log lines for twenty-one strangers:\n{log}");
    drop(keep);
}

/// A connection stuck in its handshake (a port scanner, a health check) does not hold the end of
/// the run up: the run's time stays its own and `--time-limit` holds.
#[test]
fn a_connection_stalled_in_its_handshake_does_not_hold_the_end_up() {
    let master = Master::start(&["--workers", "1", "--time-limit", "1", "--count-only", "uts", "--preset", "T1XL"]);
    let preamble = Preamble::CURRENT.to_bytes();
    let stalled = send_raw(&master.address, &preamble);
    let started = Instant::now();
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(3), "{log}");
    // The handshake's timeout and the end's grace are 5 s each.
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}\n{log}", started.elapsed());
    assert!(summary["elapsed_s"].as_f64().unwrap() < 2.5, "{summary}");
    drop(stalled);
}

/// Two runs given one address file would take each other's workers, and the first to end would
/// remove the other's address: the second is refused while the first runs.
#[test]
fn a_second_run_on_the_same_address_file_is_refused() {
    let master = Master::start(&["--workers", "1", "--time-limit", "2", "--count-only", "uts", "--preset", "T1XL"]);
    let file = master.address_file();
    let o = bts(&["run", "--listen", "127.0.0.1:0", "--address-file", file.to_str().unwrap(), "queens", "--n", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is in use by another bts"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), master.address);
    let (code, _, log) = master.finish();
    assert_eq!(code, Some(3), "{log}");
}

/// Polling workers that join while a checkpoint's pause is under way (the first one starts before
/// any worker is there) pause too, and take the run's start when it resumes: the pauses complete,
/// checkpoints are written, and the run ends, exactly.
#[test]
fn polling_workers_joining_during_a_pause_take_part_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, out) = (dir.path().join("run.ckpt"), dir.path().join("out.txt"));
    let (ck_s, out_s) = (ck.to_str().unwrap(), out.to_str().unwrap());
    let mut args = vec!["--mode", "polling", "--workers", "0", "--checkpoint", ck_s, "--checkpoint-every", "0.01"];
    args.extend(["--output", out_s, "queens", "--n", "12"]);
    let master = Master::start(&args);
    std::thread::sleep(Duration::from_millis(100));
    let workers: Vec<Child> = (0..2).map(|_| worker(&["--connect", &master.address, "--threads", "1"])).collect();
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(summary["outputs"], 14_200, "{summary}");
    assert_records_once(&out, 14_200);
    assert_eq!(inspect(&ck)["counters"]["outputs"], 14_200);
    for w in workers {
        assert_eq!(worker_output(w).0, Some(0));
    }
}

/// A process of a cluster launch: `bts ARGS` with what a launcher puts in the environment (its rank,
/// and the launch's name), its log kept for [`worker_output`].
fn spawn_rank(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut command = bts_command();
    command.args(args).envs(env.iter().copied());
    command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

/// A second launch given a running launch's rendezvous file is refused, and leaves the file to
/// the running launch: its workers still find their master. Also when it is refused for the
/// checkpoint first (the same job submitted twice): it once wrote its failure over the file.
#[test]
fn a_second_launch_on_a_running_launchs_rendezvous_file_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = dir.path().join("rendezvous");
    let r = rendezvous.to_str().unwrap();
    let ck = dir.path().join("run.ckpt");
    let ck = ck.to_str().unwrap();
    let stop = dir.path().join("stop");
    let first = ["run", "--rendezvous", r, "--checkpoint", ck, "--progress", "never", "--stop-file"];
    let first: Vec<&str> = first.into_iter().chain([stop.to_str().unwrap(), "--time-limit", "60"]).collect();
    let first: Vec<&str> = first.into_iter().chain(["uts", "--preset", "T1XL"]).collect();
    let master = spawn_rank(&first, &[("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "first")]);
    let announced = || std::fs::read_to_string(&rendezvous).is_ok_and(|t| t.contains(':'));
    wait_until(Duration::from_secs(20), announced, || "the master did not announce itself".into());
    let announced = std::fs::read_to_string(&rendezvous).unwrap();
    let again: Vec<&str> = first.iter().copied().map(|a| if a == "T1XL" { "T1" } else { a }).collect();
    for second in [&["run", "--rendezvous", r, "queens", "--n", "4"][..], &again] {
        let second = spawn_rank(second, &[("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "second")]);
        let (code, log) = worker_output(second);
        assert_eq!(code, Some(2), "{log}");
        assert!(log.contains("is in use by another bts"), "{log}");
        assert_eq!(std::fs::read_to_string(&rendezvous).unwrap(), announced);
    }
    std::fs::write(&stop, "").unwrap();
    let (code, log) = worker_output(master);
    assert_eq!(code, Some(3), "{log}");
}

#[test]
fn cluster_ranks_meet_through_the_rendezvous_file() {
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = dir.path().join("rendezvous");
    let summary = dir.path().join("summary.json");
    let args = ["run", "--rendezvous", rendezvous.to_str().unwrap(), "--summary-json", summary.to_str().unwrap()];
    let args: Vec<&str> = args.into_iter().chain(["-vv", "uts", "--preset", "T1", "-g", "3"]).collect();
    let ranks: Vec<Child> = (0..3).map(|r| spawn_rank(&args, &[("OMPI_COMM_WORLD_RANK", &r.to_string())])).collect();
    let logs: Vec<String> = ranks
        .into_iter()
        .map(worker_output)
        .map(|(code, log)| {
            assert_eq!(code, Some(0), "{log}");
            log
        })
        .collect();
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_t1(&s);
    assert_eq!(s["workers"], 3);
    // The file says the run is over: a rank that starts now leaves at once. It says so once the
    // summary is written: a launcher that kills rank 0 as soon as a worker rank exits (mpirun
    // after Ctrl-C) once lost it so.
    assert!(std::fs::read_to_string(&rendezvous).unwrap().starts_with("finished\n"));
    let (said, marked) = (logs[0].find("bts: complete:").unwrap(), logs[0].find("marked the rendezvous file").unwrap());
    assert!(said < marked, "marked finished before the summary: {}", logs[0]);
    let late = bts_command().args(&args).env("PMI_RANK", "5").output().unwrap();
    assert_eq!(late.status.code(), Some(0), "{}", String::from_utf8_lossy(&late.stderr));
}

/// A launch whose run breaks off (a lost rank's records, printed on stdout, cannot be taken back)
/// marks its rendezvous file `finished` once it has said so and written its summary, as a launch
/// whose run ends does.
#[test]
fn a_launch_that_breaks_off_marks_its_rendezvous_file_after_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let (rendezvous, summary) = (dir.path().join("rendezvous"), dir.path().join("summary.json"));
    let args = ["run", "--rendezvous", rendezvous.to_str().unwrap(), "--summary-json", summary.to_str().unwrap()];
    let args: Vec<&str> = args.into_iter().chain(["-vv", "--mode", "polling", "queens", "--n", "15"]).collect();
    let master = spawn_rank(&args, &[("OMPI_COMM_WORLD_RANK", "0")]);
    let mut doomed = spawn_rank(&args, &[("OMPI_COMM_WORLD_RANK", "1")]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&doomed, "-KILL");
    doomed.wait().unwrap();
    let (code, log) = worker_output(master);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("cannot be taken back"), "{log}");
    assert_eq!(
        serde_json::from_str::<Value>(&std::fs::read_to_string(&summary).unwrap()).unwrap()["outcome"],
        "failed"
    );
    assert!(std::fs::read_to_string(&rendezvous).unwrap().starts_with("finished\n"));
    let (said, marked) = (log.find("bts: error:").unwrap(), log.find("marked the rendezvous file").unwrap());
    assert!(said < marked, "marked finished before the error was said: {log}");
}

/// Rank 0 that cannot start the run (here a missing input file) says so in the rendezvous file:
/// the other ranks of its launch stop at once with its reason, instead of waiting minutes for it
/// (a launcher such as srun lets them run on); the ranks of the next launch are not misled.
#[test]
fn ranks_stop_at_once_when_rank_0_cannot_start_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = dir.path().join("rendezvous");
    let rank = |r: u32, launch: &str, tree: &[&str]| {
        let args = [&["run", "--rendezvous", rendezvous.to_str().unwrap()][..], tree].concat();
        spawn_rank(&args, &[("PMIX_RANK", &r.to_string()), ("PMIX_NAMESPACE", launch)])
    };
    let missing = dir.path().join("missing.txt");
    let bad = ["knapsack", "--file", missing.to_str().unwrap()];
    let worker = rank(1, "1111", &bad);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let (code, log) = worker_output(rank(0, "1111", &bad));
    assert_eq!(code, Some(2), "{log}");
    let (code, log) = worker_output(worker);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("rank 0 (the master) could not start the run: knapsack: cannot read"), "{log}");
    assert!(started.elapsed() < Duration::from_secs(20), "the worker rank waited {:?}", started.elapsed());
    // The next launch's worker rank waits past that launch's failure for its own master.
    let good = ["uts", "--preset", "T1", "-g", "3"];
    let worker = rank(1, "2222", &good);
    std::thread::sleep(Duration::from_millis(500));
    let (code, log) = worker_output(rank(0, "2222", &good));
    assert_eq!(code, Some(0), "{log}");
    let (code, log) = worker_output(worker);
    assert_eq!(code, Some(0), "{log}");
}

/// Random polling in a cluster launch: the worker ranks take the master's token from the
/// rendezvous file, and prove it to each other too (they once used their own, none, and every
/// steal between processes failed: the run went on in one process).
#[test]
fn polling_ranks_of_a_cluster_launch_steal_from_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = dir.path().join("rendezvous");
    let summary = dir.path().join("summary.json");
    let args = ["run", "--mode", "polling", "--workers", "1", "--rendezvous", rendezvous.to_str().unwrap()];
    let args: Vec<&str> = args
        .into_iter()
        .chain(["--summary-json", summary.to_str().unwrap(), "uts", "--preset", "T1", "-g", "20"])
        .collect();
    let ranks: Vec<Child> = (0..3).map(|r| spawn_rank(&args, &[("OMPI_COMM_WORLD_RANK", &r.to_string())])).collect();
    for r in ranks {
        let (code, log) = worker_output(r);
        assert_eq!(code, Some(0), "{log}");
        assert!(!log.contains("peer connection dropped"), "{log}");
    }
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_t1(&s);
    assert_eq!((s["mode"].as_str(), s["workers"].as_u64()), (Some("polling"), Some(3)));
    // One worker a process: every steal crossed processes.
    assert!(s["jobs"].as_u64() > Some(0), "no work moved between the ranks: {s}");
}

#[test]
fn a_rank_does_not_take_the_end_of_the_launch_before_for_its_own() {
    // A fast run of the launch just before left its rendezvous file saying `finished` a moment ago
    // (or a run outside any launcher did, naming no launch, or its master still runs); a worker
    // rank of the next launch that reads it before its master replaces it must not leave, nor
    // join that master.
    let dir = tempfile::tempdir().unwrap();
    let (other_file, stop) = (dir.path().join("other.addr"), dir.path().join("stop"));
    let (f, s) = (other_file.to_str().unwrap(), stop.to_str().unwrap());
    let other = ["run", "--workers", "1", "--listen", "127.0.0.1:0", "--address-file", f, "--stop-file", s, "uts"];
    let other = spawn_rank(&[&other[..], &["--preset", "T1XL"]].concat(), &[]);
    wait_until(Duration::from_secs(20), || other_file.exists(), || "the other run did not start".into());
    let unnamed = std::fs::read_to_string(&other_file).unwrap();
    for leftover in ["finished\nlaunch 1111\n", "finished\n", &unnamed] {
        let dir = tempfile::tempdir().unwrap();
        let rendezvous = dir.path().join("rendezvous");
        let summary = dir.path().join("summary.json");
        std::fs::write(&rendezvous, leftover).unwrap();
        let args = ["run", "--rendezvous", rendezvous.to_str().unwrap(), "--summary-json", summary.to_str().unwrap()];
        let args: Vec<&str> = args.into_iter().chain(["uts", "--preset", "T1", "-g", "3"]).collect();
        let rank = |r: u32| spawn_rank(&args, &[("PMIX_RANK", &r.to_string()), ("PMIX_NAMESPACE", "2222")]);
        let worker = rank(1);
        std::thread::sleep(Duration::from_millis(500));
        let (code, log) = worker_output(rank(0));
        assert_eq!(code, Some(0), "{leftover:?}: {log}");
        let (code, log) = worker_output(worker);
        assert_eq!(code, Some(0), "{leftover:?}: {log}");
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_t1(&s);
        assert_eq!(s["workers"], 2, "{leftover:?}: the worker rank did not join");
        assert_eq!(std::fs::read_to_string(&rendezvous).unwrap(), "finished\nlaunch 2222\n");
    }
    std::fs::write(&stop, "").unwrap();
    let (_, log) = worker_output(other);
    assert!(log.contains(", 1 worker,"), "a rank joined the other run: {log}");
}

/// A rendezvous file that no bts wrote (a typo naming another file) is refused by every rank at
/// once, and left as it is.
#[test]
fn every_rank_refuses_a_file_that_is_not_a_rendezvous_file() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    let args = ["run", "--rendezvous", notes.to_str().unwrap(), "queens", "--n", "6"];
    for text in [&b"my notes\nline two\n"[..], b"my notes\n", b"\x00\xff checkpoint bytes"] {
        std::fs::write(&notes, text).unwrap();
        for rank in ["1", "0"] {
            let started = Instant::now();
            let (code, log) = worker_output(spawn_rank(&args, &[("PMIX_RANK", rank), ("PMIX_NAMESPACE", "4444")]));
            assert_eq!(code, Some(2), "rank {rank}: {log}");
            assert!(log.contains("not a rendezvous file") || log.contains("other than a rendezvous file"), "{log}");
            assert!(started.elapsed() < Duration::from_secs(10), "rank {rank} waited {:?}", started.elapsed());
        }
        assert_eq!(std::fs::read(&notes).unwrap(), text);
    }
}

/// A worker rank given a rendezvous file in a folder that does not exist stops at once: rank 0
/// cannot write there either, not even to say that it failed.
#[test]
fn a_rank_stops_at_once_when_the_rendezvous_folder_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = dir.path().join("nowhere").join("rendezvous");
    let args = ["run", "--rendezvous", rendezvous.to_str().unwrap(), "queens", "--n", "4"];
    let started = Instant::now();
    let (code, log) = worker_output(spawn_rank(&args, &[("PMIX_RANK", "1"), ("PMIX_NAMESPACE", "3333")]));
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("no folder") && log.contains("nowhere"), "{log}");
    assert!(started.elapsed() < Duration::from_secs(10), "it waited {:?}", started.elapsed());
}

/// Whether `mpirun` is here; if not, the caller skips, unless CI requires it.
fn have_mpirun() -> bool {
    let have = Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have {
        assert!(std::env::var_os("BTS_REQUIRE_MPIRUN").is_none(), "mpirun is required but missing");
        eprintln!("skipped: mpirun is not installed (Debian package openmpi-bin)");
    }
    have
}

/// `mpirun -np 3 bts ARGS`, as root too.
fn mpirun(args: &[&str]) -> Command {
    let mut command = Command::new("mpirun");
    command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    command.args(["--oversubscribe", "-np", "3", env!("CARGO_BIN_EXE_bts")]).args(args);
    command
}

#[test]
fn mpirun_starts_a_whole_run_in_one_command() {
    if !have_mpirun() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = dir.path().join("rendezvous");
    let summary = dir.path().join("summary.json");
    let out = mpirun(&["run", "--rendezvous", rendezvous.to_str().unwrap(), "--summary-json"])
        .args([summary.to_str().unwrap(), "uts", "--preset", "T1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_t1(&s);
    assert_eq!(s["workers"], 3);
}

/// Ctrl-C on `mpirun`: OpenMPI passes it on as SIGTERM to every rank a second later, and kills
/// them all a second after that, or as soon as one exits. The master saves the run at once, and
/// the worker ranks, once they have handed their work back, wait for it to end: the launch stops
/// with its checkpoint, which a launch of `bts resume` carries on to the exact count.
#[test]
fn ctrl_c_on_mpirun_stops_the_launch_with_its_checkpoint() {
    ctrl_c_on_mpirun("budget");
}

#[test]
fn ctrl_c_on_mpirun_stops_a_polling_launch_with_its_checkpoint() {
    ctrl_c_on_mpirun("polling");
}

fn ctrl_c_on_mpirun(mode: &str) {
    if !have_mpirun() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (rendezvous, summary_file, ck) =
        (dir.path().join("rendezvous"), dir.path().join("summary.json"), dir.path().join("run.ckpt"));
    let (rendezvous_s, summary_s, ck_s) =
        (rendezvous.to_str().unwrap(), summary_file.to_str().unwrap(), ck.to_str().unwrap());
    let launch = mpirun(&["run", "--mode", mode, "--progress", "never", "--rendezvous", rendezvous_s])
        .args(["--summary-json", summary_s, "--checkpoint", ck_s, "uts", "--preset", "T1", "-g", "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&rendezvous).map_or(true, |t| !t.contains(':')) {
        assert!(Instant::now() < deadline, "the master did not announce itself within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    Command::new("kill").args(["-INT", &launch.id().to_string()]).status().unwrap();
    let (code, log) = worker_output(launch);
    assert_ne!(code, Some(0), "the launch stopped early: {log}");
    // The master saved the run as the stop began, then ended it: its summary and its last
    // checkpoint. OpenMPI kills the ranks a second after passing Ctrl-C on, which on a machine busy
    // with other tests may come first; the first save is then the checkpoint, as the README says.
    let saved = inspect(&ck);
    assert!(saved["counters"]["nodes"].as_u64().unwrap() > 0, "{log}");
    match std::fs::read_to_string(&summary_file) {
        Ok(text) => {
            let s: Value = serde_json::from_str(&text).unwrap();
            assert_eq!((s["outcome"].as_str(), s["mode"].as_str()), (Some("signal"), Some(mode)), "{log}");
            assert_eq!(saved["counters"]["nodes"], s["nodes"], "{log}");
            assert!(log.contains(&format!("each rank running: bts resume {}", ck.display())), "{log}");
        }
        Err(_) => assert!(log.contains("SIGTERM: stopping"), "the master was not told to stop: {log}"),
    }
    // The launch resumes as one: the worker ranks leave the checkpoint to rank 0.
    let o = mpirun(&["resume", ck_s, "--rendezvous", rendezvous_s, "--summary-json", summary_s]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary_file).unwrap()).unwrap();
    assert_t1(&s);
    assert_eq!((s["segments"].as_u64(), s["workers"].as_u64()), (Some(2), Some(3)), "{s}");
}

/// The examples' binary, built by `cargo test` next to this test binary.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join(name)
}

#[test]
fn a_users_own_binary_serves_and_works_for_remote_runs() {
    let bin = example("linear_extensions");
    assert!(bin.exists(), "{} is not built", bin.display());
    let master = Master::start_with(
        Command::new(&bin),
        &["run"],
        &["--workers", "0", "--count-only", "linext", "--grid", "3x4"],
    );
    // The plain bts binary does not know the tree.
    let (code, log) = {
        let o = bts(&["worker", "--connect", &master.address, "--retry", "5"]);
        (o.status.code(), stderr(&o))
    };
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("unknown tree 'linext'"), "{log}");
    let w = Command::new(&bin)
        .args(["worker", "--connect", &master.address, "--threads", "2"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    // Standard Young tableaux of shape 4x3: 12! / product of hook lengths = 462.
    assert_eq!(summary["outputs"], 462);
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
}

// Random polling with workers in several processes.

#[test]
fn polling_workers_of_several_processes_count_exactly_and_steal_from_each_other() {
    let master = Master::start(&["--mode", "polling", "--workers", "0", "uts", "--preset", "T1", "-g", "20"]);
    // The first process starts the run; the second has nothing until it steals from the first.
    let w1 = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    let w2 = worker(&["--connect", &master.address, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&summary);
    assert_eq!(summary["mode"], "polling");
    assert_eq!(summary["workers"], 2);
    assert!(summary["jobs"].as_u64() > Some(0), "no work moved between the processes: {summary}");
    for w in [w1, w2] {
        let (code, log) = worker_output(w);
        assert_eq!(code, Some(0), "{log}");
    }
}

/// The threads of a running process.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// Connections are tasks on one I/O thread: neither the master's threads nor a worker's grow with
/// the number of connections.
#[test]
fn threads_do_not_grow_with_the_number_of_connections() {
    let master = Master::start(&["--workers", "0", "uts", "--preset", "T1L", "--node-limit", "60000000"]);
    let pid = master.child.id();
    let first = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(1500));
    let with_one = threads(pid);
    let more: Vec<Child> = (0..12).map(|_| worker(&["--connect", &master.address, "--threads", "1"])).collect();
    std::thread::sleep(Duration::from_millis(1000));
    let with_13 = threads(pid);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(3), "{log}");
    assert_eq!((summary["nodes"].as_u64(), summary["workers"].as_u64()), (Some(60_000_000), Some(13)), "{summary}");
    assert_eq!(with_13, with_one, "the master's threads grew from {with_one} to {with_13} with 12 more workers");
    for w in std::iter::once(first).chain(more) {
        let (code, log) = worker_output(w);
        assert_eq!(code, Some(0), "{log}");
    }

    // Random polling: every process reaches every other, still on one I/O thread each.
    let master = Master::start(&["--mode", "polling", "--workers", "0", "uts", "--preset", "T1", "-g", "40"]);
    let workers: Vec<Child> = (0..8).map(|_| worker(&["--connect", &master.address, "--threads", "1"])).collect();
    std::thread::sleep(Duration::from_millis(2500));
    let counts: Vec<usize> = workers.iter().map(|w| threads(w.id())).collect();
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&summary);
    // The main thread, the I/O thread and the searching thread.
    assert!(counts.iter().all(|&n| n <= 3), "threads of the worker processes: {counts:?}");
    for w in workers {
        let (code, log) = worker_output(w);
        assert_eq!(code, Some(0), "{log}");
    }
}

#[test]
fn a_lost_polling_process_is_rolled_back_and_each_record_committed_once() {
    let dir = tempfile::tempdir().unwrap();
    let (out, ck) = (dir.path().join("q.txt"), dir.path().join("q.ckpt"));
    let (out_s, ck_s) = (out.to_str().unwrap(), ck.to_str().unwrap());
    let master = Master::start(&[
        "--mode",
        "polling",
        "--workers",
        "1",
        "--checkpoint",
        ck_s,
        "--checkpoint-every",
        "0.2",
        "--output",
        out_s,
        "queens",
        "--n",
        "14",
    ]);
    let mut doomed = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(600));
    signal(&doomed, "-KILL");
    doomed.wait().unwrap();
    let late = worker(&["--connect", &master.address, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("a process was lost: back to the last snapshot, at "), "{log}");
    assert!(log.contains(" visited since are visited again)"), "{log}");
    // 14-queens has 365,596 solutions (OEIS A000170).
    assert_eq!(summary["outputs"], 365_596);
    assert_records_once(&out, 365_596);
    // The checkpoint's seal followed the rollback: it is the checksum of the file as it ends.
    let (checkpoint, records) = (bts_checkpoints::load(&ck).unwrap(), std::fs::read(&out).unwrap());
    assert_eq!(checkpoint.output_len, records.len() as u64);
    assert_eq!(checkpoint.seal, Some(bts_checkpoints::OutputSeal { crc: crc32fast::hash(&records), ended: true }));
    let _ = worker_output(late);
}

/// A listening polling run that no process has joined pauses for no snapshot: nothing can be lost.
#[test]
fn no_snapshot_is_taken_before_a_process_joins() {
    let run = ["--mode", "polling", "--workers", "2", "--count-only", "-vv", "--snapshot-every", "0.05"];
    let master = Master::start(&[&run[..], &["queens", "--n", "14"]].concat());
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(summary["outputs"], 365_596, "{log}");
    assert!(!log.contains("a snapshot at "), "{log}");
}

/// Without a checkpoint, a lost process takes a polling run back to its last snapshot held in
/// memory (every 0.2 s here), not to its start; the output file is cut back to it.
#[test]
fn a_lost_polling_process_goes_back_to_the_last_snapshot_without_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.txt");
    let run =
        ["--mode", "polling", "--workers", "1", "--output", out.to_str().unwrap(), "-vv", "--snapshot-every", "0.2"];
    let master = Master::start(&[&run[..], &["queens", "--n", "15"]].concat());
    let mut doomed = worker(&["--connect", &master.address, "--threads", "1"]);
    let stays = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(1200));
    signal(&doomed, "-KILL");
    doomed.wait().unwrap();
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(worker_output(stays).0, Some(0));
    // 15-queens has 2,279,184 solutions (OEIS A000170).
    assert_eq!(summary["outputs"], 2_279_184, "{log}");
    let number_after = |text: &str, marker: &str| -> u64 {
        let rest = &text[text.find(marker).unwrap() + marker.len()..];
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    let loss = log.find("a process was lost: back to the last snapshot, at ").expect(&log);
    let back_to = number_after(&log[loss..], "back to the last snapshot, at ");
    let last = log[..loss].lines().rfind(|l| l.contains("a snapshot at ")).map(|l| number_after(l, "a snapshot at "));
    assert_eq!(last, Some(back_to), "{log}");
    assert!(back_to > 0, "{log}");
    assert!(log[loss..].contains("a snapshot at "), "no snapshot after the rollback: {log}");
    assert_records_once(&out, 2_279_184);
}

#[test]
fn a_lost_polling_process_stops_a_run_writing_to_stdout_with_a_clear_message() {
    let master = Master::start(&["--mode", "polling", "--workers", "1", "queens", "--n", "15"]);
    let mut doomed = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(600));
    signal(&doomed, "-KILL");
    doomed.wait().unwrap();
    let (code, _, log) = master.finish();
    assert!(log.contains("if a remote worker is lost, random polling must take back"), "{log}");
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("so the run stops (resumed from a checkpoint, if it has one, it prints again the records written since that checkpoint; run with --output FILE or --count-only to survive lost workers)"), "{log}");
}

/// A polling run that fails on its own side (here its output file removed under it) tells its
/// remote workers the run is over: they end at once rather than try to join it again.
#[test]
fn a_polling_run_that_fails_ends_its_remote_workers() {
    let dir = tempfile::tempdir().unwrap();
    let (out, ck) = (dir.path().join("out.txt"), dir.path().join("run.ckpt"));
    let files = ["--output", out.to_str().unwrap(), "--checkpoint", ck.to_str().unwrap(), "--checkpoint-every", "0.1"];
    let mut args = vec!["--mode", "polling", "--workers", "0"];
    args.extend(files);
    args.extend(["queens", "--n", "15"]);
    let master = Master::start(&args);
    let w = worker(&["--connect", &master.address, "--threads", "1", "--retry", "60"]);
    wait_until(Duration::from_secs(30), || std::fs::metadata(&out).is_ok_and(|m| m.len() > 0), || "no records".into());
    std::fs::remove_file(&out).unwrap();
    let (code, _, log) = master.finish();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("was removed, moved or replaced"), "{log}");
    let started = Instant::now();
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    assert!(started.elapsed() < Duration::from_secs(20), "the worker waited {:?}: {log}", started.elapsed());
}

/// A run of remote workers only stops at its time limit with a checkpoint, and a resumed run,
/// again of remote workers only, completes it exactly.
fn remote_workers_stop_with_a_checkpoint_and_resume(mode: &str, budget: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("run.ckpt");
    let ck_s = ck.to_str().unwrap();
    let args = ["--mode", mode, "--workers", "0", "--checkpoint", ck_s, "--time-limit", "1"];
    let master = Master::start(&[&args[..], budget, &["uts", "--preset", "T1", "-g", "20"]].concat());
    let w = worker(&["--connect", &master.address, "--threads", "2"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(3), "{log}");
    assert_eq!(summary["outcome"], "time-limit");
    assert!(summary["nodes"].as_u64() < Some(4_130_071), "{summary}");
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    // Resumed listening, it keeps to remote workers without being told again.
    let resumed = Master::start_with(bts_command(), &["resume", ck_s], &[]);
    let w = worker(&["--connect", &resumed.address, "--threads", "2"]);
    let (code, summary, log) = resumed.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(summary["mode"], mode);
    assert_eq!(summary["workers"], 2, "only the remote worker's threads: {summary}");
    assert_t1(&summary);
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn a_run_with_remote_workers_stops_with_a_checkpoint_and_resumes_exactly() {
    remote_workers_stop_with_a_checkpoint_and_resume("budget", &[]);
}

/// A remote job without a budget ends when the run stops, handing back the rest of its search:
/// the time limit holds (the job alone is the whole tree, some 6 s), and nothing is lost.
#[test]
fn a_remote_job_of_any_budget_ends_when_the_run_stops() {
    remote_workers_stop_with_a_checkpoint_and_resume("budget", &["--budget", "inf", "--fixed-budget"]);
}

#[test]
fn a_polling_run_with_remote_workers_stops_with_a_checkpoint_and_resumes_exactly() {
    remote_workers_stop_with_a_checkpoint_and_resume("polling", &[]);
}

#[test]
fn a_silent_polling_process_is_dropped_and_the_run_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.txt");
    let out_s = out.to_str().unwrap();
    let master = Master::start(&[
        "--mode",
        "polling",
        "--workers",
        "1",
        "--worker-timeout",
        "1",
        "--output",
        out_s,
        "queens",
        "--n",
        "14",
    ]);
    let mut silent = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(500));
    signal(&silent, "-STOP");
    let (code, summary, log) = master.finish();
    signal(&silent, "-KILL");
    silent.wait().unwrap();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("silent for"), "{log}");
    assert_eq!(summary["outputs"], 365_596);
    assert_records_once(&out, 365_596);
}

/// A remote worker told to stop (a signal) leaves the run handing its work back, and the run
/// completes exactly without it: in budget mode after reporting the jobs it was running (those
/// queued for it go to others), in polling mode once the master has dealt its nodes to the other
/// workers, with no rollback. The worker exits 0 (a launcher takes any other status for a failure).
fn a_worker_told_to_stop_leaves_handing_its_work_back(mode: &str, signal_name: &str) {
    let args = ["--mode", mode, "--workers", "1", "-v", "--count-only", "queens", "--n", "16"];
    let master = Master::start(&args);
    let leaver = worker(&["--connect", &master.address, "--threads", "1"]);
    let stays = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&leaver, signal_name);
    let (code, log) = worker_output(leaver);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("left the run; the master has this worker's work"), "{log}");
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    // 16-queens has 14,772,512 solutions (OEIS A000170).
    assert_eq!(summary["outputs"], 14_772_512, "{log}");
    let (left, lost) = match mode {
        "polling" => ("workers leave the run, handing their nodes over", "back to the last snapshot"),
        _ => ("remote worker told to stop left the run", "worker lost"),
    };
    assert!(log.contains(left), "{log}");
    assert!(!log.contains(lost), "{log}");
    // Neither the worker that left nor the one that stayed to the run's end is called lost.
    assert!(!log.contains("lost: its connection closed"), "{log}");
    let (code, log) = worker_output(stays);
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn a_budget_worker_told_to_stop_reports_its_jobs_and_leaves() {
    a_worker_told_to_stop_leaves_handing_its_work_back("budget", "-INT");
}

#[test]
fn a_polling_worker_told_to_stop_hands_its_nodes_over_without_a_rollback() {
    a_worker_told_to_stop_leaves_handing_its_work_back("polling", "-TERM");
}

/// A worker still waiting for its master stops at once on a signal.
#[test]
fn a_worker_waiting_for_its_master_stops_at_once_on_a_signal() {
    let waiting = worker(&["--connect", "127.0.0.1:1", "--retry", "60"]);
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    signal(&waiting, "-HUP");
    let (code, log) = worker_output(waiting);
    assert_eq!(code, Some(0), "{log}");
    assert!(asked.elapsed() < Duration::from_secs(10), "{log}");
    assert!(log.contains("SIGHUP: leaving"), "{log}");
    assert!(log.contains("stopped before joining a run"), "{log}");
    // Also while it waits for its token file, which it says after a while (it once died of the
    // signal, silent, exit 143).
    let dir = tempfile::tempdir().unwrap();
    let (address, token) = (dir.path().join("addr"), dir.path().join("token"));
    let files = ["--connect-file", address.to_str().unwrap(), "--token-file", token.to_str().unwrap()];
    let waiting = worker(&[&files[..], &["--retry", "60"]].concat());
    // It says so after 2 s.
    std::thread::sleep(Duration::from_secs(4));
    signal(&waiting, "-TERM");
    let (code, log) = worker_output(waiting);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("waiting for the token file"), "{log}");
    assert!(log.contains("stopped before joining a run"), "{log}");
}

/// A worker told to stop while it joins its lost master's run again says what happened, not that it
/// never joined a run.
#[test]
fn a_worker_stopped_while_joining_again_says_so() {
    let mut master = Master::start(&["--workers", "0", "uts", "--preset", "T1XL"]);
    let w = worker(&["--connect", &master.address, "--threads", "1", "--retry", "60"]);
    std::thread::sleep(Duration::from_secs(1));
    signal(&master.child, "-KILL");
    master.child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    signal(&w, "-TERM");
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("joining its run again"), "{log}");
    assert!(log.contains("stopped while joining the run again"), "{log}");
    assert!(!log.contains("stopped before joining a run"), "{log}");
}

/// `--retry` bounds a worker's whole wait, for its token file and then its master's address file
/// (it waited for each as long).
#[test]
fn a_worker_waits_for_its_token_and_its_master_no_longer_than_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (address, token) = (dir.path().join("addr"), dir.path().join("token"));
    let files = ["--connect-file", address.to_str().unwrap(), "--token-file", token.to_str().unwrap()];
    let started = Instant::now();
    let waiting = worker(&[&files[..], &["--retry", "3"]].concat());
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&token, "0123456789abcdef\n").unwrap();
    let (code, log) = worker_output(waiting);
    let waited = started.elapsed();
    assert_eq!(code, Some(1), "{log}");
    assert!(waited < Duration::from_millis(4500), "waited {waited:?} with --retry 3: {log}");
}

/// A long wait for the token file at the start takes nothing off later rejoins: a worker that
/// loses its master tries again for the whole of `--retry` (it once had what the start left).
#[test]
fn a_worker_that_waited_long_for_its_token_rejoins_for_all_of_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (address, token) = (dir.path().join("addr"), dir.path().join("token"));
    let (a, t) = (address.to_str().unwrap(), token.to_str().unwrap());
    let waiting = worker(&["--connect-file", a, "--token-file", t, "--retry", "4"]);
    std::thread::sleep(Duration::from_secs(3));
    let mut master = bts_command()
        .args(["run", "--workers", "0", "--listen", "127.0.0.1:0", "--address-file", a, "--token-file", t])
        .args(["--progress", "never", "uts", "--preset", "T1XL"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(20), || address.exists(), || "the master did not start".into());
    std::thread::sleep(Duration::from_millis(1500));
    master.kill().unwrap();
    master.wait().unwrap();
    let (code, log) = worker_output(waiting);
    assert_eq!(code, Some(1), "{log}");
    let again = log.split("joining its run again (for ").nth(1).expect(&log);
    let seconds: f64 = again.split(' ').next().unwrap().parse().unwrap();
    assert!(seconds >= 3.5, "it tries again for {seconds} s of --retry 4: {log}");
}

/// Ctrl-Z, a debugger or a batch system's suspend stops a worker for a while; when it goes on, so
/// does its part of the run: the reads its stop interrupted are no error.
fn a_suspended_remote_worker_carries_on(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.txt");
    let args = ["--mode", mode, "--workers", "0", "--time-limit", "60", "--output", out.to_str().unwrap()];
    let master = Master::start(&[&args[..], &["queens", "--n", "14"]].concat());
    let w = worker(&["--connect", &master.address, "--threads", "1"]);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(150));
        signal(&w, "-STOP");
        std::thread::sleep(Duration::from_millis(200));
        signal(&w, "-CONT");
    }
    let (code, summary, log) = master.finish();
    let (worker_code, worker_log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}\n{worker_log}");
    assert_eq!(worker_code, Some(0), "{worker_log}");
    assert!(!log.contains("dropped") && !log.contains("back to the last snapshot"), "{log}");
    // 14-queens has 365,596 solutions (OEIS A000170).
    assert_eq!(summary["outputs"], 365_596);
    assert_records_once(&out, 365_596);
}

#[test]
fn a_suspended_remote_worker_carries_on_in_budget_mode() {
    a_suspended_remote_worker_carries_on("budget");
}

#[test]
fn a_suspended_remote_worker_carries_on_in_polling_mode() {
    a_suspended_remote_worker_carries_on("polling");
}

/// A polling process that loses its master (here: the master is stopped for longer than workers
/// wait for it) leaves as a lost process: its threads' stacks go with it, and the master, once it
/// goes on, rolls the run back, never taking their departure for the end of their work; a worker
/// that joins then completes the run exactly.
#[test]
fn polling_workers_that_give_up_on_the_master_are_rolled_back_not_finished() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.txt");
    let out_s = out.to_str().unwrap();
    let args = ["--mode", "polling", "--workers", "0", "--worker-timeout", "1", "--output", out_s];
    let master = Master::start(&[&args[..], &["queens", "--n", "15"]].concat());
    let first = worker(&["--connect", &master.address, "--threads", "2", "--retry", "1"]);
    std::thread::sleep(Duration::from_millis(500));
    signal(&master.child, "-STOP");
    // The worker gives up after a second of silence, and on the stopped master after a second
    // of trying to join its run again.
    let (_, first_log) = worker_output(first);
    signal(&master.child, "-CONT");
    let second = worker(&["--connect", &master.address, "--threads", "2"]);
    let (code, summary, log) = master.finish();
    let (_, second_log) = worker_output(second);
    assert!(first_log.contains("no word from the master"), "{first_log}");
    assert_eq!(code, Some(0), "{log}\n{second_log}");
    assert_eq!(summary["complete"], true, "{summary}");
    // Solutions of 15-queens (OEIS A000170).
    assert_eq!(summary["outputs"], 2_279_184, "{log}");
    assert_records_once(&out, 2_279_184);
}

#[test]
fn the_master_says_where_it_listens_and_that_it_waits_for_workers() {
    let args = ["run", "--listen", "127.0.0.1:0", "--workers", "0", "--progress", "always", "--count-only"];
    let mut master = bts_command().args(args).args(["queens", "--n", "8"]).stderr(Stdio::piped()).spawn().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stderr = master.stderr.take().unwrap();
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            let mut byte = [0u8];
            while stderr.read(&mut byte).is_ok_and(|n| n == 1) {
                log.lock().unwrap().push(byte[0] as char);
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let seen = |what: &str| loop {
        if log.lock().unwrap().contains(what) {
            break;
        }
        assert!(Instant::now() < deadline, "no {what:?} in {}", log.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    };
    // Port 0: only this line tells which port the master took, without -v or --address-file.
    seen("bts worker --connect 127.0.0.1:");
    seen("busy 0/0 (waiting for workers)");
    let text = log.lock().unwrap().clone();
    let address = text.split("bts worker --connect ").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    let w = worker(&["--connect", &address, "--threads", "1"]);
    assert_eq!(wait_bounded(&mut master, Duration::from_secs(60)).code(), Some(0));
    reader.join().unwrap();
    assert!(log.lock().unwrap().contains("complete: 2057 nodes"), "{}", log.lock().unwrap());
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn a_missing_token_file_is_made_by_the_master_and_read_by_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    let t = token.to_str().unwrap();
    // A worker without the file says how to make one.
    let o = bts(&["worker", "--connect", "127.0.0.1:9", "--token-file", t]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("openssl rand -hex 32"), "{}", stderr(&o));
    let master = Master::start(&["--token-file", t, "--workers", "0", "--count-only", "queens", "--n", "8"]);
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(&token).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&token).unwrap();
    assert!(text.len() == 65 && text.trim_end().chars().all(|c| c.is_ascii_hexdigit()), "{text:?}");
    let w = worker(&["--connect", &master.address, "--token-file", t, "--threads", "1"]);
    let (code, summary, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains(&format!("made a new token in {t}")), "{log}");
    assert_eq!(summary["nodes"], 2057);
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    // The next master reads the file it finds.
    let again = bts(&["run", "--listen", "127.0.0.1:0", "--token-file", t, "--count-only", "queens", "--n", "8"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(!stderr(&again).contains("made a new token"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&token).unwrap(), text);
}

/// A worker told to stop just as its master dropped it (here suspended past --worker-timeout)
/// leaves as cleanly as it could, exit 0: the master redoes its jobs.
#[test]
fn a_dropped_worker_told_to_stop_exits_0() {
    let master = Master::start(&["--workers", "1", "--worker-timeout", "1", "uts", "--preset", "T1", "-g", "20"]);
    let w = worker(&["--connect", &master.address, "--threads", "1"]);
    std::thread::sleep(Duration::from_millis(700));
    signal(&w, "-STOP");
    std::thread::sleep(Duration::from_millis(2500));
    // Delivered as it continues.
    signal(&w, "-INT");
    signal(&w, "-CONT");
    let (code, log) = worker_output(w);
    assert_eq!(code, Some(0), "{log}");
    let (code, s, log) = master.finish();
    assert_eq!(code, Some(0), "{log}");
    assert_t1(&s);
}
