//! Polling workers of different processes reach each other directly. Every process runs a peer
//! server (connections from other processes, authenticated with the run's token as the master
//! authenticates workers) and a router that sends each message to the worker it is for: a thread of
//! this process, or over a connection (opened on first use) to the process that runs it.
//!
//! The master tells every process where the others are, but a process that has just joined may
//! steal before its victim has heard of it: every connection therefore starts by saying which
//! workers the dialling process runs and where, so that the victim can answer.
//!
//! Connections are tasks on the process's tokio runtime ([`bts_protocol::runtime`]), whatever their
//! number: a task per connection served, and one per connection dialled, fed by the workers'
//! threads through a channel, so a thread never waits for the network.

use crate::polling::Peers;
use bts_protocol::codec::{FrameCodec, encode_frame};
use bts_protocol::handshakes::{AcceptFailures, Handshakes, InHandshake, MAX_HANDSHAKES};
use bts_protocol::polling::PeerMsg;
use bts_protocol::runtime::{resolve, runtime, shutdown_handle};
use bts_protocol::wire::PREAMBLE_LEN;
use bts_protocol::{PeerEntry, PeerFrame, Preamble, auth};
use futures_util::StreamExt;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::ops::Range;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;

/// How long a peer has to complete the handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The longest a message can take to reach a worker of a live process, given the time a peer has
/// to take a write: a work message not there by then was lost with a broken connection.
pub fn longest_delivery(write_timeout: Duration) -> Duration {
    HANDSHAKE + write_timeout
}

/// The workers of this process and where the others are.
pub struct Router {
    token: Vec<u8>,
    local: Arc<Local>,
    /// A peer that takes longer than this to take a message is treated as gone: by then the master
    /// has dropped it too, and the rollback that follows redoes any work lost with it.
    write_timeout: Duration,
    table: Arc<RwLock<Table>>,
    /// Where this process's peer server is, once it serves.
    address: RwLock<Option<String>>,
    /// Connections dialled, by address: what goes into one is sent by its task.
    connections: Mutex<HashMap<String, UnboundedSender<(u32, PeerMsg)>>>,
    /// The addresses that could not be dialled, each logged once.
    unreachable: Arc<Mutex<HashSet<String>>>,
}

/// The inboxes of this process's workers: `first..first + inboxes.len()`.
struct Local {
    first: u32,
    inboxes: Vec<Sender<PeerMsg>>,
}

impl Local {
    fn range(&self) -> Range<u32> {
        self.first..self.first + self.inboxes.len() as u32
    }

    /// The inbox of worker `to`, if it is one of this process.
    fn inbox(&self, to: u32) -> Option<&Sender<PeerMsg>> {
        to.checked_sub(self.first).and_then(|i| self.inboxes.get(i as usize))
    }

    /// Delivers a message to a worker of this process, or hands it back.
    fn try_send(&self, to: u32, message: PeerMsg) -> Result<(), PeerMsg> {
        match self.inbox(to) {
            Some(inbox) => inbox.send(message).map_err(|e| e.0),
            None => Err(message),
        }
    }

    /// A message that cannot reach its worker: a request is answered at once, so that its sender
    /// never waits for an answer that will not come.
    fn undelivered(&self, to: u32, message: PeerMsg, why: &dyn std::fmt::Display) {
        tracing::debug!("cannot reach worker {to}: {why}");
        if let PeerMsg::Request { from, epoch } = message {
            let _ = self.try_send(from, PeerMsg::NoWork { epoch });
        }
    }
}

/// Where workers are: the master's word, and processes that introduced themselves since.
#[derive(Default)]
struct Table {
    master: Vec<PeerEntry>,
    /// Newer than the master's table (their workers come after all of its).
    introduced: Vec<PeerEntry>,
    /// The workers of the processes in the run, this one's included, in order: thieves ask
    /// these (the indices of processes gone stay unused, and a long run with many processes
    /// coming and going would otherwise ask mostly nobody).
    live: Vec<Range<u32>>,
}

impl Table {
    fn entries(&self) -> impl Iterator<Item = &PeerEntry> {
        self.master.iter().chain(&self.introduced)
    }

