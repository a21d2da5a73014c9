//! A program run as a child process: its stdout cut into lines (with a length limit), its stderr
//! sent to the log and kept for error messages, and a kill that takes its whole process group.
//!
//! The child is spawned, waited for and killed through tokio ([`bts_protocol::runtime`]), and its
//! stderr is read by a task there. Its stdin and stdout stay with the worker thread that runs its
//! jobs: a job's answer then reaches that thread with no other thread to wake (see [`Program::next`]).

use bts_protocol::runtime::{block_on, runtime};
use std::collections::{BTreeSet, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr};
use tokio::task::JoinHandle;

/// What the program's stdout gave next.
#[derive(Debug)]
pub enum Next {
    /// A line, without its newline, byte for byte.
    Line(Vec<u8>),
    /// A line longer than the limit (its first bytes, for the error message).
    TooLong(Vec<u8>),
    /// Stdout closed: the program exited (or closed it).
    Eof,
    /// Nothing before the deadline.
    Timeout,
}

/// How long to poll stdout before sleeping on it (see `Program::next`).
const SPIN: Duration = Duration::from_micros(50);

/// What one read of stdout takes at most, unless a longer line needs more.
const READ: usize = 64 * 1024;

/// Lines of stderr kept for error messages.
const STDERR_TAIL: usize = 20;

/// A running program.
pub struct Program {
    child: Child,
    /// The child's process id (and its process group's).
    pid: u32,
    stdin: Option<File>,
    stdout: File,
    /// What stdout gave: `buf[start..end]` is not yet cut into lines. A line is taken by moving
    /// `start`, and the rest goes to the front only before the next read: taking each line off the
    /// front made a read of many lines cost its length times their number (reading 2 million
    /// lines took 3.5 times as long).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes of `buf[start..end]` already known to hold no newline.
    scanned: usize,
    max_line: usize,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// The task logging stderr: done once the program and whatever it started closed stderr.
    stderr_task: Mutex<Option<JoinHandle<()>>>,
    /// The program has been waited for.
    status: Option<ExitStatus>,
    /// Stdout's end also ends a last line without a newline.
    last_line_unterminated: bool,
}

impl Program {
    /// Starts `command` in a process group of its own (so that Ctrl-C to bts leaves it alone and a
    /// kill reaches whatever it started), with piped stdin and stdout; `tag` names it in the log.
    pub fn spawn(command: &mut Command, tag: &str, max_line: usize) -> io::Result<Program> {
        Self::spawn_logging(command, tag, max_line, true)
    }

    /// As [`spawn`](Self::spawn), with the program's stderr logged at debug level rather than as
    /// warnings (for a program whose stderr carries expected notices, as lrs's does); it is kept for
    /// error messages all the same.
    pub fn spawn_quiet(command: &mut Command, tag: &str, max_line: usize) -> io::Result<Program> {
        Self::spawn_logging(command, tag, max_line, false)
    }

