//! Remote workers over TCP, the master's side: accepting connections, the handshake, and a reader
//! and a writer task per connection (on the process's tokio runtime, see
//! [`bts_protocol::runtime`]) that turn frames into [`Event`]s and back. The driver stays on its
//! thread: it receives events through a std channel and sends through the tasks' unbounded ones.
//!
//! A remote process with N threads joins as N workers, one per thread; its frames carry the thread
//! they concern. Anything a peer does wrong — a stranger's bytes, a wrong version or token, a frame
//! out of order, an oversized length, silence — costs only that peer's connection, with a log line;
//! its jobs go back to the job list.

use crate::driver::{Event, Link, ProcessLink};
use crate::scheduler::{Place, WorkerId};
use bts_protocol::codec::{FrameCodec, MAX_FRAME, encode_frame};
use bts_protocol::handshakes::{AcceptFailures, Handshakes, InHandshake, MAX_HANDSHAKES, Throttle};
use bts_protocol::polling::PeerMsg;
use bts_protocol::runtime::{block_on, runtime, shutdown_handle};
use bts_protocol::wire::WireMode;
use bts_protocol::wire::{PREAMBLE_LEN, PROTOCOL_VERSION};
use bts_protocol::{FromWorker, JobFailure, MasterFrame, Preamble, ToWorker, Welcome, WorkerFrame, auth};
use futures_util::StreamExt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How the master receives remote workers.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// The shared token (empty when listening on loopback without one).
    pub token: Vec<u8>,
    /// What every worker is told after the handshake.
    pub welcome: Welcome,
    /// Workers' connections beyond this many at once are refused (connections still in their
    /// handshake are bounded apart, see [`Handshakes`]).
    pub max_connections: usize,
    /// A peer must complete the handshake within this time.
    pub handshake_timeout: Duration,
}

/// The most threads one remote process may bring.
const MAX_THREADS: u32 = 4096;

/// A running TCP server for remote workers.
pub struct Server {
    addr: SocketAddr,
    accept: JoinHandle<()>,
    /// Every connection's tasks, waited for at the end.
    tasks: TaskTracker,
    /// Cancelled at the end: a connection's reader stops, its writer says the run is over.
    over: CancellationToken,
}

impl Server {
    /// Accepts remote workers on `listener`; their threads become workers numbered from `first_id`.
    pub fn start(
        listener: std::net::TcpListener,
        config: NetConfig,
        events: Sender<Event>,
        first_id: WorkerId,
    ) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let listener = {
            let _runtime = runtime().enter();
            TcpListener::from_std(listener)?
        };
        let (tasks, over) = (TaskTracker::new(), CancellationToken::new());
        let shared = Shared {
            config: Arc::new(config),
            events,
            ids: Arc::new(AtomicU64::new(first_id)),
            active: Arc::new(AtomicUsize::new(0)),
            handshakes: Handshakes::new(MAX_HANDSHAKES),
            tasks: tasks.clone(),
            over: over.clone(),
        };
        let accept = runtime().spawn(accept_loop(listener, shared));
        Ok(Self { addr, accept, tasks, over })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, then waits up to `grace` for every worker to be told that the run is over,
    /// also one still in its handshake; not for the workers to hang up. Call this once the driver's
    /// events are dropped, so that the links of workers it never saw go at once.
    pub fn finish(self, grace: Duration) {
        self.accept.abort();
        self.over.cancel();
        block_on(async {
            let _ = self.accept.await;
            self.tasks.close();
            let _ = tokio::time::timeout(grace, self.tasks.wait()).await;
        });
    }
}

#[derive(Clone)]
struct Shared {
    config: Arc<NetConfig>,
    events: Sender<Event>,
    ids: Arc<AtomicU64>,
    /// Authenticated connections.
    active: Arc<AtomicUsize>,
    handshakes: Arc<Handshakes>,
    tasks: TaskTracker,
    over: CancellationToken,
}