    /// Recomputes `live` after a change, with this process's workers `local`.
    fn changed(&mut self, local: Range<u32>) {
        let mut live: Vec<Range<u32>> = self.entries().map(|e| e.first..e.first + e.count).collect();
        live.push(local);
        live.sort_by_key(|r| r.start);
        // (The master's table lists this process too, once it has a peer server.)
        live.dedup_by_key(|r| r.start);
        self.live = live;
    }
}

impl Router {
    pub fn new(token: Vec<u8>, first: u32, local: Vec<Sender<PeerMsg>>, write_timeout: Duration) -> Self {
        let (address, connections) = (RwLock::default(), Mutex::new(HashMap::new()));
        let local = Arc::new(Local { first, inboxes: local });
        let table = Arc::new(RwLock::new(Table { live: vec![local.range()], ..Table::default() }));
        Self { token, local, write_timeout, table, address, connections, unreachable: Arc::default() }
    }

    /// The processes of the run and their workers (sent by the master when it changes).
    pub fn set_table(&self, entries: Vec<PeerEntry>) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        // The master knows of every process up to its last worker, whether still there or gone.
        let end = end(&entries);
        table.introduced.retain(|e| e.first >= end);
        table.master = entries;
        table.changed(self.local.range());
        // Connections to processes gone, and what was said of them, go too (a process that comes
        // and goes for days would otherwise leave one of each behind every time).
        let here: HashSet<&str> = table.entries().map(|e| e.address.as_str()).collect();
        self.connections.lock().unwrap_or_else(|e| e.into_inner()).retain(|a, _| here.contains(a.as_str()));
        self.unreachable.lock().unwrap_or_else(|e| e.into_inner()).retain(|a| here.contains(a.as_str()));
    }

    /// Where this process's peer server is, to introduce it to the processes it connects to.
    pub fn set_address(&self, address: String) {
        *self.address.write().unwrap_or_else(|e| e.into_inner()) = Some(address);
    }

    /// A process that connected said where it is: remember it unless the table knows its workers.
    fn introduced(&self, entry: PeerEntry) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let end = end(&table.master);
        if entry.first >= end && !table.introduced.iter().any(|e| e.first == entry.first) {
            table.introduced.push(entry);
            table.changed(self.local.range());
        }
    }

    /// This process, as it introduces itself.
    fn entry(&self) -> Option<PeerEntry> {
        let address = self.address.read().unwrap_or_else(|e| e.into_inner()).clone()?;
        Some(PeerEntry { first: self.local.first, count: self.local.inboxes.len() as u32, address })
    }

    /// Delivers a message to a worker of this process; false if `to` is not one. A message to a
    /// worker whose thread died is dropped: its process fails the run.
    pub fn deliver_local(&self, to: u32, message: PeerMsg) -> bool {
        let inbox = self.local.inbox(to);
        if let Some(inbox) = inbox {
            let _ = inbox.send(message);
        }
        inbox.is_some()
    }

    /// Delivers a message to a worker of this process, or hands it back.
    fn try_local(&self, to: u32, message: PeerMsg) -> Result<(), PeerMsg> {
        self.local.try_send(to, message)
    }

    fn address_of(&self, to: u32) -> Option<String> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        table.entries().find(|e| (e.first..e.first + e.count).contains(&to)).map(|e| e.address.clone())
    }

    /// The connection to `address`, dialled now if there is none (or its task has ended).
    fn connection(&self, address: &str) -> UnboundedSender<(u32, PeerMsg)> {
        let mut connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = connections.get(address).filter(|c| !c.is_closed()) {
            return c.clone();
        }
        let (tx, rx) = unbounded_channel();
        let dialled = Dialled {
            address: address.to_string(),
            token: self.token.clone(),
            me: self.entry(),
            local: Arc::clone(&self.local),
            write_timeout: self.write_timeout,
            unreachable: Arc::clone(&self.unreachable),
            table: Arc::clone(&self.table),
        };
        runtime().spawn(dialled.run(rx));
        connections.insert(address.to_string(), tx.clone());
        tx
    }

    fn send_remote(&self, to: u32, message: PeerMsg) {
        let Some(address) = self.address_of(to) else {
            self.local.undelivered(to, message, &"no process runs it");
            return;
        };
        if let Err(e) = self.connection(&address).send((to, message)) {
            // The connection ended since: the next one tells whether the peer is still there.
            let (to, message) = e.0;
            self.connections.lock().unwrap_or_else(|e| e.into_inner()).remove(&address);
            if let Err(e) = self.connection(&address).send((to, message)) {
                let (to, message) = e.0;
                self.local.undelivered(to, message, &"its connection ended");
            }
        }
    }
}