    fn spawn_logging(command: &mut Command, tag: &str, max_line: usize, warn: bool) -> io::Result<Program> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut command = tokio::process::Command::from(std::mem::replace(command, Command::new("")));
        command.process_group(0);
        let _runtime = runtime().enter();
        // Started and registered under one lock: bts exiting in between (a run failing while
        // another thread starts its next job) killed its programs but this one, which outlived it.
        let mut live = live_groups();
        if live.exiting {
            // bts has killed its programs: none may start after them.
            return Err(io::Error::other("bts is exiting"));
        }
        let mut child = command.spawn()?;
        let pid = child.id().ok_or_else(|| io::Error::other("the program exited at once"))?;
        live.insert(pid);
        drop(live);
        // Back to blocking descriptors, for this thread.
        let file = |fd: io::Result<OwnedFd>| fd.map(File::from);
        let stdout = file(child.stdout.take().expect("stdout is piped").into_owned_fd())?;
        let stdin = file(child.stdin.take().expect("stdin is piped").into_owned_fd())?;
        // Non-blocking, so that `send` can give up at a deadline.
        // SAFETY: fcntl on a descriptor `stdin` owns; only its status flags change.
        unsafe {
            libc::fcntl(
                stdin.as_raw_fd(),
                libc::F_SETFL,
                libc::fcntl(stdin.as_raw_fd(), libc::F_GETFL) | libc::O_NONBLOCK,
            )
        };
        let stdin = Some(stdin);
        let stderr = child.stderr.take().expect("stderr is piped");
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        let tag = format!("{tag} (pid {pid})");
        let stderr_task = Mutex::new(Some(runtime().spawn(async move { log_stderr(stderr, &tag, &tail, warn).await })));
        Ok(Program {
            child,
            pid,
            stdin,
            stdout,
            buf: vec![0; READ],
            start: 0,
            end: 0,
            scanned: 0,
            max_line,
            stderr_tail,
            stderr_task,
            status: None,
            last_line_unterminated: false,
        })
    }

    /// Takes a last line without a newline as a line: for a program whose exit status is checked
    /// afterwards (a one-shot program must exit 0).
    pub fn last_line_may_lack_newline(&mut self) {
        self.last_line_unterminated = true;
    }

    /// Closes the program's stdin: it reads end of file (one-shot input, as lrs's).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Writes `bytes` to the program's stdin by `deadline`: a program that does not read its input
    /// (and so fills the pipe) fails with `TimedOut` then.
    pub fn send(&mut self, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "stdin is closed"))?;
        while !bytes.is_empty() {
            match stdin.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "the program does not read its input"));
                    }
                    let mut poll = libc::pollfd { fd: stdin.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                    let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
                    // SAFETY: one pollfd, valid for the call; the descriptor is stdin's, open.
                    unsafe { libc::poll(&mut poll, 1, ms) };
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next thing stdout gives, waiting until `deadline`. Stdout is read on this thread: a
    /// job's answer reaches bts with no other thread to wake.
    pub fn next(&mut self, deadline: Instant) -> Next {
        loop {
            let unread = &self.buf[self.start..self.end];
            if let Some(i) = unread[self.scanned..].iter().position(|&b| b == b'\n') {
                let len = self.scanned + i;
                if len > self.max_line {
                    return Next::TooLong(unread[..80.min(len)].to_vec());
                }
                let line = unread[..len].to_vec();
                (self.start, self.scanned) = (self.start + len + 1, 0);
                return Next::Line(line);
            }
            self.scanned = unread.len();
            if unread.len() > self.max_line {
                return Next::TooLong(unread[..unread.len().min(80)].to_vec());
            }
            // A program answering a small job does so within microseconds. Polling (and yielding)
            // for a moment before sleeping keeps this core from going idle: waking an idle core
            // costs tens of microseconds on virtual machines, more than the job itself.
            let spin_until = Instant::now() + SPIN;
            let mut ready = false;
            while !ready && Instant::now() < spin_until {
                ready = self.readable(Duration::ZERO);
                std::thread::yield_now();
            }
            if !ready && !self.readable(deadline.saturating_duration_since(Instant::now())) {
                return Next::Timeout;
            }
            // Room to read into: the unread bytes to the front, and the buffer doubled if they fill it.
            self.buf.copy_within(self.start..self.end, 0);
            (self.end, self.start) = (self.end - self.start, 0);
            if self.end == self.buf.len() {
                self.buf.resize(2 * self.buf.len(), 0);
            }
            match self.stdout.read(&mut self.buf[self.end..]) {
                // The last line may lack its newline (`printf 'done 1'`), if the caller checks how
                // the program ended (a line cut by a crash could look whole).
                Ok(0) if self.last_line_unterminated && self.end > 0 => {
                    let line = self.buf[..self.end].to_vec();
                    (self.end, self.scanned) = (0, 0);
                    return Next::Line(line);
                }
                Ok(0) => return Next::Eof,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Eof,
            }
        }
    }

    /// The start of what stdout gave and no line has taken (a line without its newline, so far).
    pub fn unread(&self) -> Vec<u8> {
        let unread = &self.buf[self.start..self.end];
        unread[..unread.len().min(200)].to_vec()
    }

    /// Whether stdout has something to read (or is closed) within `wait`.
    fn readable(&self, wait: Duration) -> bool {
        let mut fd = libc::pollfd { fd: self.stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms =
            wait.as_millis().min(i32::MAX as u128) as i32 + i32::from(!wait.subsec_nanos().is_multiple_of(1_000_000));
        loop {
            // SAFETY: one valid pollfd, for the length of the call.
            let r = unsafe { libc::poll(&mut fd, 1, ms) };
            if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return r > 0;
            }
        }
    }

    /// True if the program wrote something not yet read (a persistent program, after `done`).
    pub fn has_pending(&self) -> bool {
        self.start < self.end || self.readable(Duration::ZERO)
    }

    /// Whether something still holds stdout open, `wait` after the program's group was killed:
    /// a process it started that left its process group (`setsid`), out of bts's reach.
    pub fn stdout_held_open(&self, wait: Duration) -> bool {
        self.start == self.end && !self.readable(wait)
    }

    /// Whether the program has exited, without reaping it: until it is reaped its process id
    /// cannot be reused, so its process group can still be killed safely.
    pub fn exited(&self) -> bool {
        if self.status.is_some() {
            return true;
        }
        // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid with WNOWAIT leaves the child
        // as it is.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            libc::waitid(libc::P_PID, self.pid, &mut info, flags) == 0 && info.si_pid() != 0
        }
    }

    /// Waits until `deadline` for the program to exit, without reaping it (see [`exited`](Self::exited)):
    /// its process descriptor becomes readable when it exits.
    pub fn exited_by(&self, deadline: Instant) -> bool {
        if self.exited() {
            return true;
        }
        // SAFETY: pidfd_open takes a process id and flags, and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid, 0) };
        if fd < 0 {
            // A kernel without process descriptors (before Linux 5.3): look every millisecond.
            while !self.exited() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            return self.exited();
        }
        // SAFETY: the descriptor was just opened, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        block_on(async {
            // SAFETY: the AsyncFd owns the descriptor, which stays open and the same until it is dropped.
            let registered =
                unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
            let Ok(fd) = registered else { return };
            let _ = tokio::time::timeout_at(deadline.into(), fd.readable()).await;
        });
        self.exited()
    }

    /// Waits up to `limit` for the program to exit.
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        if self.status.is_none() && self.exited_by(Instant::now() + limit) {
            // Out of the set before it is reaped, after which its id may be another process's.
            live_groups().remove(self.pid);
            self.status = block_on(self.child.wait()).ok();
        }
        self.status
    }

    /// The last lines the program wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        // Give the stderr task a moment to catch up with a program that just died or failed (it
        // may have written its stderr just before its answer, and a loaded machine reads it late).
        let mut task = self.stderr_task.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut running) = task.take() {
            let wait = async { tokio::time::timeout(Duration::from_millis(50), &mut running).await.is_ok() };
            let done = block_on(wait);
            if !done {
                *task = Some(running);
            }
        }
        let tail = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Kills what is left of the program's process group, once the program itself has exited
    /// (whatever it started in the background), without reaping it.
    pub fn kill_background(&self) {
        if self.status.is_none() {
            kill_group(self.pid);
        }
    }

    /// Kills the program and everything in its process group, and reaps it (an exited program's
    /// group too: whatever it left running in the background). Returns how it ended.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            kill_group(self.pid);
            let _ = self.child.start_kill();
            // Out of the set before it is reaped, after which its id may be another process's.
            live_groups().remove(self.pid);
            let child = &mut self.child;
            self.status = block_on(child.wait()).ok();
        }
        self.status
    }
}