/// Counts a live connection until dropped.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept_loop(listener: TcpListener, shared: Shared) {
    // Evictions are logged at most once a second, with how many there were.
    let mut evictions = Throttle::new(Duration::from_secs(1));
    let mut failures = AcceptFailures::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors, typically: try again once some close.
                tokio::time::sleep(failures.failed(&e, "the master")).await;
                continue;
            }
        };
        // Its handle takes a descriptor too: out of them, the connection goes, and the next
        // accept waits as after a failed one.
        let handle = match shutdown_handle(&stream) {
            Ok(h) => Arc::new(h),
            Err(e) => {
                drop(stream);
                tokio::time::sleep(failures.failed(&e, "the master")).await;
                continue;
            }
        };
        failures.accepted();
        let (in_handshake, made_room) = shared.handshakes.admit(&handle);
        if let Some(quiet) = made_room.then(|| evictions.note(Instant::now())).flatten() {
            tracing::warn!(
                "{MAX_HANDSHAKES} connections in their handshake: the oldest dropped to make room \
                 ({} since the last such line)",
                quiet + 1
            );
        }
        shared.tasks.spawn(serve_connection(stream, handle, peer.to_string(), shared.clone(), in_handshake));
    }
}

/// How long a handshake under way when the run ends may still take.
const LATE_HANDSHAKE: Duration = Duration::from_secs(1);

/// A connection's halves: frames read with the limits of the handshake until it is over.
type Frames = FramedRead<OwnedReadHalf, FrameCodec<WorkerFrame>>;

