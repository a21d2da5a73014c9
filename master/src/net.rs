//! Remote workers over TCP, the master's side: accepting connections, the handshake, and a reader
//! and a writer thread per connection that turn frames into [`Event`]s and back.
//!
//! A remote process with N threads joins as N workers, one per thread; its frames carry the thread
//! they concern. Anything a peer does wrong — a stranger's bytes, a wrong version or token, a frame
//! out of order, an oversized length, silence — costs only that peer's connection, with a log line;
//! its jobs go back to the job list.

use crate::driver::{Event, Link, ProcessLink};
use crate::scheduler::WorkerId;
use bts_protocol::codec::{FrameDecoder, encode_frame, write_frame};
use bts_protocol::handshakes::{Handshakes, InHandshake, MAX_HANDSHAKES};
use bts_protocol::wire::WireMode;
use bts_protocol::wire::{PREAMBLE_LEN, PROTOCOL_VERSION, local_address};
use bts_protocol::{MasterFrame, Preamble, ToWorker, Welcome, WorkerFrame, auth};
use serde::de::DeserializeOwned;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    writers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Server {
    /// Accepts remote workers on `listener`; their threads become workers numbered from `first_id`.
    pub fn start(
        listener: TcpListener,
        config: NetConfig,
        events: Sender<Event>,
        first_id: WorkerId,
    ) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let writers = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            config: Arc::new(config),
            events,
            ids: Arc::new(AtomicU64::new(first_id)),
            active: Arc::new(AtomicUsize::new(0)),
            handshakes: Handshakes::new(MAX_HANDSHAKES),
            writers: Arc::clone(&writers),
        };
        let stop_flag = Arc::clone(&stop);
        let accept = std::thread::Builder::new()
            .name("bts-accept".into())
            .spawn(move || accept_loop(listener, shared, stop_flag))?;
        Ok(Self { addr, stop, accept: Some(accept), writers })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, then waits up to `grace` for every connection to send its last frames.
    pub fn finish(mut self, grace: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&local_address(self.addr), Duration::from_millis(200));
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        let deadline = Instant::now() + grace;
        let writers = std::mem::take(&mut *self.writers.lock().unwrap_or_else(|e| e.into_inner()));
        for w in writers {
            while !w.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if w.is_finished() {
                let _ = w.join();
            }
        }
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
    writers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// Counts a live connection until dropped.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, shared: Shared, stop: Arc<AtomicBool>) {
    // Evictions are logged at most once a second, with how many there were.
    let mut evicted = 0u64;
    let mut last_eviction_log: Option<Instant> = None;
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let peer = stream.peer_addr().map_or_else(|_| "an unknown peer".to_string(), |a| a.to_string());
        let (in_handshake, made_room) = shared.handshakes.admit(&stream);
        if made_room {
            evicted += 1;
            if last_eviction_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                tracing::warn!(
                    "{MAX_HANDSHAKES} connections in their handshake: the oldest dropped to make room \
                     ({evicted} since the last such line)"
                );
                evicted = 0;
                last_eviction_log = Some(Instant::now());
            }
        }
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("bts-connection".into())
            .spawn(move || serve_connection(stream, &peer, &shared, in_handshake));
        if let Err(e) = spawned {
            tracing::warn!("cannot start a connection thread: {e}");
        }
    }
}