/// The process groups of the programs started and not yet reaped: what [`kill_all`] kills, and
/// what the guardian kills if bts dies without time to.
struct LiveGroups {
    groups: BTreeSet<u32>,
    /// The folder of the [`JobFile`]s, made with the first: [`kill_all`] removes it, and the
    /// guardian does if bts dies without time to.
    folder: Option<PathBuf>,
    /// [`kill_all`] has run: no program may start after it.
    exiting: bool,
    /// The guardian's input, once a program has started (`None` if it could not start).
    guardian: Option<Option<std::process::ChildStdin>>,
}

impl LiveGroups {
    /// Registers a program's group (bts is not exiting: see [`kill_all`]).
    fn insert(&mut self, pid: u32) {
        self.groups.insert(pid);
        self.tell_guardian('+', pid);
    }

    /// A program is about to be reaped, after which its id may be another process's.
    fn remove(&mut self, pid: u32) {
        if self.groups.remove(&pid) {
            self.tell_guardian('-', pid);
        }
    }

    /// The folder of the job files, made once.
    fn folder(&mut self) -> io::Result<PathBuf> {
        if let Some(folder) = &self.folder {
            return Ok(folder.clone());
        }
        let folder = tempfile::Builder::new().prefix("bts-").tempdir()?.keep();
        // The guardian's `rm -rf` gets only a whole absolute path that is plainly the folder (a
        // relative TMPDIR is made absolute; one with a newline the guardian would not read whole).
        if let Ok(path) = std::fs::canonicalize(&folder)
            && let Some(text) = path.to_str()
            && !text.contains('\n')
            && text.trim() == text
            && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("bts-"))
        {
            self.tell_guardian('d', text);
        }
        self.folder = Some(folder.clone());
        Ok(folder)
    }

    fn tell_guardian(&mut self, op: char, what: impl std::fmt::Display) {
        let guardian = self.guardian.get_or_insert_with(start_guardian);
        // One write, which a pipe takes whole: a line cut by a kill -9 would not be read.
        if let Some(input) = guardian
            && let Err(e) = input.write_all(format!("{op} {what}\n").as_bytes())
        {
            tracing::debug!("the guardian of bts's programs is gone: {e}");
            *guardian = None;
        }
    }
}