async fn serve_connection(
    stream: TcpStream,
    handle: Arc<std::net::TcpStream>,
    peer: String,
    shared: Shared,
    in_handshake: InHandshake,
) {
    let peer = peer.as_str();
    let _ = stream.set_nodelay(true);
    let config = &shared.config;
    let handshake = tokio::time::timeout(config.handshake_timeout, handshake(stream, config));
    tokio::pin!(handshake);
    let handshake = tokio::select! {
        handshake = &mut handshake => handshake,
        // The run is over: a worker in its handshake (a few round trips) is told so when it has
        // joined; a stranger that stalls in it does not hold the end up.
        () = shared.over.cancelled() => match tokio::time::timeout(LATE_HANDSHAKE, &mut handshake).await {
            Ok(handshake) => handshake,
            Err(_) => return,
        },
    };
    let Some((threads, peer_address, mut frames, mut writer)) =
        in_handshake.end(handshake, &handle, peer, "connection")
    else {
        return;
    };
    // Slots are for authenticated workers only: strangers cannot take them.
    if shared.active.fetch_add(1, Ordering::SeqCst) >= config.max_connections {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        let max = config.max_connections;
        tracing::warn!(%peer, "refused: already {max} workers' connections");
        let reason = format!("the master already serves {max} connections of workers");
        let _ = send_frame(&mut writer, &MasterFrame::Refused { reason }).await;
        let _ = handle.shutdown(Shutdown::Both);
        return;
    }
    let _active = Active(Arc::clone(&shared.active));
    let polling = matches!(config.welcome.mode, WireMode::Polling { .. });
    let silence = Duration::from_millis(config.welcome.silence_ms);
    let (tx, rx) = unbounded_channel::<MasterFrame>();
    let ping = Arc::new(Mutex::new(None));
    let heartbeat = Duration::from_millis(config.welcome.heartbeat_ms);
    // In budget mode the end of the run reaches each thread as Finish; polling workers are told by
    // the coordinator.
    let finishes = if polling { 0 } else { threads };
    // Set once the worker is told to finish: its hanging up then is no loss.
    let told_to_finish = Arc::new(AtomicBool::new(false));
    let write = write_loop(
        writer,
        Arc::clone(&handle),
        rx,
        (finishes, Arc::clone(&told_to_finish)),
        heartbeat,
        Arc::clone(&ping),
    );
    shared.tasks.spawn(write);
    if polling {
        let process = shared.ids.fetch_add(1, Ordering::SeqCst);
        tracing::info!(%peer, threads, process, "remote polling worker joined");
        let link = Box::new(tx);
        if shared.events.send(Event::ProcessJoined { process, threads, peer_address, link }).is_err() {
            return;
        }
        let ended = tokio::select! {
            ended = read_polling(&mut frames, silence, process, peer, &shared.events) => ended,
            // The run is over: the writer says so; the worker's goodbye is not waited for.
            () = shared.over.cancelled() => return,
        };
        match ended {
            Ended::RunOver => return,
            // A worker that leaves says so first, and is told to finish: a connection closed
            // before is a loss.
            Ended::Closed if !told_to_finish.load(Ordering::SeqCst) => {
                tracing::warn!(%peer, process, "remote polling worker lost: its connection closed")
            }
            Ended::Closed | Ended::Left => tracing::info!(%peer, process, "remote polling worker left"),
            Ended::Broken(why) => tracing::warn!(%peer, process, "remote polling worker dropped: {why}"),
        }
        let _ = handle.shutdown(Shutdown::Both);
        let _ = shared.events.send(Event::ProcessLeft(process));
        return;
    }
    let first = shared.ids.fetch_add(u64::from(threads), Ordering::SeqCst);
    tracing::info!(%peer, threads, first_worker = first, "remote worker joined");
    // Local threads are at Place::LOCAL (0), and take the first worker ids.
    let place = Place(first + 1);
    for t in 0..threads {
        let worker = first + u64::from(t);
        let events = shared.events.clone();
        let link = TcpLink { tx: tx.clone(), thread: t, worker, events, stream: Arc::clone(&handle) };
        if shared.events.send(Event::Joined { worker, threads: 1, place, link: Box::new(link) }).is_err() {
            return;
        }
    }
    drop(tx);
    let reason = tokio::select! {
        reason = read_loop(&mut frames, silence, (first, threads), peer, &shared.events, &ping) => reason,
        () = shared.over.cancelled() => return,
    };
    match &reason {
        Ended::RunOver => return,
        Ended::Closed if !told_to_finish.load(Ordering::SeqCst) => {
            tracing::warn!(%peer, first_worker = first, "remote worker lost: its connection closed")
        }
        Ended::Closed => tracing::info!(%peer, first_worker = first, "remote worker left at the run's end"),
        Ended::Broken(why) => tracing::warn!(%peer, first_worker = first, "remote worker dropped: {why}"),
        Ended::Left => tracing::info!(%peer, first_worker = first, "remote worker told to stop left the run"),
    }
    let _ = handle.shutdown(Shutdown::Both);
    for t in 0..threads {
        let worker = first + u64::from(t);
        let _ =
            shared.events.send(if reason == Ended::Left { Event::Left(worker) } else { Event::Disconnected(worker) });
    }
}