impl<P: Peers> Peers for Arc<P> {
    fn count(&self) -> u32 {
        (**self).count()
    }

    fn victim(&self, me: u32, draw: &mut dyn FnMut(u32) -> u32) -> Option<u32> {
        (**self).victim(me, draw)
    }

    fn send(&self, to: u32, message: PeerMsg) {
        (**self).send(to, message)
    }
}

impl Peers for Router {
    fn count(&self) -> u32 {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        let remote = end(table.entries());
        remote.max(self.local.first + self.local.inboxes.len() as u32)
    }

    fn victim(&self, me: u32, draw: &mut dyn FnMut(u32) -> u32) -> Option<u32> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        crate::polling::pick(table.live.iter().cloned(), me, draw)
    }

    fn send(&self, to: u32, message: PeerMsg) {
        if let Err(message) = self.try_local(to, message) {
            self.send_remote(to, message);
        }
    }
}

/// The index after the last worker of these processes.
fn end<'a>(entries: impl IntoIterator<Item = &'a PeerEntry>) -> u32 {
    entries.into_iter().map(|e| e.first + e.count).max().unwrap_or(0)
}

/// A connection to another process's peer server, as its task sees it.
struct Dialled {
    address: String,
    token: Vec<u8>,
    /// This process, introduced first.
    me: Option<PeerEntry>,
    local: Arc<Local>,
    /// A peer that takes longer than this to take a message is treated as gone.
    write_timeout: Duration,
    unreachable: Arc<Mutex<HashSet<String>>>,
    /// Where workers are, to tell a process that left from one that cannot be reached.
    table: Arc<RwLock<Table>>,
}