fn live_groups() -> std::sync::MutexGuard<'static, LiveGroups> {
    static LIVE: Mutex<LiveGroups> =
        Mutex::new(LiveGroups { groups: BTreeSet::new(), folder: None, exiting: false, guardian: None });
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The guardian: a shell told the group of every program bts starts (`+ PID`) and reaps (`- PID`),
/// and the folder of its job files (`d PATH`), which kills the groups still running and removes
/// the folder when its input ends, as it does when bts dies however it dies (`kill -9` leaves bts
/// no time to do it itself). In a group of its own, deaf to the signals that stop bts.
const GUARDIAN: &str = r#"trap '' INT HUP TERM QUIT
groups=
folder=
while read -r op group; do
    case $op in
    +) groups="$groups $group" ;;
    -) kept=; for g in $groups; do [ "$g" = "$group" ] || kept="$kept $g"; done; groups=$kept ;;
    d) folder=$group ;;
    esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
[ -n "$folder" ] && rm -rf -- "$folder"
"#;

fn start_guardian() -> Option<std::process::ChildStdin> {
    use std::os::unix::process::CommandExt;
    let started = Command::new("/bin/sh")
        .args(["-c", GUARDIAN])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    match started {
        // Never waited for: it lives as long as bts, and ends after it.
        Ok(mut guardian) => guardian.stdin.take(),
        Err(e) => {
            tracing::warn!(
                "cannot start the guardian of bts's programs (/bin/sh): {e}; programs may outlive a bts killed by signal 9"
            );
            None
        }
    }
}

/// True once [`kill_all`] has run: bts is exiting, and a program's failure is its doing.
pub fn exiting() -> bool {
    live_groups().exiting
}

/// Kills every program bts started that is still running, with its process group: for a process
/// about to exit while some of its threads are still running jobs (the progress estimate's, a run
/// quit at once by a second signal), whose programs would otherwise outlive it.
pub fn kill_all() {
    say_held_stderr(true);
    // The set stays locked while the groups are signalled: a program leaves it before it is reaped.
    let mut live = live_groups();
    live.exiting = true;
    for pid in std::mem::take(&mut live.groups) {
        kill_group(pid);
        live.tell_guardian('-', pid);
    }
    if let Some(folder) = &live.folder {
        let _ = std::fs::remove_dir_all(folder);
    }
}

