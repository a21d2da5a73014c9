//! A worker process serving a remote master over TCP: connect (retrying for a while), the
//! handshake, then one [`run_worker`] loop per thread, fed and drained through the connection.
//! The connection is served on the process's tokio runtime ([`bts_protocol::runtime`]): the main
//! thread reads and dispatches the master's frames, a task writes the threads' frames.

use crate::peers::{PeerServer, Router};
use crate::polling::{Shared, Start, Termination, run_polling_worker};
use crate::{RunnerSettings, Searcher, WorkerLoop, run_worker};
use bts_protocol::codec::{FrameCodec, FrameError, MAX_FRAME, encode_frame};
use bts_protocol::polling::{PeerMsg, SplitRule};
use bts_protocol::runtime::{block_on, resolve, runtime, shutdown_handle};
use bts_protocol::wire::WireMode;
use bts_protocol::wire::{PREAMBLE_LEN, PROTOCOL_VERSION};
use bts_protocol::{
    FromWorker, JobFailure, MasterFrame, Preamble, ReportBatch, ToWorker, TreeSpec, Welcome, WorkerFrame, auth,
};
use futures_util::StreamExt;
use std::io;
use std::net::{Shutdown, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::codec::FramedRead;
pub use tokio_util::sync::CancellationToken;

/// The master's frames, read with the limits of the handshake until the master proves the token.
type Frames = FramedRead<OwnedReadHalf, FrameCodec<MasterFrame>>;

/// The threads' frames, on their way to the master.
type FramesOut = UnboundedSender<WorkerFrame>;

/// A connection that completed the handshake.
struct Joined {
    frames: Frames,
    write: OwnedWriteHalf,
    /// Shuts the connection down from any thread.
    handle: std::net::TcpStream,
    welcome: Welcome,
    /// Where other processes' polling workers reach this one, and the address announced for it.
    peer_listener: Option<(TcpListener, String)>,
    /// The run's token as the handshake proved it (the address file's, if it gives one): peers
    /// of a polling run prove the same one.
    token: Vec<u8>,
}

/// Where the master is.
#[derive(Clone, Debug)]
pub enum MasterAddress {
    /// `host:port`.
    Fixed(String),
    /// A file the master writes (`--address-file`, or a cluster launch's rendezvous file): the
    /// address on its first line, and possibly `token <hex>` on the second. Waited for, and read
    /// again before every attempt, so a stale file from an earlier run is soon replaced.
    File(PathBuf),
    /// The rendezvous file of a cluster launch: as `File`, and a file that says `finished` (written
    /// since this process started) means the run ended before this worker could join.
    Rendezvous(PathBuf),
}

/// Where and how to work.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    pub master: MasterAddress,
    /// The shared token (empty if the master has none); a token in the address file wins.
    pub token: Vec<u8>,
    pub threads: u32,
    /// Keep trying to connect (and waiting for the address file) this long.
    pub retry_for: Duration,
    /// Cancelled when the process is told to stop (a signal): it leaves the run, handing its work
    /// back ([`Ended::Left`]).
    pub stop: CancellationToken,
}

/// How a worker process's part in a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The run is over (or ended before this process could join).
    RunOver,
    /// Told to stop, it left the run: a budget-mode process after the jobs it was running, their
    /// reports sent (the master gives its queued jobs to others); a polling process once the master
    /// took its workers' nodes.
    Left,
    /// Told to stop before it joined a run.
    NeverJoined,
}

/// What a worker knows when its master's connection ends while the run is on: the master may
/// have ended, or dropped this worker for a silence past its `--worker-timeout` (a suspended
/// process, a cut network).
const CLOSED_EARLY: &str = "the master closed the connection before the run ended: it ended or was killed, or \
                            dropped this worker for a silence longer than its --worker-timeout";

/// Why a worker process stopped before the run ended.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The master refused this worker, or is not one it can trust (wrong token or version).
    #[error("{0}")]
    Refused(String),
    /// The master's tree cannot be built here.
    #[error("{0}")]
    Tree(String),
    /// The master could not be reached.
    #[error("{0}")]
    Unreachable(String),
    /// The master went away or broke the protocol during the run (after this worker joined it).
    #[error("{0}")]
    Lost(String),
}

/// Builds the tree a master names, from the same registry the master uses.
pub type BuildTree<'a> = dyn Fn(&TreeSpec) -> Result<Arc<dyn Searcher>, String> + 'a;

/// The master's tree, built here from the same file as the master's.
fn tree_for(welcome: &Welcome, build: &BuildTree<'_>) -> Result<Arc<dyn Searcher>, String> {
    let tree = welcome.tree.command_line();
    let searcher = build(&welcome.tree).map_err(|e| format!("cannot build the master's tree '{tree}': {e}"))?;
    match (welcome.input_digest, searcher.input_digest()) {
        (Some(theirs), ours) if ours != Some(theirs) => Err(format!(
            "the master's tree '{tree}' reads a file that differs here from the master's copy (CRC-32 {} here, \
             {theirs:08x} on the master): give this host the same file",
            crate::digest_text(ours),
        )),
        _ => Ok(searcher),
    }
}