impl Dialled {
    /// Dials, then sends the messages as they come, whatever is waiting in one write, until the
    /// router drops the connection. Messages that a broken connection did not take are sent on a
    /// new one; when the peer cannot be reached, or connections keep breaking before they take
    /// anything, whatever is left is undelivered.
    async fn run(self, mut rx: UnboundedReceiver<(u32, PeerMsg)>) {
        let mut unsent = Vec::new();
        let mut redials = 0;
        let failure = loop {
            let dialled = tokio::time::timeout(HANDSHAKE, self.dial()).await;
            let dialled =
                dialled.unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "the handshake took too long")));
            let stream = match dialled {
                Ok(stream) => stream,
                Err(e) => {
                    // Work cannot move between this process and that one: say so, once, as the
                    // run goes on without it; a while later, and only if the master still lists
                    // it: a process that has just left (any time a worker leaves, and at the end
                    // of a run every process but the last) is unreachable too.
                    if self.unreachable.lock().unwrap_or_else(|e| e.into_inner()).insert(self.address.clone()) {
                        let (address, why, table) = (self.address.clone(), e.to_string(), Arc::clone(&self.table));
                        tokio::spawn(async move {
                            tokio::time::sleep(UNREACHABLE_SAID_AFTER).await;
                            let table = table.read().unwrap_or_else(|e| e.into_inner());
                            match table.entries().any(|e| e.address == address) {
                                true => {
                                    tracing::warn!(peer = %address, "cannot reach another process's workers: {why}")
                                }
                                false => {
                                    tracing::debug!(peer = %address, "cannot reach a process that has left: {why}")
                                }
                            }
                        });
                    }
                    break e;
                }
            };
            match self.send_all(stream, &mut rx, &mut unsent).await {
                None => return,
                Some((e, took_some)) => {
                    redials = if took_some { 1 } else { redials + 1 };
                    if redials > MAX_REDIALS {
                        break e;
                    }
                    tracing::debug!(peer = %self.address, "the connection broke ({e}); dialling again");
                }
            }
        };
        let why = format!("{}: {failure}", self.address);
        rx.close();
        for (to, message) in unsent {
            self.local.undelivered(to, message, &why);
        }
        while let Some((to, message)) = rx.recv().await {
            self.local.undelivered(to, message, &why);
        }
    }

    /// Dials, again while the peer drops the connection during the handshake (its server makes
    /// room for newcomers so when strangers crowd it): a work message lost with it would cost a
    /// rollback. A refused connection is a process that is gone.
    async fn dial(&self) -> io::Result<TcpStream> {
        let mut pause = Duration::from_millis(10);
        loop {
            match dial(&self.address, &self.token, self.me.clone()).await {
                Err(e) if dropped(&e) => {
                    tracing::debug!(peer = %self.address, "the peer dropped the connection during the handshake ({e}); dialling again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                dialled => return dialled,
            }
        }
    }

    /// Sends `unsent` (what a broken connection did not take), then the messages as they come,
    /// until the router drops the connection (`None`) or it breaks: then `unsent` holds the
    /// messages it did not take, and the error says why and whether it took any. The peer writes
    /// nothing after the handshake: a read that ends tells that the connection broke while idle.
    async fn send_all(
        &self,
        mut stream: TcpStream,
        rx: &mut UnboundedReceiver<(u32, PeerMsg)>,
        unsent: &mut Vec<(u32, PeerMsg)>,
    ) -> Option<(io::Error, bool)> {
        let (mut read, mut write) = stream.split();
        let mut ignored = [0u8; 64];
        let mut took_some = false;
        // Each batch's frames, where each ends, and their messages.
        let (mut out, mut ends, mut batch) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            if unsent.is_empty() {
                tokio::select! {
                    message = rx.recv() => match message {
                        Some(m) => unsent.push(m),
                        None => return None,
                    },
                    closed = read.read(&mut ignored) => {
                        let e = closed.err().unwrap_or_else(|| io::ErrorKind::UnexpectedEof.into());
                        return Some((e, took_some));
                    }
                }
            }
            while unsent.len() < 4096
                && let Ok(m) = rx.try_recv()
            {
                unsent.push(m);
            }
            out.clear();
            ends.clear();
            batch.clear();
            for (to, message) in unsent.drain(..) {
                let frame = PeerFrame::Deliver { to, message };
                let encoded = encode_frame(&frame, &mut out);
                let PeerFrame::Deliver { to, message } = frame else { unreachable!("built above") };
                match encoded {
                    Ok(()) => {
                        ends.push(out.len());
                        batch.push((to, message));
                    }
                    Err(e) => self.local.undelivered(to, message, &e),
                }
            }
            let mut written = 0;
            let failure = loop {
                if written == out.len() {
                    break None;
                }
                match tokio::time::timeout(self.write_timeout, write.write(&out[written..])).await {
                    Ok(Ok(0)) => break Some(io::Error::from(io::ErrorKind::WriteZero)),
                    Ok(Ok(n)) => written += n,
                    Ok(Err(e)) => break Some(e),
                    Err(_) => break Some(io::Error::new(io::ErrorKind::TimedOut, "the peer takes no messages")),
                }
            };
            let Some(e) = failure else {
                took_some = true;
                continue;
            };
            // A frame cut short cannot have arrived whole: it goes on a new connection with the
            // frames after it. Those written whole may have arrived, or not: their requests are
            // answered, their work is lost (the master rolls back).
            let whole = ends.partition_point(|&end| end <= written);
            *unsent = batch.split_off(whole);
            let why = format!("{}: {e}", self.address);
            for (to, message) in batch {
                self.local.undelivered(to, message, &why);
            }
            return Some((e, took_some || whole > 0));
        }
    }
}

/// Connections that break before taking anything are dialled again this many times in a row.
const MAX_REDIALS: u32 = 3;

/// How long after a peer turns out unreachable that is said (unless this process has ended by then).
const UNREACHABLE_SAID_AFTER: Duration = Duration::from_secs(2);

/// Whether a connection failed as one that its peer dropped does.
fn dropped(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(e.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe)
}