/// The master's half of the handshake: returns the worker's thread count, its peer address, and the
/// connection's frames (holding any bytes already received after the handshake) and writing half.
async fn handshake(
    mut stream: TcpStream,
    config: &NetConfig,
) -> Result<(u32, Option<String>, Frames, OwnedWriteHalf), String> {
    let mut preamble = [0u8; PREAMBLE_LEN];
    stream.read_exact(&mut preamble).await.map_err(during_handshake)?;
    let Some(theirs) = Preamble::parse(&preamble) else {
        return Err(format!("not a bts worker (it began with {:?})", String::from_utf8_lossy(&preamble)));
    };
    stream.write_all(&Preamble::CURRENT.to_bytes()).await.map_err(|e| e.to_string())?;
    if theirs.version != PROTOCOL_VERSION {
        return Err(format!("it speaks protocol version {}, this master version {PROTOCOL_VERSION}", theirs.version));
    }
    let (read, mut write) = stream.into_split();
    let mut frames = FramedRead::new(read, FrameCodec::handshake());
    let (threads, worker_nonce, peer_address) = match next_frame(&mut frames).await? {
        WorkerFrame::Hello { threads, nonce, peer_address } if (1..=MAX_THREADS).contains(&threads) => {
            (threads, nonce, peer_address)
        }
        WorkerFrame::Hello { threads, .. } => return Err(format!("it offers {threads} threads")),
        other => return Err(format!("out of order: {} before the handshake", frame_name(&other))),
    };
    let master_nonce = auth::nonce();
    let tag = auth::master_tag(&config.token, &worker_nonce, &master_nonce);
    send_frame(&mut write, &MasterFrame::Challenge { nonce: master_nonce, tag }).await?;
    let answer = next_frame(&mut frames).await.map_err(|e| {
        format!("{e}, after the challenge: the worker does not accept this master's token (they differ), or it ended as it joined")
    })?;
    match answer {
        WorkerFrame::Auth { tag } if auth::verify_worker(&config.token, &master_nonce, &worker_nonce, &tag) => {
            frames.decoder_mut().authenticated();
        }
        WorkerFrame::Auth { .. } => {
            let _ = send_frame(&mut write, &MasterFrame::Refused { reason: "wrong token".into() }).await;
            return Err("wrong token".into());
        }
        other => return Err(format!("out of order: {} instead of Auth", frame_name(&other))),
    }
    send_frame(&mut write, &MasterFrame::Welcome(config.welcome.clone())).await?;
    Ok((threads, peer_address, frames, write))
}

fn during_handshake(e: io::Error) -> String {
    if e.kind() == io::ErrorKind::UnexpectedEof { "closed during the handshake".into() } else { e.to_string() }
}

fn frame_name(frame: &WorkerFrame) -> &'static str {
    match frame {
        WorkerFrame::Hello { .. } => "Hello",
        WorkerFrame::Auth { .. } => "Auth",
        WorkerFrame::Message { .. } => "Message",
        WorkerFrame::Pong { .. } => "Pong",
        WorkerFrame::Report(_) => "Report",
        WorkerFrame::Counts { .. } => "Counts",
        WorkerFrame::Leaving { .. } => "Leaving",
        WorkerFrame::Leave => "Leave",
    }
}

/// The next frame of the handshake.
async fn next_frame(frames: &mut Frames) -> Result<WorkerFrame, String> {
    match frames.next().await {
        Some(Ok(frame)) => Ok(frame),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("closed during the handshake".into()),
    }
}

async fn send_frame(write: &mut OwnedWriteHalf, frame: &MasterFrame) -> Result<(), String> {
    let mut out = Vec::new();
    encode_frame(frame, &mut out).map_err(|e| e.to_string())?;
    write.write_all(&out).await.map_err(|e| e.to_string())
}

/// The last ping sent: its number and when.
type LastPing = Mutex<Option<(u64, Instant)>>;

/// How a connection ended.
#[derive(PartialEq, Eq)]
enum Ended {
    /// The worker hung up.
    Closed,
    /// The run is over (the driver has gone): the writer tells the worker and ends the connection,
    /// which must not be cut before it has.
    RunOver,
    /// Silence, a broken connection or a protocol violation.
    Broken(String),
    /// A budget-mode worker told to stop: its last reports came before.
    Left,
}

/// Reads frames until the connection ends or `on_frame` ends it; returns why it ended.
async fn read_frames(
    frames: &mut Frames,
    silence: Duration,
    mut on_frame: impl FnMut(WorkerFrame) -> Result<(), Ended>,
) -> Ended {
    loop {
        let waited_from = Instant::now();
        match tokio::time::timeout(silence, frames.next()).await {
            Ok(Some(Ok(frame))) => {
                if let Err(ended) = on_frame(frame) {
                    return ended;
                }
            }
            Ok(None) => return Ended::Closed,
            Ok(Some(Err(e))) => return Ended::Broken(e.to_string()),
            // This process stood still (suspended, starved): the worker gets a whole wait again.
            Err(_) if bts_protocol::runtime::stalls::since(waited_from) => {
                tracing::info!("this process stood still; the workers get another {:.1} s", silence.as_secs_f64());
            }
            Err(_) => return Ended::Broken(format!("silent for {:.1} s", silence.as_secs_f64())),
        }
    }
}

