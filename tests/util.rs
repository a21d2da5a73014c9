//! Running the `bts` binary in tests.

use serde_json::Value;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The signals the tests send reach the programs they start with their default handling, whatever
/// the tests were started under: `nohup` leaves SIGHUP ignored, a script's `cmd &` SIGINT, and
/// the programs started here would inherit that. Reset before `main`, while one thread runs.
#[used]
#[unsafe(link_section = ".init_array")]
static DEFAULT_SIGNALS: extern "C" fn() = {
    extern "C" fn reset() {
        for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
            // SAFETY: SIG_DFL is a valid disposition for these signals; no other thread runs yet.
            unsafe { libc::signal(signal, libc::SIG_DFL) };
        }
    }
    reset
};

pub fn bts_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bts"))
}

pub fn bts(args: &[&str]) -> Output {
    bts_command().args(args).output().expect("bts runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The summary JSON, which comes last on stdout.
pub fn summary(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.lines().last().expect("a summary line")).expect("the summary is JSON")
}

/// All a child with a piped stderr wrote there (read to its end: call it once the child exits).
pub fn stderr_of(child: &mut Child) -> String {
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("a piped stderr"), &mut log).unwrap();
    log
}

/// What `bts inspect` says of the checkpoint at `path`.
pub fn inspect(path: &std::path::Path) -> Value {
    let o = bts(&["inspect", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Waits for `child` at most `limit`, killing it if it takes longer.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bts did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `signal` (such as "-INT" or "-KILL") to a process.
pub fn signal(child: &Child, signal: &str) {
    Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
}

/// Asserts that the file at `path` holds `expected` lines, all different: every record written
/// exactly once.
pub fn assert_records_once(path: &std::path::Path, expected: usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), expected, "records lost or written twice in {}", path.display());
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), expected, "a record written twice in {}", path.display());
}

/// Runs `run`, then `resume` until one finishes, killing each with SIGKILL after a delay that
/// starts at `delay_ms` and grows by `step_ms` (the first kill waits for the first checkpoint,
/// `resume[1]`): the last run's output and the number of kills.
pub fn kill_9_until_done(run: &[&str], resume: &[&str], mut delay_ms: u64, step_ms: u64) -> (Output, u32) {
    let mut kills = 0;
    loop {
        let args = if kills == 0 { run } else { resume };
        let mut child = bts_command().args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        if kills == 0 {
            // A kill before the first checkpoint would leave nothing to resume: on a loaded
            // machine the run may take longer than `delay_ms` to write it.
            let checkpoint = std::path::Path::new(resume[1]);
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !checkpoint.exists() && child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), kills);
        }
        signal(&child, "-KILL");
        child.wait().unwrap();
        kills += 1;
        delay_ms += step_ms;
        assert!(kills < 40, "the run never finished");
    }
}

/// Writes an executable script `name` into `dir`.
pub fn script(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Waits, at most `limit`, until `done()`; then fails saying `what` (did not happen in time).
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool, what: impl FnOnce() -> String) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A summary's totals are UTS T1's published ones.
pub fn assert_t1(summary: &Value) {
    let got = (summary["nodes"].as_u64(), summary["leaves"].as_u64(), summary["max_depth"].as_u64());
    assert_eq!(got, (Some(4_130_071), Some(3_305_118), Some(10)), "{summary}");
}