/// How long the handshake may take once connected.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Works for the master at `options.address` until its run ends. `build` makes the tree the master
/// names (from the same registry the master uses).
pub fn work_for(options: &RemoteOptions, build: &BuildTree<'_>) -> Result<Ended, RemoteError> {
    let joined = block_on(async {
        tokio::select! {
            // A failure before joining is not the loss of a master this worker worked for.
            joined = join(options) => joined.map(|j| j.ok_or(Ended::RunOver)).map_err(|e| match e {
                RemoteError::Lost(why) => RemoteError::Unreachable(why),
                e => e,
            }),
            () = options.stop.cancelled() => Ok(Err(Ended::NeverJoined)),
        }
    })?;
    let Joined { frames, write, handle, welcome, peer_listener, token } = match joined {
        Ok(joined) => joined,
        Err(ended) => {
            if ended == Ended::RunOver {
                tracing::info!("the run ended before this worker could join");
            }
            return Ok(ended);
        }
    };
    tracing::info!(tree = %welcome.tree.command_line(), "joined the run");
    let searcher = match tree_for(&welcome, build) {
        Ok(searcher) => searcher,
        Err(why) => {
            // The master hears why before the connection closes.
            let mut write = write;
            let mut out = Vec::new();
            push(WorkerFrame::Leaving { reason: why.clone() }, &mut out);
            let _ = block_on(async { tokio::time::timeout(Duration::from_secs(5), write.write_all(&out)).await });
            return Err(RemoteError::Tree(why));
        }
    };
    // A job's answer goes to the master in one frame, with its report around it.
    let answer_limit = MAX_FRAME - (1 << 20);
    let settings = RunnerSettings { keep_output: welcome.keep_output, answer_limit, ..RunnerSettings::default() };
    // A master silent this long is gone (it pings more often).
    let silence = Duration::from_millis(welcome.silence_ms.max(1));

    let (frames_tx, frames_rx) = unbounded_channel::<WorkerFrame>();
    let handle = Arc::new(handle);
    let writer = runtime().spawn(write_loop(write, Arc::clone(&handle), frames_rx));
    let result = match welcome.mode {
        WireMode::Budget => {
            drop(peer_listener);
            budget_worker(options, &searcher, settings, frames, silence, &frames_tx)
        }
        WireMode::Polling { split } => {
            let token = &token;
            let threads = options.threads;
            let polling = PollingProcess { searcher: &*searcher, settings, split, token, threads, stop: &options.stop };
            polling.run(&handle, frames, silence, &frames_tx, peer_listener)
        }
    };
    drop(frames_tx);
    let _ = block_on(writer);
    let _ = handle.shutdown(Shutdown::Both);
    result
}

/// Budget mode: one job loop per thread, fed through the connection.
fn budget_worker(
    options: &RemoteOptions,
    searcher: &Arc<dyn Searcher>,
    settings: RunnerSettings,
    mut master: Frames,
    silence: Duration,
    frames_tx: &FramesOut,
) -> Result<Ended, RemoteError> {
    let mut inboxes = Vec::new();
    let mut threads = Vec::new();
    for t in 0..options.threads {
        let mut runner = searcher.runner(settings).map_err(RemoteError::Tree)?;
        let (inbox_tx, inbox_rx) = mpsc::channel::<ToWorker>();
        inboxes.push(inbox_tx);
        let frames = frames_tx.clone();
        let thread = std::thread::Builder::new().name(format!("bts-worker-{t}")).spawn(move || {
            let mut send = |message| frames.send(WorkerFrame::Message { thread: t, message }).is_ok();
            run_worker(&mut *runner, &inbox_rx, &mut send, WorkerLoop::default());
        });
        threads.push(thread.map_err(|e| RemoteError::Lost(format!("cannot start a thread: {e}")))?);
    }
    // Read on the runtime's thread, which hands each message straight to its thread's inbox. The
    // threads end when it drops their inboxes (it went, or the process leaves) or tells them the
    // run is over; a leaving reader answers the master's pings until they have.
    let frames = frames_tx.clone();
    let (stop, threads_done) = (options.stop.clone(), CancellationToken::new());
    let done = threads_done.clone();
    let tree = Arc::clone(searcher);
    let reader = runtime().spawn(async move {
        let ended = read_loop(&mut master, silence, inboxes, &frames, &*tree, stop, done).await;
        // A master lost has put this process's jobs back in its list: the threads give up theirs
        // (a legacy program is killed), to join again or leave now rather than when they end.
        if ended.is_err() {
            tree.abandon();
        }
        ended
    });
    for t in threads {
        let _ = t.join();
    }
    threads_done.cancel();
    let result = block_on(reader)
        .unwrap_or_else(|e| Err(RemoteError::Lost(format!("the connection to the master failed: {e}"))));
    if result.as_ref().is_ok_and(|e| *e == Ended::Left) {
        // After the reports of the jobs done: the master gives the others what was queued here.
        let _ = frames_tx.send(WorkerFrame::Leave);
    }
    result
}

/// Random polling: this process's threads are polling workers, reached by the other processes'
/// workers through the peer server, and by the coordinator through the master connection.
struct PollingProcess<'a> {
    searcher: &'a dyn Searcher,
    settings: RunnerSettings,
    split: SplitRule,
    token: &'a [u8],
    threads: u32,
    stop: &'a CancellationToken,
}