/// Reads a budget-mode process's frames until the connection ends.
async fn read_loop(
    frames: &mut Frames,
    silence: Duration,
    (first, threads): (WorkerId, u32),
    peer: &str,
    events: &Sender<Event>,
    ping: &LastPing,
) -> Ended {
    read_frames(frames, silence, |frame| match frame {
        WorkerFrame::Message { thread, mut message } if thread < threads => {
            // Of fifty machines, the one whose program failed.
            if let FromWorker::Failed(failure) = &mut message {
                failure.message = format!("{} (on the remote worker at {peer})", failure.message);
            }
            events.send(Event::Message(first + u64::from(thread), message)).map_err(|_| Ended::RunOver)
        }
        WorkerFrame::Message { thread, .. } => {
            Err(Ended::Broken(format!("a message for thread {thread} of {threads}")))
        }
        WorkerFrame::Pong { seq } => {
            let sent = *ping.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((s, at)) = sent
                && s == seq
            {
                let rtt = at.elapsed();
                for t in 0..threads {
                    let _ = events.send(Event::Latency { worker: first + u64::from(t), rtt });
                }
            }
            Ok(())
        }
        WorkerFrame::Leaving { reason } => Err(Ended::Broken(format!("it left: {reason}"))),
        WorkerFrame::Leave => Err(Ended::Left),
        other => Err(Ended::Broken(format!("out of order: {} after the handshake", frame_name(&other)))),
    })
    .await
}

/// Reads a polling process's frames until the connection ends.
async fn read_polling(
    frames: &mut Frames,
    silence: Duration,
    process: u64,
    peer: &str,
    events: &Sender<Event>,
) -> Ended {
    read_frames(frames, silence, |frame| {
        let event = match frame {
            WorkerFrame::Report(report) => Event::Poll(report),
            // One of its threads died, and its stack with it.
            WorkerFrame::Message { message: FromWorker::Failed(mut failure), .. } => {
                failure.message = format!("{} (on the remote worker at {peer})", failure.message);
                Event::Died(failure)
            }
            WorkerFrame::Counts { wave, counts } => Event::Counts { process, wave, counts },
            WorkerFrame::Leave => Event::ProcessLeaving(process),
            WorkerFrame::Pong { .. } => return Ok(()),
            WorkerFrame::Leaving { reason } => return Err(Ended::Broken(format!("it left: {reason}"))),
            other => return Err(Ended::Broken(format!("out of order: {} in a polling run", frame_name(&other)))),
        };
        events.send(event).map_err(|_| Ended::RunOver)
    })
    .await
}

