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
    /// When the last one logged was.
    logged: Option<Instant>,
    /// How many failed since, not logged.
    quiet: u64,
}

/// Failed handshakes are logged at most this often.
const FAILURES_LOGGED_EVERY: Duration = Duration::from_secs(1);

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
    /// `what` failed and the peer, at most once a second, with how many failed in between: a flood
    /// of strangers (whose reasons differ, quoting what each sent), or a peer that keeps trying
    /// with the wrong token, cannot flood the log.
    fn failed(self, peer: &str, what: &str, why: &str) {
        match self.note_failure() {
            Some(0) => tracing::warn!(%peer, "{what} dropped: {why}"),
            Some(more) => tracing::warn!(%peer, "{what} dropped: {why} ({more} more failed handshakes not logged)"),
            None => tracing::debug!(%peer, "{what} dropped: {why}"),
        }
    }

    /// Counts a failure; `Some(n)` if it is to be logged, `n` failures after the last one logged.
    fn note_failure(&self) -> Option<u64> {
        let mut failures = self.list.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match failures.logged {
            Some(at) if now.duration_since(at) < FAILURES_LOGGED_EVERY => {
                failures.quiet += 1;
                None
            }
            _ => {
                failures.logged = Some(now);
                Some(std::mem::take(&mut failures.quiet))
            }
        }
    }
}

impl Drop for InHandshake {
    fn drop(&mut self) {
        let mut open = self.list.open.lock().unwrap_or_else(|e| e.into_inner());
        open.streams.retain(|(id, _)| *id != self.id);
    }
}

/// A listener that cannot accept a connection (out of file descriptors, typically): it tries
/// again after a pause that doubles up to a second, and says so at most once a minute (it said so
/// 90 times a second).
#[derive(Debug, Default)]
pub struct AcceptFailures {
    pause: Duration,
    /// When the last failure was logged, and how many failed since.
    logged: Option<Instant>,
    quiet: u64,
}

/// How often failures to accept are logged.
const ACCEPT_FAILURES_LOGGED_EVERY: Duration = Duration::from_secs(60);

impl AcceptFailures {
    /// An accept failed with `e`: how long to wait before the next. `what` names the listener.
    pub fn failed(&mut self, e: &std::io::Error, what: &str) -> Duration {
        self.pause = (self.pause * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let now = Instant::now();
        match self.logged {
            Some(at) if now.duration_since(at) < ACCEPT_FAILURES_LOGGED_EVERY => self.quiet += 1,
            _ => {
                let more = std::mem::take(&mut self.quiet);
                let more =
                    if more > 0 { format!(" ({more} more failures since the last such line)") } else { String::new() };
                tracing::warn!("{what} cannot accept a connection: {e}{more}; trying again");
                self.logged = Some(now);
            }
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
        assert!(failures.logged.is_some() && failures.quiet == 9, "logged once: {failures:?}");
        failures.accepted();
        assert_eq!(failures.failed(&e, "test").as_millis(), 10);
    }

    #[test]
    fn failed_handshakes_are_logged_once_a_second() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let list = Handshakes::new(8);
        let fail = || {
            let (_client, server) = pair(&listener);
            list.admit(&server).0.note_failure()
        };
        assert_eq!(fail(), Some(0), "the first is logged");
        assert_eq!((fail(), fail(), fail()), (None, None, None), "then none for a second, whatever the reason");
        std::thread::sleep(FAILURES_LOGGED_EVERY);
        assert_eq!(fail(), Some(3), "a second later, one is, with the count of those not logged");
        assert_eq!(fail(), None);
    }
}