impl PollingProcess<'_> {
    fn run(
        &self,
        stream: &std::net::TcpStream,
        mut master: Frames,
        silence: Duration,
        frames: &FramesOut,
        peer_listener: Option<(TcpListener, String)>,
    ) -> Result<Ended, RemoteError> {
        let lost = |e: String| RemoteError::Lost(e);
        // The master first says which workers this process's threads are.
        let mut early = Vec::new();
        let first = block_on(async {
            loop {
                match next_frame(&mut master, silence).await? {
                    Some(MasterFrame::Assigned { first }) => break Ok(Some(first)),
                    Some(MasterFrame::Ping { seq }) => {
                        let _ = frames.send(WorkerFrame::Pong { seq });
                    }
                    Some(other) => early.push(other),
                    // The run ended before this process got a part in it.
                    None => break Ok(None),
                }
            }
        });
        let Some(first) = first? else { return Ok(Ended::RunOver) };
        let (senders, inboxes): (Vec<_>, Vec<_>) = (0..self.threads).map(|_| mpsc::channel::<PeerMsg>()).unzip();
        let router = Arc::new(Router::new(self.token.to_vec(), first, senders, silence));
        let (listener, announced) = peer_listener.ok_or_else(|| lost("no peer listener".into()))?;
        // Serves the other processes' workers until this process's part of the run is over.
        let _peer_server = PeerServer::serve(listener, self.token.to_vec(), Arc::clone(&router))
            .map_err(|e| lost(format!("cannot serve peers: {e}")))?;
        router.set_address(announced);
        let shared = Arc::new(Shared {
            peers: Box::new(Arc::clone(&router)),
            termination: Termination::waves(first, self.threads),
            remaining: AtomicU64::new(u64::MAX),
            rule: self.split,
        });
        let seed = u64::from_le_bytes(auth::nonce()[..8].try_into().expect("8 bytes"));
        let mut threads = Vec::new();
        for (i, inbox) in inboxes.into_iter().enumerate() {
            let stack = self.searcher.stack_worker(self.settings).ok_or_else(|| {
                RemoteError::Tree("the master's tree cannot split its search (random polling)".into())
            })?;
            let (shared, frames) = (Arc::clone(&shared), frames.clone());
            let me = first + i as u32;
            let thread = std::thread::Builder::new().name(format!("bts-poll-{me}")).spawn(move || {
                let mut report = |r| frames.send(WorkerFrame::Report(r)).is_ok();
                if let Err(failure) = run_polling_worker(me, stack, Start::Await, inbox, shared, &mut report, seed) {
                    // The master fails the run: it cannot wait for this worker's pause.
                    let _ =
                        frames.send(WorkerFrame::Message { thread: i as u32, message: FromWorker::Failed(failure) });
                }
            });
            threads.push(thread.map_err(|e| lost(format!("cannot start a thread: {e}")))?);
        }

        let result = block_on(self.serve_master(&mut master, early, silence, &router, &shared, frames));
        // Whatever happened, the threads go. After an error, the master must see this process as
        // lost (it rolls the run back), never hear its threads report that they finished: their
        // stacks go with them. So the connection closes first.
        if result.is_err() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        for w in 0..self.threads {
            router.deliver_local(first + w, PeerMsg::Finish);
        }
        for t in threads {
            let _ = t.join();
        }
        result
    }

    /// Hands the master's frames (`early` first) to this process's workers until the run ends.
    async fn serve_master(
        &self,
        master: &mut Frames,
        early: Vec<MasterFrame>,
        silence: Duration,
        router: &Router,
        shared: &Shared,
        frames: &FramesOut,
    ) -> Result<Ended, RemoteError> {
        let mut early = early.into_iter();
        // The master ends the run by telling every worker to finish, then hangs up; so it does
        // when it lets this process leave.
        let mut finished = std::collections::BTreeSet::new();
        let mut leaving = false;
        loop {
            let next = match early.next() {
                Some(f) => Some(f),
                None => tokio::select! {
                    next = next_frame(master, silence) => next?,
                    () = self.stop.cancelled(), if !leaving => {
                        tracing::info!("asking the master to take this process's nodes and let it leave");
                        leaving = true;
                        let _ = frames.send(WorkerFrame::Leave);
                        continue;
                    }
                },
            };
            let frame = match next {
                Some(f) => f,
                None if finished.len() < self.threads as usize => {
                    return Err(RemoteError::Lost(CLOSED_EARLY.into()));
                }
                None if leaving => return Ok(Ended::Left),
                None => return Ok(Ended::RunOver),
            };
            if let MasterFrame::Peer { worker, message: PeerMsg::Finish } = &frame {
                finished.insert(*worker);
            }
            self.handle(frame, router, shared, frames)?;
        }
    }

    fn handle(
        &self,
        frame: MasterFrame,
        router: &Router,
        shared: &Shared,
        frames: &FramesOut,
    ) -> Result<(), RemoteError> {
        match frame {
            MasterFrame::Peer { worker, message } => {
                if !router.deliver_local(worker, message) {
                    return Err(RemoteError::Lost(format!(
                        "the master wrote to worker {worker}, not one of this process"
                    )));
                }
            }
            MasterFrame::Peers(table) => router.set_table(table),
            MasterFrame::Probe { wave } => {
                let _ = frames.send(WorkerFrame::Counts { wave, counts: shared.termination.snapshot() });
            }
            MasterFrame::Ping { seq } => {
                let _ = frames.send(WorkerFrame::Pong { seq });
            }
            other => return Err(unexpected(&other)),
        }
        Ok(())
    }
}