/// Sends frames as they come, a ping every `heartbeat`; ends when the connection fails, or when
/// every link is dropped: the run is over for this worker, so after what is left it gets `Finish`
/// for every thread (also when it joined too late for the driver to see it).
async fn write_loop(
    mut write: OwnedWriteHalf,
    handle: Arc<std::net::TcpStream>,
    mut rx: UnboundedReceiver<MasterFrame>,
    (threads, told_to_finish): (u32, Arc<AtomicBool>),
    heartbeat: Duration,
    ping: Arc<LastPing>,
) {
    let note_finish = |frame: &MasterFrame| {
        let told = matches!(
            frame,
            MasterFrame::Message { message: ToWorker::Finish, .. } | MasterFrame::Peer { message: PeerMsg::Finish, .. }
        );
        if told {
            told_to_finish.store(true, Ordering::SeqCst);
        }
    };
    let mut out = Vec::with_capacity(64 * 1024);
    let mut seq = 0u64;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            frame = rx.recv() => {
                let Some(frame) = frame else { break };
                note_finish(&frame);
                let mut fits = push(&frame, &mut out);
                // Whatever else is queued goes in the same write.
                while fits && out.len() < (1 << 20) {
                    match rx.try_recv() {
                        Ok(frame) => {
                            note_finish(&frame);
                            fits = push(&frame, &mut out);
                        }
                        Err(_) => break,
                    }
                }
                if !fits {
                    // A message that cannot be sent: drop the worker, so its jobs go back to L.
                    let _ = handle.shutdown(Shutdown::Both);
                    return;
                }
            }
            _ = ticks.tick() => {
                seq += 1;
                *ping.lock().unwrap_or_else(|e| e.into_inner()) = Some((seq, Instant::now()));
                let _ = push(&MasterFrame::Ping { seq }, &mut out);
            }
        }
        if let Err(e) = write.write_all(&out).await {
            tracing::debug!("cannot write to a remote worker: {e}");
            let _ = handle.shutdown(Shutdown::Both);
            return;
        }
        out.clear();
    }
    told_to_finish.store(true, Ordering::SeqCst);
    for thread in 0..threads {
        let _ = push(&MasterFrame::Message { thread, message: ToWorker::Finish }, &mut out);
    }
    let _ = write.write_all(&out).await;
    let _ = handle.shutdown(Shutdown::Write);
}

/// Appends a frame; false (with a log line) if it cannot be encoded.
fn push(frame: &MasterFrame, out: &mut Vec<u8>) -> bool {
    match encode_frame(frame, out) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!("cannot send a frame to a remote worker: {e}");
            false
        }
    }
}

/// A remote polling process, as the driver sees it.
impl ProcessLink for UnboundedSender<MasterFrame> {
    fn send(&self, frame: MasterFrame) -> bool {
        UnboundedSender::send(self, frame).is_ok()
    }
}

/// A remote worker thread, as the driver sees it.
struct TcpLink {
    tx: UnboundedSender<MasterFrame>,
    thread: u32,
    worker: WorkerId,
    /// The driver's events, for the failure of a job too large to send.
    events: Sender<Event>,
    stream: Arc<std::net::TcpStream>,
}

/// Bytes of a frame of jobs beside their nodes' own, with room to spare.
const FRAME_ROOM: usize = 64 << 10;

impl Link for TcpLink {
    fn send(&self, message: ToWorker) -> bool {
        let send = |message| self.tx.send(MasterFrame::Message { thread: self.thread, message }).is_ok();
        let jobs = match message {
            ToWorker::Jobs(jobs) if jobs.iter().map(|j| j.node.len()).sum::<usize>() + FRAME_ROOM > MAX_FRAME => jobs,
            message => return send(message),
        };
        // Too much for one frame: a frame a job. A node too large for any frame fails its job, as
        // a report too large does on the worker's side (the worker was dropped, and its jobs went
        // to the next one, and the next, until none was left and the run waited for ever).
        for job in jobs {
            if job.node.len() + FRAME_ROOM <= MAX_FRAME {
                if !send(ToWorker::Jobs(vec![job])) {
                    return false;
                }
                continue;
            }
            let message = format!(
                "its node, of {} bytes, is larger than the {} MiB frames that reach remote workers: run it on local workers",
                job.node.len(),
                MAX_FRAME >> 20
            );
            let failure = JobFailure::new(job.id, format!("<{} bytes>", job.node.len()), message);
            if self.events.send(Event::Message(self.worker, FromWorker::Failed(failure))).is_err() {
                return false;
            }
        }
        true
    }

    fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bts_protocol::TreeSpec;
    use bts_protocol::codec::FrameDecoder;
    use std::io::{Read, Write};

    fn send(stream: &mut std::net::TcpStream, frame: &WorkerFrame) {
        let mut out = Vec::new();
        encode_frame(frame, &mut out).unwrap();
        stream.write_all(&out).unwrap();
    }