/// Connects to a peer server, proves the token and introduces this process.
async fn dial(address: &str, token: &[u8], me: Option<PeerEntry>) -> io::Result<TcpStream> {
    let addr: SocketAddr = resolve(address)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| io::Error::other(format!("{address} resolves to no address")))?;
    let mut stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    stream.write_all(&Preamble::CURRENT.to_bytes()).await?;
    let nonce = auth::nonce();
    send_frame(&mut stream, &PeerFrame::Hello { nonce }).await?;
    let mut preamble = [0u8; PREAMBLE_LEN];
    stream.read_exact(&mut preamble).await?;
    if Preamble::parse(&preamble) != Some(Preamble::CURRENT) {
        return Err(io::Error::other(format!("{address} is not a bts peer of this version")));
    }
    let mut frames = FramedRead::new(&mut stream, FrameCodec::<PeerFrame>::handshake());
    let PeerFrame::Challenge { nonce: theirs, tag } = next_frame(&mut frames).await? else {
        return Err(io::Error::other("the peer broke the handshake"));
    };
    drop(frames);
    if !auth::verify_master(token, &nonce, &theirs, &tag) {
        return Err(io::Error::other(format!("{address} does not prove the run's token")));
    }
    send_frame(&mut stream, &PeerFrame::Auth { tag: auth::worker_tag(token, &theirs, &nonce) }).await?;
    if let Some(entry) = me {
        send_frame(&mut stream, &PeerFrame::Introduce(entry)).await?;
    }
    Ok(stream)
}

async fn send_frame(stream: &mut (impl AsyncWrite + Unpin), frame: &PeerFrame) -> io::Result<()> {
    let mut out = Vec::new();
    encode_frame(frame, &mut out).map_err(io::Error::other)?;
    stream.write_all(&out).await
}

/// The next frame; the end of the connection is an error.
async fn next_frame<R: AsyncRead + Unpin>(frames: &mut FramedRead<R, FrameCodec<PeerFrame>>) -> io::Result<PeerFrame> {
    frames.next().await.unwrap_or_else(|| Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer hung up")))
}

/// Accepts connections from the workers of other processes and delivers their messages.
pub struct PeerServer {
    address: SocketAddr,
    accept: JoinHandle<()>,
}

impl PeerServer {
    /// Serves peers proving `token` on `listener`; their messages go through `router`.
    pub fn serve(listener: TcpListener, token: Vec<u8>, router: Arc<Router>) -> io::Result<Self> {
        let address = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let listener = {
            let _runtime = runtime().enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let token = Arc::new(token);
        let handshakes = Handshakes::new(MAX_HANDSHAKES);
        let accept = runtime().spawn(async move {
            let mut failures = AcceptFailures::default();
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        tokio::time::sleep(failures.failed(&e, "the peer server")).await;
                        continue;
                    }
                };
                let handle = match shutdown_handle(&stream) {
                    Ok(h) => h,
                    Err(e) => {
                        drop(stream);
                        tokio::time::sleep(failures.failed(&e, "the peer server")).await;
                        continue;
                    }
                };
                failures.accepted();
                let (in_handshake, _) = handshakes.admit(&handle);
                let (token, router) = (Arc::clone(&token), Arc::clone(&router));
                tokio::spawn(serve(stream, handle, peer.to_string(), token, router, in_handshake));
            }
        });
        Ok(Self { address, accept })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

/// Stops accepting (peers already connected are served until they hang up).
impl Drop for PeerServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(
    mut stream: TcpStream,
    handle: std::net::TcpStream,
    peer: String,
    token: Arc<Vec<u8>>,
    router: Arc<Router>,
    in_handshake: InHandshake,
) {
    let _ = stream.set_nodelay(true);
    let handshake = tokio::time::timeout(HANDSHAKE, accept_handshake(&mut stream, &token)).await;
    let Some(mut frames) = in_handshake.end(handshake, &handle, &peer, "peer connection") else { return };
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(PeerFrame::Deliver { to, message }) => {
                if !router.deliver_local(to, message) {
                    tracing::debug!(%peer, "a message for worker {to}, which is not here");
                }
            }
            Ok(PeerFrame::Introduce(entry)) => router.introduced(entry),
            Ok(_) => {
                tracing::warn!(%peer, "peer connection dropped: a handshake frame after the handshake");
                return;
            }
            Err(e) => {
                tracing::warn!(%peer, "peer connection dropped: {e}");
                return;
            }
        }
    }
}

