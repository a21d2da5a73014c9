//! Connections still in their handshake, bounded. Anyone who can reach a port may open connections
//! and say nothing, so a server keeps at most a fixed number of them: past it, the oldest is dropped
//! to make room. A real peer proves the token within a round trip or two and leaves the list, so
//! strangers can neither hold the slots meant for authenticated peers nor lock a real one out.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many connections may be in their handshake at once, by default.
pub const MAX_HANDSHAKES: usize = 64;

/// The connections in their handshake.
#[derive(Debug)]
pub struct Handshakes {
    limit: usize,
    open: Mutex<Open>,
    failures: Mutex<Failures>,
}

/// Failed handshakes, for the log.
#[derive(Debug, Default)]
struct Failures {
    /// By kind of failure.
    kinds: std::collections::HashMap<String, Throttle>,
    /// Lines logged in the second that began at the instant.
    second: Option<(Instant, u32)>,
}

/// Failed handshakes of a kind are logged at most this often.
const FAILURES_LOGGED_EVERY: Duration = Duration::from_secs(1);

/// Failed handshakes of all kinds are logged at most this many times a second.
const FAILURE_LINES_A_SECOND: u32 = 8;

/// The kind of a handshake's failure: its reason without what it quotes of the peer or numbers
/// (strangers' bytes, a version), which a flood would vary.
fn kind(why: &str) -> String {
    let head = why.split(['(', '"']).next().unwrap_or(why);
    head.chars().filter(|c| !c.is_ascii_digit()).collect()
}

#[derive(Debug, Default)]
struct Open {
    next: u64,
    /// Oldest first: an id and a handle to shut the connection down.
    streams: VecDeque<(u64, TcpStream)>,
}

/// A connection's place in the list, given up when dropped (its handshake is over either way).
#[derive(Debug)]
pub struct InHandshake {
    list: Arc<Handshakes>,
    id: u64,
}

impl Handshakes {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self { limit: limit.max(1), open: Mutex::default(), failures: Mutex::default() })
    }

    /// Adds `stream`; returns its place, and whether an older connection was dropped for it.
    pub fn admit(self: &Arc<Self>, stream: &TcpStream) -> (InHandshake, bool) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = false;
        while open.streams.len() >= self.limit {
            if let Some((_, oldest)) = open.streams.pop_front() {
                // Its handshake thread sees the connection fail and gives up.
                let _ = oldest.shutdown(Shutdown::Both);
                evicted = true;
            }
        }
        let id = open.next;
        open.next += 1;
        // Without a second handle the connection cannot be evicted, but it still times out.
        if let Ok(handle) = stream.try_clone() {
            open.streams.push_back((id, handle));
        }
        (InHandshake { list: Arc::clone(self), id }, evicted)
    }

    /// Connections in their handshake now.
    pub fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).streams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl InHandshake {
    /// The end of this connection's handshake, run under a timeout: its result; or, if it failed or
    /// took too long, `None`, once the connection (`handle`) is shut down and the failure logged as
    /// `what` dropped. Either way the connection leaves the list.
    pub fn end<T, E: std::fmt::Display>(
        self,
        handshake: Result<Result<T, E>, tokio::time::error::Elapsed>,
        handle: &TcpStream,
        peer: &str,
        what: &str,
    ) -> Option<T> {
        let why = match handshake {
            Ok(Ok(done)) => return Some(done),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the handshake took too long".to_string(),
        };
        let _ = handle.shutdown(Shutdown::Both);
        self.failed(peer, what, &why);
        None
    }

    /// This connection's handshake failed (`why`): gives up its place, and logs a warning naming
    /// `what` failed and the peer. Each kind of failure is logged, but the same kind again at most
    /// once a second, with how many failed in between, and no more than a few lines a second in
    /// all: a flood of strangers (whose reasons quote what each sent), or a peer that keeps trying
    /// with the wrong token, cannot flood the log.
    fn failed(self, peer: &str, what: &str, why: &str) {
        match self.note_failure(why) {
            Some(0) => tracing::warn!(%peer, "{what} dropped: {why}"),
            Some(more) => tracing::warn!(%peer, "{what} dropped: {why} ({more} more failed handshakes not logged)"),
            None => tracing::debug!(%peer, "{what} dropped: {why}"),
        }
    }

    /// Counts a failure; `Some(n)` if it is to be logged, `n` failures after the last one logged.
    fn note_failure(&self, why: &str) -> Option<u64> {
        let mut failures = self.list.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if failures.kinds.len() > 64 {
            failures.kinds.retain(|_, kind| kind.recent(now));
        }
        let lines = match failures.second {
            Some((began, lines)) if now.duration_since(began) < FAILURES_LOGGED_EVERY => lines,
            _ => {
                failures.second = Some((now, 0));
                0
            }
        };
        let kind = failures.kinds.entry(kind(why)).or_insert(Throttle::new(FAILURES_LOGGED_EVERY));
        if lines >= FAILURE_LINES_A_SECOND && !kind.recent(now) {
            kind.quiet += 1;
            return None;
        }
        let said = kind.note(now);
        if let (Some(_), Some((_, lines))) = (said, &mut failures.second) {
            *lines += 1;
        }
        said
    }
}