/// The next frame from the master, waiting at most three times `silence` (the master's
/// --worker-timeout: a master suspended for a while keeps its workers, which it would not drop as
/// silent once it carries on, and a polling run is not rolled back); `None` once the master hangs
/// up.
async fn next_frame(frames: &mut Frames, silence: Duration) -> Result<Option<MasterFrame>, RemoteError> {
    let silence = silence.saturating_mul(3);
    loop {
        let waited_from = std::time::Instant::now();
        return match tokio::time::timeout(silence, frames.next()).await {
            Ok(Some(Ok(frame))) => Ok(Some(frame)),
            Ok(None) => Ok(None),
            Ok(Some(Err(e))) => Err(RemoteError::Lost(match bad_frame(&e) {
                Some(bad) => format!("the master sent a bad frame: {bad}"),
                None => format!("the connection to the master failed: {e}"),
            })),
            // This process stood still (suspended, starved): the master gets a whole wait again.
            Err(_) if bts_protocol::runtime::stalls::since(waited_from) => continue,
            Err(_) => Err(RemoteError::Lost(format!(
                "no word from the master for {:.0} s: it is gone or unreachable",
                silence.as_secs_f64()
            ))),
        };
    }
}

/// The frame error a read error stands for, if it is one.
fn bad_frame(e: &io::Error) -> Option<&FrameError> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<FrameError>())
}

/// The text of an address file: where the master listens, its token if the file gives it, and the
/// cluster launch it belongs to ([`launch_id`]) if known.
pub fn address_file_text(address: &str, token: Option<&[u8]>, launch: Option<&str>) -> String {
    let mut text = format!("{address}\n");
    if let Some(t) = token {
        text += &format!("token {}\n", t.iter().map(|b| format!("{b:02x}")).collect::<String>());
    }
    text + &launch_line(launch)
}

/// What an address file says once its run is over, so that workers that start late do not wait.
pub fn address_file_finished(launch: Option<&str>) -> String {
    format!("{FINISHED}\n{}", launch_line(launch))
}

const FINISHED: &str = "finished";

/// What a rendezvous file says when rank 0 could not start the run (`why`, on one line), so that
/// the other ranks of the launch stop at once instead of waiting for a master that never comes.
pub fn address_file_failed(launch: &str, why: &str) -> String {
    let why = why.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    format!("{FAILED}\nlaunch {launch}\nreason {why}\n")
}

const FAILED: &str = "failed";

fn launch_line(launch: Option<&str>) -> String {
    launch.map_or_else(String::new, |l| format!("launch {l}\n"))
}

/// The cluster launch this process belongs to, as the launcher names it (OpenMPI's job, a PMIx
/// namespace, a Slurm job step), so that the ranks of one launch tell its rendezvous file from the
/// one a launch just before left behind; `None` outside a launcher that names its launches.
pub fn launch_id() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let slurm = || Some(format!("slurm-{}.{}", var("SLURM_JOB_ID")?, var("SLURM_STEP_ID").unwrap_or_default()));
    ["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"]
        .iter()
        .find_map(|name| var(name))
        .or_else(slurm)
        .filter(|id| id.chars().all(|c| c.is_ascii_graphic()))
}

/// What a master's address file says.
enum AddressFile {
    /// Not there (yet).
    Missing,
    /// The run it announced is over; written at the given time, by the given launch.
    Finished(std::time::SystemTime, Option<String>),
    /// Rank 0 of the given launch could not start the run, for this reason.
    Failed(Option<String>, String),
    /// Where the master listens, its token if the file gives one, and its launch.
    Address(String, Option<Vec<u8>>, Option<String>),
    /// Not an address file, for this reason (a rendezvous file's leftovers, or another file).
    Unknown(String),
}

fn read_address_file(path: &std::path::Path) -> Result<AddressFile, String> {
    // A pipe would block the read, and a device reads as anything.
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
    {
        let what = if m.is_dir() { "a folder" } else { "a pipe or a device" };
        return Ok(AddressFile::Unknown(format!("{} is {what}, not a regular file", path.display())));
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(AddressFile::Missing),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            return Ok(AddressFile::Unknown(format!("{} is not text", path.display())));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(address) = lines.next() else { return Ok(AddressFile::Missing) };
    let (mut token, mut launch, mut reason) = (None, None, None);
    for line in lines {
        if let Some(t) = line.strip_prefix("token ").and_then(unhex) {
            token = Some(t);
        } else if let Some(l) = line.strip_prefix("launch ") {
            launch = Some(l.to_string());
        } else if let Some(r) = line.strip_prefix("reason ").filter(|_| address == FAILED) {
            reason = Some(r.to_string());
        } else {
            let why = format!("{}: '{line}' is neither 'token <hex>' nor 'launch <id>'", path.display());
            return Ok(AddressFile::Unknown(why));
        }
    }
    if address == FAILED {
        return Ok(AddressFile::Failed(launch, reason.unwrap_or_default()));
    }
    if address == FINISHED {
        let written = std::fs::metadata(path).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        return Ok(AddressFile::Finished(written, launch));
    }
    if host_port(address).is_none() {
        return Ok(AddressFile::Unknown(format!("{}: '{address}' is not HOST:PORT", path.display())));
    }
    Ok(AddressFile::Address(address.to_string(), token, launch))
}

/// Whether the file at `path` may be replaced by a rendezvous file's text: it is missing, empty, or
/// an address file (of this run or one before), not another file given as the rendezvous file by
/// mistake (a checkpoint, an input, an output), which would be lost.
pub fn may_replace_address_file(path: &std::path::Path) -> bool {
    why_not_replaced(path).is_none()
}

/// Why a run must leave the file at `path` alone rather than make it its address file: it holds
/// something else, or cannot be read, or is no regular file. `None` if it may be replaced.
pub fn why_not_replaced(path: &std::path::Path) -> Option<String> {
    // The run's file would replace the link (and a device: it once replaced /dev/null), not the
    // file it names, and be removed at the run's end.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Some(format!("{} is a symbolic link", path.display()));
    }
    match read_address_file(path) {
        Err(why) | Ok(AddressFile::Unknown(why)) => Some(why),
        Ok(_) => None,
    }
}