/// The server's half of the handshake; returns the connection's frames from then on.
async fn accept_handshake<'a>(
    stream: &'a mut TcpStream,
    token: &[u8],
) -> Result<FramedRead<&'a mut TcpStream, FrameCodec<PeerFrame>>, String> {
    let mut preamble = [0u8; PREAMBLE_LEN];
    stream.read_exact(&mut preamble).await.map_err(|e| format!("no preamble: {e}"))?;
    if Preamble::parse(&preamble) != Some(Preamble::CURRENT) {
        return Err("not a bts peer of this version".into());
    }
    stream.write_all(&Preamble::CURRENT.to_bytes()).await.map_err(|e| e.to_string())?;
    let mut frames = FramedRead::new(stream, FrameCodec::handshake());
    let PeerFrame::Hello { nonce: theirs } = next_frame(&mut frames).await.map_err(|e| e.to_string())? else {
        return Err("out of order: not a Hello".into());
    };
    let nonce = auth::nonce();
    let challenge = PeerFrame::Challenge { nonce, tag: auth::master_tag(token, &theirs, &nonce) };
    send_frame(frames.get_mut(), &challenge).await.map_err(|e| e.to_string())?;
    let PeerFrame::Auth { tag } = next_frame(&mut frames).await.map_err(|e| e.to_string())? else {
        return Err("out of order: not an Auth".into());
    };
    if !auth::verify_worker(token, &nonce, &theirs, &tag) {
        return Err("wrong token".into());
    }
    frames.decoder_mut().authenticated();
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::mpsc::{self, Receiver};

    const WAIT: Duration = Duration::from_secs(5);

    /// A process running worker 5, serving peers that prove `token`.
    fn process(token: &[u8]) -> (PeerServer, Receiver<PeerMsg>) {
        let (server, _, rx) = serving(token, 5);
        (server, rx)
    }

    /// A process running worker `me` with a peer server.
    fn serving(token: &[u8], me: u32) -> (PeerServer, Arc<Router>, Receiver<PeerMsg>) {
        let (tx, rx) = mpsc::channel();
        let router = Arc::new(Router::new(token.to_vec(), me, vec![tx], WAIT));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = PeerServer::serve(listener, token.to_vec(), Arc::clone(&router)).unwrap();
        router.set_address(server.address().to_string());
        (server, router, rx)
    }

    /// A process running worker 0 that knows where worker 5 is.
    fn router(token: &[u8], worker_5_at: SocketAddr) -> (Router, Receiver<PeerMsg>) {
        let (tx, rx) = mpsc::channel();
        let router = Router::new(token.to_vec(), 0, vec![tx], WAIT);
        router.set_table(vec![PeerEntry { first: 5, count: 1, address: worker_5_at.to_string() }]);
        (router, rx)
    }

    #[test]
    fn messages_reach_the_workers_of_other_processes_that_share_the_token() {
        let (server, remote) = process(b"secret");
        let (router, local) = router(b"secret", server.address());
        assert_eq!(router.count(), 6);
        router.send(5, PeerMsg::Request { from: 0, epoch: 3 });
        router.send(5, PeerMsg::NoWork { epoch: 3 });
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), PeerMsg::Request { from: 0, epoch: 3 });
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), PeerMsg::NoWork { epoch: 3 });
        router.send(0, PeerMsg::Pause { number: 1 });
        assert_eq!(local.try_recv().unwrap(), PeerMsg::Pause { number: 1 });
    }

    #[test]
    fn a_peer_without_the_token_is_refused_and_its_request_answered_with_nothing() {
        let (server, remote) = process(b"secret");
        let (router, local) = router(b"guess", server.address());
        router.send(5, PeerMsg::Request { from: 0, epoch: 2 });
        assert_eq!(local.recv_timeout(WAIT).unwrap(), PeerMsg::NoWork { epoch: 2 });
        assert!(remote.recv_timeout(Duration::from_millis(200)).is_err(), "a message got through without the token");
        // Each attempt dials again and fails; the failure is logged for the first only.
        router.send(5, PeerMsg::Request { from: 0, epoch: 3 });
        assert_eq!(local.recv_timeout(WAIT).unwrap(), PeerMsg::NoWork { epoch: 3 });
        let unreachable = router.unreachable.lock().unwrap().clone();
        assert_eq!(unreachable, HashSet::from([server.address().to_string()]));
    }

    /// A peer server crowded with strangers drops the oldest handshakes, a process's among them:
    /// its work message once went with it, and the run hung.
    #[test]
    fn work_gets_through_a_peer_that_dropped_the_first_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (tx, remote) = mpsc::channel();
        let serving = std::thread::spawn(move || {
            drop(listener.accept().unwrap());
            let router = Arc::new(Router::new(b"secret".to_vec(), 5, vec![tx], WAIT));
            PeerServer::serve(listener, b"secret".to_vec(), router).unwrap()
        });
        let (router, _local) = router(b"secret", address);
        let work = PeerMsg::Work {
            nodes: vec![bts_protocol::Returned { depth: 1, node: bts_protocol::NodeBytes::from_slice(&[7]) }],
            epoch: 0,
            pauses: 0,
        };
        router.send(5, work.clone());
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), work);
        drop(serving.join().unwrap());
    }

    /// Forwards one connection accepted on `listener` to `to`, both ways, until it is shut down.
    fn forward(listener: &TcpListener, to: SocketAddr) -> TcpStream {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        let a = loop {
            match listener.accept() {
                Ok((a, _)) => break a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("no connection to forward: {e}"),
            }
        };
        a.set_nonblocking(false).unwrap();
        let b = TcpStream::connect(to).unwrap();
        for (mut from, mut into) in [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a.try_clone().unwrap())] {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut into);
                let _ = into.shutdown(std::net::Shutdown::Both);
            });
        }
        a
    }

    /// A connection that breaks while idle (a reset between two live processes) once lost the
    /// next message written to it: it now goes on a new connection.
    #[test]
    fn a_message_goes_on_a_new_connection_when_the_last_one_broke_while_idle() {
        let (server, remote) = process(b"secret");
        let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
        let (router, _local) = router(b"secret", proxy.local_addr().unwrap());
        let work = |n: u8| PeerMsg::Work {
            nodes: vec![bts_protocol::Returned { depth: 1, node: bts_protocol::NodeBytes::from_slice(&[n]) }],
            epoch: 0,
            pauses: 0,
        };
        router.send(5, work(1));
        let first = forward(&proxy, server.address());
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), work(1));
        first.shutdown(std::net::Shutdown::Both).unwrap();
        // The dialler sees the connection end before it has anything to send.
        std::thread::sleep(Duration::from_millis(200));
        router.send(5, work(2));
        let _second = forward(&proxy, server.address());
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), work(2));
    }

    #[test]
    fn strangers_are_dropped_and_the_server_serves_on() {
        let (server, remote) = process(b"t");
        let mut stranger = TcpStream::connect(server.address()).unwrap();
        stranger.set_read_timeout(Some(WAIT)).unwrap();
        stranger.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut buf = [0u8; 64];
        assert!(matches!(stranger.read(&mut buf), Ok(0) | Err(_)), "the server answered a stranger");
        let (router, _local) = router(b"t", server.address());
        router.send(5, PeerMsg::Finish);
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), PeerMsg::Finish);
    }

    /// Strangers that connect and say nothing, or announce a huge frame before proving the token,
    /// neither hold memory nor lock a real peer out.
    #[test]
    fn idle_strangers_and_huge_handshake_frames_do_not_lock_peers_out() {
        let (server, remote) = process(b"t");
        let idle: Vec<TcpStream> =
            (0..3 * MAX_HANDSHAKES).filter_map(|_| TcpStream::connect(server.address()).ok()).collect();
        assert_eq!(idle.len(), 3 * MAX_HANDSHAKES);
        let mut greedy = TcpStream::connect(server.address()).unwrap();
        greedy.set_read_timeout(Some(WAIT)).unwrap();
        greedy.write_all(&Preamble::CURRENT.to_bytes()).unwrap();
        greedy.write_all(&(64u32 << 20).to_le_bytes()).unwrap();
        let mut buf = [0u8; 64];
        let mut answer = Vec::new();
        // The server sends its preamble, then hangs up instead of waiting for 64 MiB.
        while let Ok(n @ 1..) = greedy.read(&mut buf) {
            answer.extend_from_slice(&buf[..n]);
        }
        assert_eq!(answer.len(), PREAMBLE_LEN, "the server waited for the frame or answered it");
        let (router, _local) = router(b"t", server.address());
        router.send(5, PeerMsg::Finish);
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), PeerMsg::Finish);
        drop(idle);
    }

    /// Every victim a router can draw, drawing each number once.
    fn victims(router: &Router, me: u32) -> Vec<u32> {
        let n = std::cell::Cell::new(0);
        let _ = router.victim(me, &mut |count| {
            n.set(count);
            0
        });
        let mut all: Vec<u32> = (0..n.get()).filter_map(|k| router.victim(me, &mut |_| k)).collect();
        all.sort();
        all
    }

    /// Thieves ask the workers of the processes in the run only: the indices of processes gone
    /// stay unused, and with many come and gone, a thief once asked mostly nobody. The router
    /// also lets go of its connections to them.
    #[test]
    fn thieves_ask_only_the_workers_still_in_the_run() {
        let (server, remote) = process(b"t");
        let (tx, _inbox) = mpsc::channel();
        let router = Router::new(b"t".to_vec(), 7, vec![tx.clone(), tx], WAIT);
        // Before any table: the process's own other worker.
        assert_eq!(victims(&router, 7), vec![8]);
        let at = |first, count, address: &str| PeerEntry { first, count, address: address.into() };
        let five = server.address().to_string();
        router.set_table(vec![at(0, 2, "127.0.0.1:1"), at(5, 1, &five), at(7, 2, "127.0.0.1:3")]);
        assert_eq!(victims(&router, 7), vec![0, 1, 5, 8]);
        router.send(5, PeerMsg::Request { from: 7, epoch: 0 });
        assert_eq!(remote.recv_timeout(WAIT).unwrap(), PeerMsg::Request { from: 7, epoch: 0 });
        assert!(router.connections.lock().unwrap().contains_key(&five));
        // Processes 0..2 and 5 leave; 9..12 joins.
        router.set_table(vec![at(7, 2, "127.0.0.1:3"), at(9, 3, "127.0.0.1:4")]);
        assert_eq!(victims(&router, 8), vec![7, 9, 10, 11]);
        assert!(router.connections.lock().unwrap().is_empty(), "the connection to a process gone stays");
        // A process that introduced itself before the master's table lists it is asked too.
        router.introduced(at(12, 1, "127.0.0.1:5"));
        assert_eq!(victims(&router, 8), vec![7, 9, 10, 11, 12]);
        // Alone: nobody to ask.
        let (tx, _inbox) = mpsc::channel();
        assert_eq!(victims(&Router::new(Vec::new(), 3, vec![tx], WAIT), 3), Vec::<u32>::new());
    }

    #[test]
    fn a_request_to_a_process_that_is_gone_is_answered_with_nothing() {
        let gone = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (router, local) = router(b"t", gone);
        router.send(5, PeerMsg::Request { from: 0, epoch: 7 });
        assert_eq!(local.recv_timeout(WAIT).unwrap(), PeerMsg::NoWork { epoch: 7 });
        // Workers no process runs.
        router.send(9, PeerMsg::Request { from: 0, epoch: 8 });
        assert_eq!(local.recv_timeout(WAIT).unwrap(), PeerMsg::NoWork { epoch: 8 });
    }

    #[test]
    fn a_victim_answers_a_thief_whose_process_the_master_has_not_announced_yet() {
        let (victim_server, victim, victim_inbox) = serving(b"t", 5);
        let (_thief_server, thief, thief_inbox) = serving(b"t", 9);
        // The thief knows where worker 5 is; the victim has not heard of worker 9.
        thief.set_table(vec![PeerEntry { first: 5, count: 1, address: victim_server.address().to_string() }]);
        thief.send(5, PeerMsg::Request { from: 9, epoch: 0 });
        assert_eq!(victim_inbox.recv_timeout(WAIT).unwrap(), PeerMsg::Request { from: 9, epoch: 0 });
        let work = PeerMsg::Work { nodes: Vec::new(), epoch: 0, pauses: 0 };
        victim.send(9, work.clone());
        assert_eq!(thief_inbox.recv_timeout(WAIT).unwrap(), work);
        // The master's next table, which lists worker 9, takes over.
        victim.set_table(vec![PeerEntry { first: 9, count: 1, address: "127.0.0.1:1".into() }]);
        assert_eq!(victim.count(), 10);
        victim.send(9, PeerMsg::Request { from: 5, epoch: 1 });
        assert_eq!(victim_inbox.recv_timeout(WAIT).unwrap(), PeerMsg::NoWork { epoch: 1 });
    }
}