/// A job's input as a file of its own, for a program that reads its input by name: removed when
/// dropped, and with its folder (`bts-XXXXXX` in the temporary folder, `TMPDIR`) when bts exits.
pub struct JobFile {
    path: PathBuf,
}

impl JobFile {
    /// Writes `bytes` to a new file named `{prefix}XXXXXX{suffix}`.
    pub fn new(prefix: &str, suffix: &str, bytes: &[u8]) -> io::Result<JobFile> {
        let create = |folder| tempfile::Builder::new().prefix(prefix).suffix(suffix).tempfile_in(folder);
        let folder = || {
            let mut live = live_groups();
            if live.exiting {
                return Err(io::Error::other("bts is exiting"));
            }
            live.folder()
        };
        let file = match create(folder()?) {
            // The folder is gone (a cleaner of old files in /tmp, in a run of weeks): a new one.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                live_groups().folder = None;
                create(folder()?)?
            }
            file => file?,
        };
        let (mut file, path) = file.keep().map_err(|e| e.error)?;
        let job_file = JobFile { path };
        file.write_all(bytes)?;
        Ok(job_file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for JobFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Kills the process group of the program whose id is `pid`, and everything in it. The caller has
/// not reaped the program, so the id is still its own.
fn kill_group(pid: u32) {
    // SAFETY: kill(2) with a negative pid signals the process group; the group is the program's own
    // (process_group(0)), and its unreaped leader keeps the id from being reused, so nothing else is
    // touched.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.kill();
    }
}

/// Describes how a program ended.
pub fn describe(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) if s.code().is_some() => format!("exit status {}", s.code().unwrap_or_default()),
        Some(s) => match s.signal() {
            Some(sig) => format!("killed by signal {sig}"),
            None => "ended".to_string(),
        },
        None => "still running".to_string(),
    }
}

/// Stderr lines are cut to this many bytes.
const STDERR_LINE: usize = 2000;

/// Sends stderr to the log, line by line (long lines cut), keeping the last lines.
async fn log_stderr(mut stderr: ChildStderr, tag: &str, tail: &Mutex<VecDeque<String>>, warn: bool) {
    let mut line = Vec::new();
    let mut chunk = [0u8; 8192];
    let emit = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line).into_owned();
        line.clear();
        if text.trim().is_empty() {
            return;
        }
        // In the tail first: a failure of the job takes it, maybe while this line is logged.
        {
            let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(text.clone());
        }
        log_stderr_line(tag, warn, &text);
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &chunk[..n] {
            if b == b'\n' {
                emit(&mut line);
            } else if line.len() < STDERR_LINE {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        emit(&mut line);
    }
    say_held_stderr(false);
}

/// Stderr lines shown as warnings a second, all programs' together: chatty ones (progress on
/// stderr, a process a job) would bury the run's own messages and slow it down.
const STDERR_WARNINGS_PER_SECOND: u32 = 20;

/// The current second of stderr warnings: its start, the lines shown in it, and the lines logged
/// at debug level only since the last count told.
static STDERR_RATE: Mutex<Option<(Instant, u32, u64)>> = Mutex::new(None);

/// A program's stderr line `text` to the log: as a warning (if `warn`) up to
/// [`STDERR_WARNINGS_PER_SECOND`], else at debug level, the held lines' count told.
fn log_stderr_line(tag: &str, warn: bool, text: &str) {
    let shown = warn && {
        // A second over: its held lines told first, and this one in the next.
        say_held_stderr(false);
        let mut rate = STDERR_RATE.lock().unwrap_or_else(|e| e.into_inner());
        let (_, shown, held) = rate.get_or_insert((Instant::now(), 0, 0));
        if *shown < STDERR_WARNINGS_PER_SECOND {
            *shown += 1;
            true
        } else {
            *held += 1;
            false
        }
    };
    match shown {
        true => tracing::warn!(worker = %tag, "stderr: {text}"),
        false => tracing::debug!(worker = %tag, "stderr: {text}"),
    }
}

