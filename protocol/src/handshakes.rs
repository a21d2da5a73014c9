//! Connections still in their handshake, bounded. Anyone who can reach a port may open connections
//! and say nothing, so a server keeps at most a fixed number of them: past it, the oldest is dropped
//! to make room. A real peer proves the token within a round trip or two and leaves the list, so
//! strangers can neither hold the slots meant for authenticated peers nor lock a real one out.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

/// How many connections may be in their handshake at once, by default.
pub const MAX_HANDSHAKES: usize = 64;

/// The connections in their handshake.
#[derive(Debug)]
pub struct Handshakes {
    limit: usize,
    open: Mutex<Open>,
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
        Arc::new(Self { limit: limit.max(1), open: Mutex::default() })
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

impl Drop for InHandshake {
    fn drop(&mut self) {
        let mut open = self.list.open.lock().unwrap_or_else(|e| e.into_inner());
        open.streams.retain(|(id, _)| *id != self.id);
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
}