impl Drop for InHandshake {
    fn drop(&mut self) {
        let mut open = self.list.open.lock().unwrap_or_else(|e| e.into_inner());
        open.streams.retain(|(id, _)| *id != self.id);
    }
}

/// Says a repeated event at most once every so often, with how many times it was not said since.
#[derive(Clone, Copy, Debug)]
pub struct Throttle {
    every: Duration,
    said: Option<Instant>,
    quiet: u64,
}

impl Throttle {
    pub const fn new(every: Duration) -> Self {
        Self { every, said: None, quiet: 0 }
    }

    /// The event happened at `now`: `Some(n)` if it is to be said, `n` the times it was not since
    /// it last was.
    pub fn note(&mut self, now: Instant) -> Option<u64> {
        if self.recent(now) {
            self.quiet += 1;
            return None;
        }
        self.said = Some(now);
        Some(std::mem::take(&mut self.quiet))
    }

    /// Whether it was said less than `every` before `now`.
    fn recent(&self, now: Instant) -> bool {
        self.said.is_some_and(|at| now.duration_since(at) < self.every)
    }
}

/// A listener that cannot accept a connection (out of file descriptors, typically): it tries
/// again after a pause that doubles up to a second, and says so at most once a minute (it said so
/// 90 times a second).
#[derive(Debug)]
pub struct AcceptFailures {
    pause: Duration,
    log: Throttle,
}

impl Default for AcceptFailures {
    fn default() -> Self {
        Self { pause: Duration::ZERO, log: Throttle::new(Duration::from_secs(60)) }
    }
}

impl AcceptFailures {
    /// An accept failed with `e`: how long to wait before the next. `what` names the listener.
    pub fn failed(&mut self, e: &std::io::Error, what: &str) -> Duration {
        self.pause = (self.pause * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        match self.log.note(Instant::now()) {
            Some(0) => tracing::warn!("{what} cannot accept a connection: {e}; trying again"),
            Some(more) => tracing::warn!(
                "{what} cannot accept a connection: {e} ({more} more failures since the last such line); trying again"
            ),
            None => {}
        }
        self.pause
    }

    /// A connection was accepted: the next failure waits the least again.
    pub fn accepted(&mut self) {
        self.pause = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn the_oldest_handshake_makes_room_and_finished_ones_leave() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let list = Handshakes::new(2);
        let (mut c1, s1) = pair(&listener);
        let (_c2, s2) = pair(&listener);
        let (_c3, s3) = pair(&listener);
        let (t1, evicted) = list.admit(&s1);
        assert!(!evicted);
        let (t2, _) = list.admit(&s2);
        assert_eq!(list.len(), 2);
        let (_t3, evicted) = list.admit(&s3);
        assert!(evicted, "the third connection drops the oldest");
        assert_eq!(list.len(), 2);
        // The oldest connection was shut down: its peer reads the end.
        let mut buf = [0u8; 1];
        assert_eq!(c1.read(&mut buf).unwrap(), 0);
        drop(t1);
        assert_eq!(list.len(), 2, "an evicted place is already gone");
        drop(t2);
        assert_eq!(list.len(), 1, "a finished handshake leaves the list");
    }

    #[test]
    fn failures_to_accept_wait_longer_and_longer() {
        let mut failures = AcceptFailures::default();
        let e = std::io::Error::other("Too many open files");
        let pauses: Vec<u128> = (0..10).map(|_| failures.failed(&e, "test").as_millis()).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert!(failures.log.said.is_some() && failures.log.quiet == 9, "logged once: {failures:?}");
        failures.accepted();
        assert_eq!(failures.failed(&e, "test").as_millis(), 10);
    }

    #[test]
    fn failed_handshakes_are_logged_once_a_second_for_the_same_kind() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let list = Handshakes::new(8);
        let fail = |why: &str| {
            let (_client, server) = pair(&listener);
            list.admit(&server).0.note_failure(why)
        };
        assert_eq!(fail("wrong token"), Some(0), "the first is logged");
        assert_eq!((fail("wrong token"), fail("wrong token")), (None, None), "then the same kind is not");
        assert_eq!(fail("not a bts worker (it began with \"GET\")"), Some(0), "another kind is");
        // Strangers' bytes and numbers do not make kinds of their own.
        assert_eq!(fail("not a bts worker (it began with \"xyz\")"), None);
        assert_eq!(fail("it speaks protocol version 99, this master version 9"), Some(0));
        assert_eq!(fail("it speaks protocol version 98, this master version 9"), None);
        std::thread::sleep(FAILURES_LOGGED_EVERY);
        assert_eq!(fail("not a bts worker (it began with \"abc\")"), Some(1), "a second later, with the count");
        assert_eq!(fail("wrong token"), Some(2));
    }

    /// However many kinds a flood makes up, a few lines a second at most.
    #[test]
    fn failed_handshakes_make_a_few_lines_a_second_at_most() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let list = Handshakes::new(8);
        let logged = (0..100)
            .filter(|i| {
                let (_client, server) = pair(&listener);
                let why = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"][i % 11];
                list.admit(&server).0.note_failure(why).is_some()
            })
            .count();
        assert_eq!(logged, FAILURE_LINES_A_SECOND as usize);
    }
}