fn serve_connection(mut stream: TcpStream, peer: &str, shared: &Shared, in_handshake: InHandshake) {
    let _ = stream.set_nodelay(true);
    let config = &shared.config;
    let handshake = handshake(&mut stream, config);
    drop(in_handshake);
    let (threads, peer_address, mut decoder) = match handshake {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(%peer, "connection dropped: {e}");
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    };
    // Slots are for authenticated workers only: strangers cannot take them.
    if shared.active.fetch_add(1, Ordering::SeqCst) >= config.max_connections {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        let max = config.max_connections;
        tracing::warn!(%peer, "refused: already {max} workers' connections");
        let reason = format!("the master already serves {max} connections of workers");
        let _ = send_frame(&mut stream, &MasterFrame::Refused { reason });
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let _active = Active(Arc::clone(&shared.active));
    let polling = matches!(config.welcome.mode, WireMode::Polling { .. });
    let silence = Duration::from_millis(config.welcome.silence_ms);
    let stream = Arc::new(stream);
    let (tx, rx) = mpsc::channel::<MasterFrame>();
    let ping = Arc::new(Mutex::new(None));
    let heartbeat = Duration::from_millis(config.welcome.heartbeat_ms);
    // In budget mode the end of the run reaches each thread as Finish; polling workers are told by
    // the coordinator.
    let finishes = if polling { 0 } else { threads };
    let writer = {
        let (stream, ping) = (Arc::clone(&stream), Arc::clone(&ping));
        std::thread::Builder::new()
            .name("bts-writer".into())
            .spawn(move || write_loop(&stream, &rx, finishes, heartbeat, &ping))
    };
    match writer {
        Ok(w) => shared.writers.lock().unwrap_or_else(|e| e.into_inner()).push(w),
        Err(e) => {
            tracing::warn!(%peer, "cannot start a writer thread: {e}");
            return;
        }
    }
    if polling {
        let process = shared.ids.fetch_add(1, Ordering::SeqCst);
        tracing::info!(%peer, threads, process, "remote polling worker joined");
        let link = Box::new(ProcessConnection { tx, stream: Arc::clone(&stream) });
        if shared.events.send(Event::ProcessJoined { process, threads, peer_address, link }).is_err() {
            return;
        }
        match read_polling(&stream, &mut decoder, silence, process, &shared.events) {
            Ended::Closed => tracing::info!(%peer, process, "remote polling worker left"),
            Ended::Broken(why) => tracing::warn!(%peer, process, "remote polling worker dropped: {why}"),
        }
        let _ = stream.shutdown(Shutdown::Both);
        let _ = shared.events.send(Event::ProcessLeft(process));
        return;
    }
    let first = shared.ids.fetch_add(u64::from(threads), Ordering::SeqCst);
    tracing::info!(%peer, threads, first_worker = first, "remote worker joined");
    for t in 0..threads {
        let link = TcpLink { tx: tx.clone(), thread: t, stream: Arc::clone(&stream) };
        if shared.events.send(Event::Joined { worker: first + u64::from(t), threads: 1, link: Box::new(link) }).is_err()
        {
            return;
        }
    }
    drop(tx);
    let reason = read_loop(&stream, &mut decoder, silence, first, threads, &shared.events, &ping);
    match reason {
        Ended::Closed => tracing::info!(%peer, first_worker = first, "remote worker left"),
        Ended::Broken(why) => tracing::warn!(%peer, first_worker = first, "remote worker dropped: {why}"),
    }
    let _ = stream.shutdown(Shutdown::Both);
    for t in 0..threads {
        let _ = shared.events.send(Event::Disconnected(first + u64::from(t)));
    }
}

/// The master's half of the handshake: returns the worker's thread count, its peer address and the
/// decoder holding any bytes already received after it.
fn handshake(stream: &mut TcpStream, config: &NetConfig) -> Result<(u32, Option<String>, FrameDecoder), String> {
    let deadline = Instant::now() + config.handshake_timeout;
    let mut preamble = [0u8; PREAMBLE_LEN];
    read_exact_until(stream, &mut preamble, deadline)?;
    let Some(theirs) = Preamble::parse(&preamble) else {
        return Err(format!("not a bts worker (it began with {:?})", String::from_utf8_lossy(&preamble)));
    };
    stream.write_all(&Preamble::CURRENT.to_bytes()).map_err(|e| e.to_string())?;
    if theirs.version != PROTOCOL_VERSION {
        return Err(format!("it speaks protocol version {}, this master version {PROTOCOL_VERSION}", theirs.version));
    }
    let mut decoder = FrameDecoder::handshake();
    let (threads, worker_nonce, peer_address) = match read_frame::<WorkerFrame>(stream, &mut decoder, deadline)? {
        WorkerFrame::Hello { threads, nonce, peer_address } if (1..=MAX_THREADS).contains(&threads) => {
            (threads, nonce, peer_address)
        }
        WorkerFrame::Hello { threads, .. } => return Err(format!("it offers {threads} threads")),
        other => return Err(format!("out of order: {} before the handshake", frame_name(&other))),
    };
    let master_nonce = auth::nonce();
    let tag = auth::master_tag(&config.token, &worker_nonce, &master_nonce);
    send_frame(stream, &MasterFrame::Challenge { nonce: master_nonce, tag })?;
    let answer = read_frame::<WorkerFrame>(stream, &mut decoder, deadline).map_err(|e| {
        format!("{e}, after the challenge (the worker does not accept this master's token: they differ)")
    })?;
    match answer {
        WorkerFrame::Auth { tag } if auth::verify_worker(&config.token, &master_nonce, &worker_nonce, &tag) => {
            decoder.authenticated();
        }
        WorkerFrame::Auth { .. } => {
            let _ = send_frame(stream, &MasterFrame::Refused { reason: "wrong token".into() });
            return Err("wrong token".into());
        }
        other => return Err(format!("out of order: {} instead of Auth", frame_name(&other))),
    }
    send_frame(stream, &MasterFrame::Welcome(config.welcome.clone()))?;
    Ok((threads, peer_address, decoder))
}

fn frame_name(frame: &WorkerFrame) -> &'static str {
    match frame {
        WorkerFrame::Hello { .. } => "Hello",
        WorkerFrame::Auth { .. } => "Auth",
        WorkerFrame::Message { .. } => "Message",
        WorkerFrame::Pong { .. } => "Pong",
        WorkerFrame::Report(_) => "Report",
        WorkerFrame::Counts { .. } => "Counts",
    }
}