/// Tells the programs' stderr lines held back, once their second is over (or `now`: bts exits).
fn say_held_stderr(now: bool) {
    let held = {
        let mut rate = STDERR_RATE.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *rate {
            Some((start, shown, held)) if now || start.elapsed() >= Duration::from_secs(1) => {
                (*start, *shown) = (Instant::now(), 0);
                std::mem::take(held)
            }
            _ => 0,
        }
    };
    if held > 0 {
        tracing::warn!(
            "programs' stderr: {held} more lines, past {STDERR_WARNINGS_PER_SECOND} a second, logged at debug level only \
             (-vv shows them)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When its input ends, the guardian kills the groups it was told of and not told are gone
    /// (whose ids may be other processes' by then).
    #[test]
    fn the_guardian_kills_the_groups_still_listed_when_its_input_ends() {
        use std::os::unix::process::CommandExt;
        let group = || Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let (mut listed, mut gone) = (group(), group());
        let mut input = start_guardian().expect("/bin/sh");
        writeln!(input, "+ {}\n+ {}\n- {}", listed.id(), gone.id(), gone.id()).unwrap();
        drop(input);
        let deadline = Instant::now() + Duration::from_secs(10);
        while listed.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the listed group outlived the guardian's input");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(gone.try_wait().unwrap().is_none(), "a group no longer listed was killed");
        let _ = gone.kill();
        let _ = gone.wait();
    }

    /// A line of `max_line` bytes is taken, one byte more is refused, whether or not its newline
    /// came with it.
    #[test]
    fn lines_are_refused_past_the_limit_newline_or_not() {
        let next = |script: &str| {
            let mut command = Command::new("sh");
            command.args(["-c", script]);
            let mut program = Program::spawn(&mut command, "test", 1000).unwrap();
            let next = program.next(Instant::now() + Duration::from_secs(10));
            program.kill();
            next
        };
        let line = |n: usize, end: &str| format!("head -c {n} /dev/zero | tr '\\0' x; printf '{end}'; sleep 5");
        assert!(matches!(next(&line(1000, "\\n")), Next::Line(l) if l.len() == 1000));
        assert!(matches!(next(&line(1001, "\\n")), Next::TooLong(_)));
        assert!(matches!(next(&line(1001, "")), Next::TooLong(_)));
    }

    /// Every line comes whole and in order, however the reads cut them: many short lines written
    /// in large blocks, and lines longer than one read (the buffer grows for them).
    #[test]
    fn lines_come_whole_whatever_the_reads() {
        let deadline = Instant::now() + Duration::from_secs(20);
        // 200,000 numbered lines, then three of 100,000, 300,000 and 5 bytes.
        let script = "seq 1 200000; for n in 100000 300000 5; do head -c $n /dev/zero | tr '\\0' y; echo; done";
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        let mut program = Program::spawn(&mut command, "test", 1 << 20).unwrap();
        for i in 1..=200_000 {
            match program.next(deadline) {
                Next::Line(l) => assert_eq!(l, i.to_string().as_bytes()),
                other => panic!("line {i}: {other:?}"),
            }
        }
        for n in [100_000, 300_000, 5] {
            assert!(matches!(program.next(deadline), Next::Line(l) if l.len() == n && l.iter().all(|&b| b == b'y')));
        }
        assert!(matches!(program.next(deadline), Next::Eof));
    }

    /// A program's last line may lack its newline, when the caller checks how it ended.
    #[test]
    fn the_last_line_needs_no_newline() {
        let deadline = Instant::now() + Duration::from_secs(10);
        for checked in [true, false] {
            let mut command = Command::new("sh");
            command.args(["-c", "printf 'out a\ndone 1'"]);
            let mut program = Program::spawn(&mut command, "test", 1000).unwrap();
            if checked {
                program.last_line_may_lack_newline();
            }
            assert!(matches!(program.next(deadline), Next::Line(l) if l == b"out a"));
            if checked {
                assert!(matches!(program.next(deadline), Next::Line(l) if l == b"done 1"));
            }
            assert!(matches!(program.next(deadline), Next::Eof));
        }
    }
}