/// The port of an address `HOST:PORT` (a name, an IPv4 address or a bracketed IPv6 one), if it
/// is one.
pub fn host_port(address: &str) -> Option<u16> {
    address.rsplit_once(':').filter(|(host, _)| !host.is_empty()).and_then(|(_, port)| port.parse().ok())
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Connects and completes the handshake, retrying until `options.retry_for` has passed (a master
/// that is still starting, or one that ends its run while this worker says hello); `None` if the
/// run ended before this worker could join.
async fn join(options: &RemoteOptions) -> Result<Option<Joined>, RemoteError> {
    let started = std::time::SystemTime::now();
    let deadline = Instant::now() + options.retry_for;
    loop {
        let Some((stream, address, token)) = connect(options, started, deadline).await? else { return Ok(None) };
        let _ = stream.set_nodelay(true);
        let handle = shutdown_handle(&stream).map_err(|e| RemoteError::Lost(e.to_string()))?;
        // Polling workers of other processes reach this one where they reach the master: a
        // listener, announced in the handshake (unused in budget mode).
        let listener = stream.local_addr().ok().and_then(|a| peer_listener(a.ip(), &address, &token));
        let peer_address = listener.as_ref().map(|(_, announced)| announced.clone());
        let handshake = handshake(stream, &address, &token, options.threads, peer_address);
        // Within what is left of the time to try (a second at least): a master that accepts but
        // does not answer (stopped, overloaded) holds a worker no longer than --retry.
        let limit =
            HANDSHAKE_TIMEOUT.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_secs(1));
        let handshake = tokio::time::timeout(limit, handshake)
            .await
            .unwrap_or_else(|_| Err(RemoteError::Lost(format!("the handshake took more than {} s", seconds(limit)))));
        match handshake {
            Ok((welcome, frames, write)) => {
                return Ok(Some(Joined { frames, write, handle, welcome, peer_listener: listener, token }));
            }
            Err(RemoteError::Lost(e)) if Instant::now() < deadline => {
                tracing::debug!("the handshake with {address} failed ({e}); trying again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Waits until the rendezvous file at `path` says its run is over (the master wrote its last
/// checkpoint), or `at_most` has passed. A worker rank that left because the launch is being
/// stopped waits so: `mpirun` kills every rank as soon as one exits once it has passed Ctrl-C on,
/// and a worker rank that left first would take the master down before it saved the run.
pub fn wait_for_the_end(path: &std::path::Path, at_most: Duration) -> bool {
    let deadline = Instant::now() + at_most;
    while Instant::now() < deadline {
        if let Ok(AddressFile::Finished(..)) = read_address_file(path) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A listener for the polling workers of other processes, and the address to announce for it.
///
/// It listens on `local`, the address this process reaches its master from, so that whoever
/// reaches the master reaches it too. But a process on the master's own host that dialled the
/// master by a host name which that host maps to a loopback address (Debian's `/etc/hosts` maps
/// its own name to 127.0.1.1) would listen on loopback, out of reach of the other hosts: it
/// listens on every interface instead and is announced by that name, as the master is. Only with
/// a token: a run without one has its master on loopback, and its peers stay there.
fn peer_listener(local: std::net::IpAddr, dialled: &str, token: &[u8]) -> Option<(TcpListener, String)> {
    let host = match dialled.rsplit_once(':') {
        Some((host, _)) if dialled.parse::<std::net::SocketAddr>().is_err() => host,
        _ => "",
    };
    let by_name = !host.is_empty() && !host.eq_ignore_ascii_case("localhost");
    if local.is_loopback() && by_name && !token.is_empty() {
        let unspecified: std::net::IpAddr = if local.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        };
        let listener = TcpListener::bind((unspecified, 0)).ok()?;
        let port = listener.local_addr().ok()?.port();
        return Some((listener, format!("{host}:{port}")));
    }
    let listener = TcpListener::bind((local, 0)).ok()?;
    let announced = listener.local_addr().ok()?.to_string();
    Some((listener, announced))
}

/// `d` in seconds as people write them: `60`, `2.5`, `0.3` (not `2.99999998`).
pub fn seconds(d: Duration) -> String {
    let tenths = (d.as_secs_f64() * 10.0).round() / 10.0;
    if tenths >= 10.0 || tenths.fract() == 0.0 { format!("{tenths:.0}") } else { format!("{tenths:.1}") }
}

/// The address file a worker reads (only a worker given one waits for its file).
fn file_path(master: &MasterAddress) -> &std::path::Path {
    match master {
        MasterAddress::File(p) | MasterAddress::Rendezvous(p) => p,
        MasterAddress::Fixed(_) => std::path::Path::new(""),
    }
}

/// A worker that has not reached its master after this long says that it waits.
const WAITING_SAID_AFTER: Duration = Duration::from_secs(2);

/// A cluster launch's ranks start within this long of each other: a `finished` rendezvous file older
/// than this process by more is left over from an earlier run. Only when the launcher does not name
/// its launches ([`launch_id`]): a fast run of the launch just before ends well within it.
const LAUNCH_SKEW: Duration = Duration::from_secs(10);

/// Connects, retrying until `deadline`; returns the stream, the address and the token to use, or
/// `None` if the rendezvous file says the run ended (since `started`, when this worker began).
async fn connect(
    options: &RemoteOptions,
    started: std::time::SystemTime,
    deadline: Instant,
) -> Result<Option<(TcpStream, String, Vec<u8>)>, RemoteError> {
    let mut pause = Duration::from_millis(5);
    // A worker started before its master says once, after a while, what it waits for.
    let mut say_waiting = Some(Instant::now() + WAITING_SAID_AFTER);
    let rendezvous = matches!(options.master, MasterAddress::Rendezvous(_));
    let ours = launch_id().filter(|_| rendezvous);
    // Whether a rendezvous file written by `launch` at `written` is this launch's.
    let this_launch = |launch: &Option<String>, written| match (&ours, launch) {
        (Some(ours), Some(theirs)) => ours == theirs,
        // Rank 0 of a launch that has a name writes it.
        (Some(_), None) => false,
        (None, _) => written + LAUNCH_SKEW >= started,
    };
    loop {
        let file = match &options.master {
            MasterAddress::Fixed(a) => AddressFile::Address(a.clone(), None, None),
            MasterAddress::File(path) | MasterAddress::Rendezvous(path) => {
                read_address_file(path).map_err(RemoteError::Refused)?
            }
        };
        // The address of an earlier launch's master (which may still run) is waited past, as is
        // the end of an earlier launch's run.
        // (Rank 0 of a launch that has a name writes it: an address without one is another run's.)
        let earlier = |launch: &Option<String>| match (&ours, launch) {
            (Some(o), Some(l)) => o != l,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let (address, token) = match file {
            AddressFile::Address(a, t, launch) if !earlier(&launch) => (a, t.unwrap_or_else(|| options.token.clone())),
            AddressFile::Finished(written, launch) if rendezvous && this_launch(&launch, written) => {
                return Ok(None);
            }
            // Only a launch that names itself can tell its own failure from an earlier one's.
            AddressFile::Failed(Some(launch), why) if rendezvous && ours.as_ref() == Some(&launch) => {
                return Err(RemoteError::Unreachable(format!("rank 0 (the master) could not start the run: {why}")));
            }
            // No bts wrote it: rank 0 refuses it too, and leaves it as it is.
            AddressFile::Unknown(why) if rendezvous => {
                let path = file_path(&options.master).display();
                return Err(RemoteError::Refused(format!(
                    "{why}: {path} is not a rendezvous file; remove it, or give --rendezvous a file of its own"
                )));
            }
            AddressFile::Unknown(why) => return Err(RemoteError::Refused(why)),
            file => {
                let (path, retry) = (file_path(&options.master), seconds(options.retry_for));
                let (awaited, lacked) = match file {
                    AddressFile::Missing if path.exists() => ("to hold an address", "held no address"),
                    AddressFile::Missing => ("to appear", "did not appear"),
                    _ => ("to name a master of this run", "named no master of this run"),
                };
                let path = path.display();
                if Instant::now() >= deadline {
                    let why = format!("the master's address file {path} {lacked} within {retry} s");
                    return Err(RemoteError::Unreachable(why));
                }
                if say_waiting.is_some_and(|at| Instant::now() >= at) {
                    say_waiting = None;
                    tracing::warn!("waiting for the master's address file {path} {awaited} (for {retry} s at most)");
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(200));
                continue;
            }
        };
        match connect_to(&address).await {
            Ok(s) => return Ok(Some((s, address, token))),
            Err(e) if Instant::now() >= deadline => {
                return Err(RemoteError::Unreachable(format!("cannot connect to the master at {address}: {e}")));
            }
            Err(e) => {
                if say_waiting.is_some_and(|at| Instant::now() >= at) {
                    say_waiting = None;
                    let retry = seconds(options.retry_for);
                    tracing::warn!("waiting for the master at {address} ({e}; trying for {retry} s at most)");
                }
                tracing::debug!("cannot connect to {address} yet: {e}");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Connects to the first of the addresses `address` names that answers within 5 s.
pub async fn connect_to(address: &str) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
    for a in resolve(address).await? {
        match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "no answer within 5 s"),
        }
    }
    Err(last)
}

async fn handshake(
    mut stream: TcpStream,
    address: &str,
    token: &[u8],
    threads: u32,
    peer_address: Option<String>,
) -> Result<(Welcome, Frames, OwnedWriteHalf), RemoteError> {
    let lost = |e: io::Error| RemoteError::Lost(format!("the connection failed during the handshake: {e}"));
    stream.write_all(&Preamble::CURRENT.to_bytes()).await.map_err(lost)?;
    let worker_nonce = auth::nonce();
    send_frame(&mut stream, &WorkerFrame::Hello { threads, nonce: worker_nonce, peer_address }).await.map_err(lost)?;
    let mut preamble = [0u8; PREAMBLE_LEN];
    stream.read_exact(&mut preamble).await.map_err(lost)?;
    let Some(theirs) = Preamble::parse(&preamble) else {
        return Err(RemoteError::Refused(format!("{address} is not a bts master")));
    };
    if theirs.version != PROTOCOL_VERSION {
        return Err(RemoteError::Refused(format!(
            "the master speaks protocol version {}, this worker version {PROTOCOL_VERSION}: run the same bts on both",
            theirs.version
        )));
    }
    let (read, mut write) = stream.into_split();
    // Until the master proves the token, it is a stranger: small frames only.
    let mut frames = FramedRead::new(read, FrameCodec::handshake());
    let master_nonce = match handshake_frame(&mut frames).await? {
        MasterFrame::Challenge { nonce, tag } if auth::verify_master(token, &worker_nonce, &nonce, &tag) => {
            frames.decoder_mut().authenticated();
            nonce
        }
        MasterFrame::Challenge { .. } if token.is_empty() => {
            return Err(RemoteError::Refused(
                "the master requires a token, and this worker has none: give --token-file F, the master's file".into(),
            ));
        }
        MasterFrame::Challenge { nonce, tag } if auth::verify_master(b"", &worker_nonce, &nonce, &tag) => {
            return Err(RemoteError::Refused(
                "the master has no token, and this worker has one: give the master the same --token-file".into(),
            ));
        }
        MasterFrame::Challenge { .. } => {
            return Err(RemoteError::Refused("wrong token: the master does not prove the same token".into()));
        }
        other => return Err(unexpected(&other)),
    };
    let tag = auth::worker_tag(token, &master_nonce, &worker_nonce);
    send_frame(&mut write, &WorkerFrame::Auth { tag }).await.map_err(lost)?;
    match handshake_frame(&mut frames).await? {
        MasterFrame::Welcome(w) => Ok((w, frames, write)),
        MasterFrame::Refused { reason } => {
            Err(RemoteError::Refused(format!("the master refused this worker: {reason}")))
        }
        other => Err(unexpected(&other)),
    }
}

async fn send_frame(stream: &mut (impl tokio::io::AsyncWrite + Unpin), frame: &WorkerFrame) -> io::Result<()> {
    let mut out = Vec::new();
    encode_frame(frame, &mut out).map_err(io::Error::other)?;
    stream.write_all(&out).await
}

fn unexpected(frame: &MasterFrame) -> RemoteError {
    let name = match frame {
        MasterFrame::Challenge { .. } => "Challenge",
        MasterFrame::Welcome(_) => "Welcome",
        MasterFrame::Refused { .. } => "Refused",
        MasterFrame::Message { .. } => "Message",
        MasterFrame::Ping { .. } => "Ping",
        MasterFrame::Assigned { .. } => "Assigned",
        MasterFrame::Peers(_) => "Peers",
        MasterFrame::Peer { .. } => "Peer",
        MasterFrame::Probe { .. } => "Probe",
    };
    RemoteError::Lost(format!("the master broke the protocol: an unexpected {name} frame"))
}

/// The master's next frame during the handshake.
async fn handshake_frame(frames: &mut Frames) -> Result<MasterFrame, RemoteError> {
    match frames.next().await {
        Some(Ok(frame)) => Ok(frame),
        None => Err(RemoteError::Lost("the master closed the connection during the handshake".into())),
        Some(Err(e)) => Err(RemoteError::Lost(match bad_frame(&e) {
            Some(bad) => format!("the master sent a bad frame: {bad}"),
            None => format!("the connection failed during the handshake: {e}"),
        })),
    }
}

/// Delivers the master's messages to the threads and answers pings, until the run ends (every
/// thread told to finish and the connection closed) or the master is lost. Once `stop` is
/// cancelled it drops the threads' inboxes (each ends after its current job) and the master's
/// messages, and answers pings until `threads_done`.
async fn read_loop(
    master: &mut Frames,
    silence: Duration,
    mut inboxes: Vec<Sender<ToWorker>>,
    frames: &FramesOut,
    searcher: &dyn Searcher,
    stop: CancellationToken,
    threads_done: CancellationToken,
) -> Result<Ended, RemoteError> {
    let threads = inboxes.len();
    let mut finished = vec![false; threads];
    let (mut leaving, mut barred) = (false, false);
    loop {
        let frame = tokio::select! {
            frame = next_frame(master, silence) => frame?,
            () = stop.cancelled(), if !leaving => {
                tracing::info!("leaving the run once the current jobs are done");
                // Soon: a failing legacy job is not tried again.
                searcher.stopping();
                leaving = true;
                inboxes.clear();
                continue;
            }
            () = threads_done.cancelled(), if leaving => return Ok(Ended::Left),
        };
        match frame {
            Some(MasterFrame::Message { .. }) if leaving => {}
            // At once, not after the threads' current jobs: it is about them.
            // And to the thread, between its jobs: it hands back those it has not started.
            Some(MasterFrame::Message { thread, message: ToWorker::Stopping }) => {
                searcher.stopping();
                if let Some(inbox) = inboxes.get(thread as usize) {
                    let _ = inbox.send(ToWorker::Stopping);
                }
            }
            // Sent to each thread: said once.
            Some(MasterFrame::Message { message: ToWorker::Barred(why), .. }) => {
                if !std::mem::replace(&mut barred, true) {
                    tracing::error!("the master gives this worker no more jobs: {why}");
                }
            }
            // The run ended as this process left.
            None if leaving => return Ok(Ended::Left),
            Some(MasterFrame::Message { thread, message }) => {
                let Some(inbox) = inboxes.get(thread as usize) else {
                    return Err(RemoteError::Lost(format!("the master wrote to thread {thread} of {threads}")));
                };
                if message == ToWorker::Finish {
                    finished[thread as usize] = true;
                    // The run is over (it may have failed with jobs still running here).
                    if finished.iter().all(|&f| f) {
                        searcher.abandon();
                    }
                }
                let _ = inbox.send(message);
            }
            Some(MasterFrame::Ping { seq }) => {
                let _ = frames.send(WorkerFrame::Pong { seq });
            }
            Some(other) => return Err(unexpected(&other)),
            None => {
                return match finished.iter().all(|&f| f) {
                    true => Ok(Ended::RunOver),
                    false => Err(RemoteError::Lost(CLOSED_EARLY.into())),
                };
            }
        }
    }
}

/// Sends the threads' frames, batching whatever is waiting into one write.
async fn write_loop(
    mut write: OwnedWriteHalf,
    handle: Arc<std::net::TcpStream>,
    mut frames: UnboundedReceiver<WorkerFrame>,
) {
    let mut out = Vec::with_capacity(64 * 1024);
    while let Some(frame) = frames.recv().await {
        push(frame, &mut out);
        while out.len() < (1 << 20) {
            match frames.try_recv() {
                Ok(frame) => push(frame, &mut out),
                Err(_) => break,
            }
        }
        if let Err(e) = write.write_all(&out).await {
            tracing::debug!("cannot write to the master: {e}");
            let _ = handle.shutdown(Shutdown::Both);
            return;
        }
        out.clear();
    }
}

/// Appends a frame. A batch of reports too large for one frame is sent report by report, and a
/// single report too large becomes a failure of its job, so that the run stops with a clear error
/// instead of the job being lost.
fn push(frame: WorkerFrame, out: &mut Vec<u8>) {
    let error = match encode_frame(&frame, out) {
        Ok(()) => return,
        Err(e) => e,
    };
    let WorkerFrame::Message { thread, message: FromWorker::Reports(batch) } = frame else {
        tracing::error!("cannot send a frame to the master: {error}");
        return;
    };
    let ReportBatch { reports, returned, output, mut solutions } = batch;
    let (mut returned, mut output_at) = (returned.into_iter(), 0usize);
    for report in reports {
        let nodes: Vec<_> = returned.by_ref().take(report.returned as usize).collect();
        let end = output_at + report.output_bytes as usize;
        let output = output[output_at..end].to_vec();
        // The solutions go with the first report, ahead of any that may have pruned with them.
        let solutions = std::mem::take(&mut solutions);
        let single = ReportBatch { reports: vec![report.clone()], returned: nodes, output, solutions };
        output_at = end;
        let frame = WorkerFrame::Message { thread, message: FromWorker::Reports(single) };
        if encode_frame(&frame, out).is_err() {
            let message = format!(
                "its answer is larger than the {} MiB a remote worker can send in one frame: give jobs smaller \
                 budgets, or leave them to the master's own workers",
                MAX_FRAME >> 20
            );
            let failure = JobFailure::new(report.id, "(not kept)", message);
            let _ = encode_frame(&WorkerFrame::Message { thread, message: FromWorker::Failed(failure) }, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn seconds_read_as_people_write_them() {
        let s = |x: f64| seconds(Duration::from_secs_f64(x));
        assert_eq!([s(60.0), s(2.5), s(2.99999998), s(0.3), s(12.7)], ["60", "2.5", "3", "0.3", "13"]);
    }

    /// Where a listener from [`peer_listener`] listens, and what it is announced as.
    fn peer_listener_at(local: IpAddr, dialled: &str, token: &[u8]) -> (IpAddr, String, u16) {
        let (listener, announced) = peer_listener(local, dialled, token).expect("a listener");
        let bound = listener.local_addr().unwrap();
        (bound.ip(), announced, bound.port())
    }

    #[test]
    fn a_process_that_reached_its_master_by_name_through_loopback_listens_for_peers_everywhere() {
        // The master's host maps its own name to loopback: other hosts must reach this process
        // too, by that name.
        let (ip, announced, port) = peer_listener_at(LOOPBACK, "node0:7000", b"token");
        assert!(ip.is_unspecified(), "{ip}");
        assert_eq!(announced, format!("node0:{port}"));
        // Dialled by a loopback address, or as localhost, or in a run without a token (whose
        // master is on loopback only): the run is on this host, and so are its peers.
        for (dialled, token) in [("127.0.0.1:7000", &b"token"[..]), ("localhost:7000", b"token"), ("node0:7000", b"")] {
            let (ip, announced, port) = peer_listener_at(LOOPBACK, dialled, token);
            assert_eq!((ip, announced), (LOOPBACK, format!("127.0.0.1:{port}")), "{dialled}");
        }
    }
}