fn read_exact_until(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<(), String> {
    let mut got = 0;
    while got < buf.len() {
        let n = read_until(stream, &mut buf[got..], deadline)?;
        got += n;
    }
    Ok(())
}

/// One read that gives up at `deadline`; a closed connection is an error, an interrupted read
/// reads nothing.
fn read_until(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<usize, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err("the handshake took too long".into());
    }
    stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
    match stream.read(buf) {
        Ok(0) => Err("closed during the handshake".into()),
        // A stop signal interrupted the read: the caller reads again.
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Ok(n) => Ok(n),
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            Err("the handshake took too long".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

fn read_frame<T: DeserializeOwned>(
    stream: &mut TcpStream,
    decoder: &mut FrameDecoder,
    deadline: Instant,
) -> Result<T, String> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(frame) = decoder.decode::<T>().map_err(|e| e.to_string())? {
            return Ok(frame);
        }
        let n = read_until(stream, &mut buf, deadline)?;
        decoder.feed(&buf[..n]);
    }
}

fn send_frame(stream: &mut TcpStream, frame: &MasterFrame) -> Result<(), String> {
    write_frame(stream, frame).map_err(|e| e.to_string())
}

/// The last ping sent: its number and when.
type LastPing = Mutex<Option<(u64, Instant)>>;

/// How a connection ended.
enum Ended {
    /// The worker hung up, or the run is over.
    Closed,
    /// Silence, a broken connection or a protocol violation.
    Broken(String),
}

/// Reads frames until the connection ends or `on_frame` ends it; returns why it ended.
fn read_frames(
    stream: &TcpStream,
    decoder: &mut FrameDecoder,
    silence: Duration,
    mut on_frame: impl FnMut(WorkerFrame) -> Result<(), Ended>,
) -> Ended {
    if let Err(e) = stream.set_read_timeout(Some(silence)) {
        return Ended::Broken(e.to_string());
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match decoder.decode::<WorkerFrame>() {
            Ok(Some(frame)) => {
                if let Err(ended) = on_frame(frame) {
                    return ended;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => return Ended::Broken(e.to_string()),
        }
        match (&*stream).read(&mut buf) {
            Ok(0) => return Ended::Closed,
            Ok(n) => decoder.feed(&buf[..n]),
            // A stop signal (Ctrl-Z, a debugger, a batch system's suspend) interrupts the read.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Ended::Broken(format!("silent for {:.1} s", silence.as_secs_f64()));
            }
            Err(e) => return Ended::Broken(e.to_string()),
        }
    }
}

/// Reads a budget-mode process's frames until the connection ends.
fn read_loop(
    stream: &TcpStream,
    decoder: &mut FrameDecoder,
    silence: Duration,
    first: WorkerId,
    threads: u32,
    events: &Sender<Event>,
    ping: &LastPing,
) -> Ended {
    read_frames(stream, decoder, silence, |frame| match frame {
        WorkerFrame::Message { thread, message } if thread < threads => {
            events.send(Event::Message(first + u64::from(thread), message)).map_err(|_| Ended::Closed)
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
        other => Err(Ended::Broken(format!("out of order: {} after the handshake", frame_name(&other)))),
    })
}

/// Reads a polling process's frames until the connection ends.
fn read_polling(
    stream: &TcpStream,
    decoder: &mut FrameDecoder,
    silence: Duration,
    process: u64,
    events: &Sender<Event>,
) -> Ended {
    read_frames(stream, decoder, silence, |frame| {
        let event = match frame {
            WorkerFrame::Report(report) => Event::Poll(report),
            WorkerFrame::Counts { wave, counts } => Event::Counts { process, wave, counts },
            WorkerFrame::Pong { .. } => return Ok(()),
            other => return Err(Ended::Broken(format!("out of order: {} in a polling run", frame_name(&other)))),
        };
        events.send(event).map_err(|_| Ended::Closed)
    })
}

/// Sends frames as they come, a ping every `heartbeat`; ends when the connection fails, or when
/// every link is dropped: the run is over for this worker, so after what is left it gets `Finish`
/// for every thread (also when it joined too late for the driver to see it).
fn write_loop(stream: &TcpStream, rx: &Receiver<MasterFrame>, threads: u32, heartbeat: Duration, ping: &LastPing) {
    let mut out = Vec::with_capacity(64 * 1024);
    let mut seq = 0u64;
    let mut last_ping = Instant::now();
    let mut open = true;
    while open {
        match rx.recv_timeout(heartbeat.saturating_sub(last_ping.elapsed())) {
            Ok(frame) => {
                let mut fits = push(&frame, &mut out);
                while fits && out.len() < (1 << 20) {
                    match rx.try_recv() {
                        Ok(frame) => fits = push(&frame, &mut out),
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => {
                            open = false;
                            break;
                        }
                    }
                }
                if !fits {
                    // A message that cannot be sent: drop the worker, so its jobs go back to L.
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
        if open && last_ping.elapsed() >= heartbeat {
            seq += 1;
            last_ping = Instant::now();
            *ping.lock().unwrap_or_else(|e| e.into_inner()) = Some((seq, last_ping));
            let _ = push(&MasterFrame::Ping { seq }, &mut out);
        }
        if !out.is_empty() {
            if let Err(e) = (&*stream).write_all(&out) {
                tracing::debug!("cannot write to a remote worker: {e}");
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            out.clear();
        }
    }
    for thread in 0..threads {
        let _ = push(&MasterFrame::Message { thread, message: ToWorker::Finish }, &mut out);
    }
    let _ = (&*stream).write_all(&out);
    let _ = stream.shutdown(Shutdown::Write);
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
struct ProcessConnection {
    tx: Sender<MasterFrame>,
    stream: Arc<TcpStream>,
}

impl ProcessLink for ProcessConnection {
    fn send(&self, frame: MasterFrame) -> bool {
        self.tx.send(frame).is_ok()
    }

    fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// A remote worker thread, as the driver sees it.
struct TcpLink {
    tx: Sender<MasterFrame>,
    thread: u32,
    stream: Arc<TcpStream>,
}

impl Link for TcpLink {
    fn send(&self, message: ToWorker) -> bool {
        self.tx.send(MasterFrame::Message { thread: self.thread, message }).is_ok()
    }

    fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}