    /// The master's next frame, or `None` at the end of the connection.
    fn next(stream: &mut std::net::TcpStream, decoder: &mut FrameDecoder) -> Option<MasterFrame> {
        loop {
            if let Some(frame) = decoder.decode::<MasterFrame>().unwrap() {
                return Some(frame);
            }
            let mut buf = [0u8; 4096];
            match stream.read(&mut buf).unwrap() {
                0 => return None,
                n => decoder.feed(&buf[..n]),
            }
        }
    }

    /// A worker connection up to the master's challenge: the stream, its frames, and the nonces.
    struct Joining {
        stream: std::net::TcpStream,
        decoder: FrameDecoder,
        nonces: (bts_protocol::wire::Nonce, bts_protocol::wire::Nonce),
    }

    fn join_until_challenge(server: &Server, threads: u32) -> Joining {
        let mut stream = std::net::TcpStream::connect(server.local_addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let nonce = auth::nonce();
        stream.write_all(&Preamble::CURRENT.to_bytes()).unwrap();
        send(&mut stream, &WorkerFrame::Hello { threads, nonce, peer_address: None });
        let mut preamble = [0u8; PREAMBLE_LEN];
        stream.read_exact(&mut preamble).unwrap();
        let mut decoder = FrameDecoder::new();
        let Some(MasterFrame::Challenge { nonce: theirs, .. }) = next(&mut stream, &mut decoder) else {
            panic!("no challenge")
        };
        Joining { stream, decoder, nonces: (nonce, theirs) }
    }

    impl Joining {
        fn answer(&mut self) {
            let (ours, theirs) = self.nonces;
            send(&mut self.stream, &WorkerFrame::Auth { tag: auth::worker_tag(b"", &theirs, &ours) });
            assert!(matches!(self.next(), Some(MasterFrame::Welcome(_))));
        }

        fn next(&mut self) -> Option<MasterFrame> {
            next(&mut self.stream, &mut self.decoder)
        }

        /// Reads what is left: `Finish` for each thread, then the end of the connection.
        fn expect_the_end(&mut self, threads: u32) {
            for thread in 0..threads {
                assert_eq!(self.next(), Some(MasterFrame::Message { thread, message: ToWorker::Finish }));
            }
            assert_eq!(self.next(), None);
        }
    }

    #[test]
    fn every_worker_is_told_that_the_run_is_over_and_the_master_does_not_wait_for_goodbyes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let welcome = Welcome {
            tree: TreeSpec::new("queens", ["--n", "4"]),
            keep_output: true,
            heartbeat_ms: 1000,
            silence_ms: 20_000,
            mode: WireMode::Budget,
            input_digest: None,
        };
        let config =
            NetConfig { token: Vec::new(), welcome, max_connections: 4, handshake_timeout: Duration::from_secs(20) };
        let (events, received) = std::sync::mpsc::channel();
        let server = Server::start(listener, config, events, 0).unwrap();

        // A worker that joined during the run, and never hangs up.
        let mut joined = join_until_challenge(&server, 1);
        joined.answer();
        let event = received.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(event, Event::Joined { worker: 0, .. }));
        // A worker still in its handshake when the run ends.
        let mut late = join_until_challenge(&server, 2);

        // The run ends: the driver's events (and links) go, then the server.
        drop((event, received));
        let grace = Duration::from_secs(15);
        let finishing = std::thread::spawn(move || server.finish(grace));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!finishing.is_finished(), "the master went with a handshake under way");
        late.answer();
        late.expect_the_end(2);
        joined.expect_the_end(1);
        let told = Instant::now();
        while !finishing.is_finished() {
            assert!(told.elapsed() < Duration::from_secs(5), "the master waits for a worker to hang up");
            std::thread::sleep(Duration::from_millis(10));
        }
        finishing.join().unwrap();
    }
}
