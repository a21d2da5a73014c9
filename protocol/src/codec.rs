//! Frames: a 4-byte little-endian length, then that many bytes of postcard. Frames longer than
//! [`MAX_FRAME`] are refused on both sides, before anything is allocated for them. [`FrameCodec`]
//! cuts them for tokio's `FramedRead`; [`FrameDecoder`] for blocking readers (tests, the fuzz target).

use bytes::BytesMut;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io;
use std::marker::PhantomData;

/// The largest frame accepted: 64 MiB.
pub const MAX_FRAME: usize = 64 << 20;

/// The largest frame accepted from a peer that has not proved the token yet: handshake frames are
/// a few dozen bytes, and a stranger must not make a server hold megabytes.
pub const HANDSHAKE_FRAME: usize = 4 << 10;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame of {len} bytes is larger than the limit of {limit}")]
    TooLarge { len: u64, limit: usize },
    #[error("undecodable frame: {0}")]
    Decode(String),
}

/// Appends `message` as one frame to `out`.
pub fn encode_frame<T: Serialize>(message: &T, out: &mut Vec<u8>) -> Result<(), FrameError> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let result = postcard::to_io(message, &mut *out).map(|_| ());
    let len = out.len() - start - 4;
    if let Err(e) = result {
        out.truncate(start);
        return Err(FrameError::Decode(e.to_string()));
    }
    if len > MAX_FRAME {
        out.truncate(start);
        return Err(FrameError::TooLarge { len: len as u64, limit: MAX_FRAME });
    }
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(())
}

/// Collects bytes as they arrive and cuts them into frames.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    start: usize,
    /// The largest frame accepted.
    limit: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self { buf: Vec::new(), start: 0, limit: MAX_FRAME }
    }
}

impl FrameDecoder {
    /// A decoder of frames up to [`MAX_FRAME`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder for a handshake: frames up to [`HANDSHAKE_FRAME`] until
    /// [`authenticated`](Self::authenticated).
    pub fn handshake() -> Self {
        Self { limit: HANDSHAKE_FRAME, ..Self::default() }
    }

    /// The peer proved the token: frames up to [`MAX_FRAME`] from now on.
    pub fn authenticated(&mut self) {
        self.limit = MAX_FRAME;
    }

    /// Adds bytes read from the peer.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, or an error if the stream is
    /// corrupt (after which the connection should be dropped).
    pub fn decode<T: DeserializeOwned>(&mut self) -> Result<Option<T>, FrameError> {
        let pending = &self.buf[self.start..];
        let Some(len) = frame_length(pending, self.limit)? else { return Ok(None) };
        if pending.len() < 4 + len {
            return Ok(None);
        }
        let message = decode_body(&pending[4..4 + len])?;
        self.start += 4 + len;
        // Keep the buffer from growing without bound on a long stream.
        if self.start > (1 << 20) && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(message))
    }

    /// Bytes received but not yet decoded.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// The length announced by the frame starting `pending`, once its 4 bytes are there; an error if it
/// exceeds `limit`.
fn frame_length(pending: &[u8], limit: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = pending.first_chunk::<4>() else { return Ok(None) };
    let len = u32::from_le_bytes(*prefix) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len: len as u64, limit });
    }
    Ok(Some(len))
}

fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    postcard::from_bytes(body).map_err(|e| FrameError::Decode(e.to_string()))
}

/// Frames of `T` for tokio-util's `FramedRead`, with the same limits as [`FrameDecoder`]. An error
/// ([`io::ErrorKind::Other`] wrapping a [`FrameError`]) means the stream is corrupt.
#[derive(Debug)]
pub struct FrameCodec<T> {
    limit: usize,
    frames: PhantomData<fn() -> T>,
}

impl<T> Default for FrameCodec<T> {
    fn default() -> Self {
        Self { limit: MAX_FRAME, frames: PhantomData }
    }
}

impl<T> FrameCodec<T> {
    /// Frames up to [`MAX_FRAME`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Frames up to [`HANDSHAKE_FRAME`] until [`authenticated`](Self::authenticated).
    pub fn handshake() -> Self {
        Self { limit: HANDSHAKE_FRAME, frames: PhantomData }
    }

    /// The peer proved the token: frames up to [`MAX_FRAME`] from now on.
    pub fn authenticated(&mut self) {
        self.limit = MAX_FRAME;
    }
}

impl<T: DeserializeOwned> tokio_util::codec::Decoder for FrameCodec<T> {
    type Item = T;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<T>> {
        let Some(len) = frame_length(src, self.limit).map_err(io::Error::other)? else { return Ok(None) };
        if src.len() < 4 + len {
            // Room for the rest of the frame at once, rather than growing a few KiB per read.
            src.reserve(4 + len - src.len());
            return Ok(None);
        }
        let frame = src.split_to(4 + len);
        decode_body(&frame[4..]).map(Some).map_err(io::Error::other)
    }

    /// The stream ended: a frame cut short says so (tokio-util's own words: "bytes remaining on
    /// stream").
    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<T>> {
        match self.decode(src)? {
            None if !src.is_empty() => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the connection closed in the middle of a frame ({} bytes of it came)", src.len()),
            )),
            frame => Ok(frame),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Budget, FromWorker, Job, JobId, JobReport, MasterFrame, NodeBytes, ReportBatch, Returned, ToWorker, WorkerFrame,
    };
    use proptest::prelude::*;

    fn samples() -> Vec<WorkerFrame> {
        let report = JobReport {
            id: JobId(7),
            visited: 100,
            leaves: Some(60),
            max_depth: None,
            outputs: 2,
            returned: 1,
            output_bytes: 6,
            elapsed_ns: 12345,
            counters: vec![3, 1],
            pruned: 4,
        };
        vec![
            WorkerFrame::Hello { threads: 4, nonce: [9; 32], peer_address: Some("10.0.0.2:4000".into()) },
            WorkerFrame::Auth { tag: [1; 32] },
            WorkerFrame::Message {
                thread: 3,
                message: FromWorker::Reports(ReportBatch {
                    reports: vec![report],
                    returned: vec![Returned { depth: 5, node: NodeBytes::from_slice(&[1, 2, 3]) }],
                    output: b"a\nbb\n\n".to_vec(),
                    solutions: vec![crate::Solution { value: -5, record: b"x y".to_vec() }],
                }),
            },
            WorkerFrame::Pong { seq: u64::MAX },
        ]
    }

    #[test]
    fn a_stream_that_ends_inside_a_frame_says_so() {
        use tokio_util::codec::Decoder;
        let mut stream = Vec::new();
        encode_frame(&samples()[0], &mut stream).unwrap();
        let mut codec = FrameCodec::<WorkerFrame>::new();
        let mut whole = BytesMut::from(&stream[..]);
        assert_eq!(codec.decode_eof(&mut whole).unwrap(), Some(samples()[0].clone()));
        assert_eq!(codec.decode_eof(&mut whole).unwrap(), None);
        let mut cut = BytesMut::from(&stream[..stream.len() - 1]);
        let e = codec.decode_eof(&mut cut).unwrap_err();
        let expected =
            format!("the connection closed in the middle of a frame ({} bytes of it came)", stream.len() - 1);
        assert_eq!(e.to_string(), expected);
    }

    #[test]
    fn frames_decode_when_split_at_every_byte_offset() {
        let mut stream = Vec::new();
        for f in samples() {
            encode_frame(&f, &mut stream).unwrap();
        }
        for cut in 0..=stream.len() {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                d.feed(part);
                while let Some(f) = d.decode::<WorkerFrame>().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, samples(), "cut at {cut}");
            assert_eq!(d.pending(), 0);
        }
        // Byte by byte.
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for b in &stream {
            d.feed(std::slice::from_ref(b));
            while let Some(f) = d.decode::<WorkerFrame>().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, samples());
    }

    #[test]
    fn the_codec_decodes_frames_split_at_every_byte_offset_and_byte_by_byte() {
        use tokio_util::codec::Decoder;
        let mut stream = Vec::new();
        for f in samples() {
            encode_frame(&f, &mut stream).unwrap();
        }
        let decode_all = |codec: &mut FrameCodec<WorkerFrame>, buf: &mut BytesMut, got: &mut Vec<WorkerFrame>| {
            while let Some(f) = codec.decode(buf).unwrap() {
                got.push(f);
            }
        };
        for cut in 0..=stream.len() {
            let (mut codec, mut buf, mut got) = (FrameCodec::new(), BytesMut::new(), Vec::new());
            for part in [&stream[..cut], &stream[cut..]] {
                buf.extend_from_slice(part);
                decode_all(&mut codec, &mut buf, &mut got);
            }
            assert_eq!(got, samples(), "cut at {cut}");
            assert!(buf.is_empty());
        }
        let (mut codec, mut buf, mut got) = (FrameCodec::new(), BytesMut::new(), Vec::new());
        for b in &stream {
            buf.extend_from_slice(std::slice::from_ref(b));
            decode_all(&mut codec, &mut buf, &mut got);
        }
        assert_eq!(got, samples());
    }

    #[test]
    fn the_codec_refuses_oversized_lengths_with_the_handshake_and_the_frame_limits() {
        use tokio_util::codec::Decoder;
        let too_large = |codec: &mut FrameCodec<WorkerFrame>, bytes: &[u8]| {
            let err = codec.decode(&mut BytesMut::from(bytes)).unwrap_err();
            err.into_inner().unwrap().downcast::<FrameError>().map(|e| *e).unwrap()
        };
        let limit = FrameError::TooLarge { len: u64::from(u32::MAX), limit: MAX_FRAME };
        assert_eq!(too_large(&mut FrameCodec::new(), &u32::MAX.to_le_bytes()), limit);
        let len = HANDSHAKE_FRAME as u32 + 1;
        let mut codec = FrameCodec::handshake();
        let refused = FrameError::TooLarge { len: u64::from(len), limit: HANDSHAKE_FRAME };
        assert_eq!(too_large(&mut codec, &len.to_le_bytes()), refused);
        codec.authenticated();
        assert_eq!(codec.decode(&mut BytesMut::from(&len.to_le_bytes()[..])).unwrap(), None);
    }

    #[test]
    fn an_oversized_length_is_refused_before_its_bytes_arrive() {
        let mut d = FrameDecoder::new();
        d.feed(&u32::MAX.to_le_bytes());
        assert_eq!(d.decode::<WorkerFrame>(), Err(FrameError::TooLarge { len: u32::MAX as u64, limit: MAX_FRAME }));
        let mut d = FrameDecoder::new();
        d.feed(b"GET / HTTP/1.1\r\n");
        assert!(matches!(d.decode::<WorkerFrame>(), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn before_the_token_is_proved_only_handshake_sized_frames_pass() {
        let len = HANDSHAKE_FRAME as u32 + 1;
        let mut d = FrameDecoder::handshake();
        d.feed(&len.to_le_bytes());
        let refused = Err(FrameError::TooLarge { len: u64::from(len), limit: HANDSHAKE_FRAME });
        assert_eq!(d.decode::<WorkerFrame>(), refused);
        // Once authenticated, the same length is only a frame still arriving.
        let mut d = FrameDecoder::handshake();
        d.feed(&len.to_le_bytes());
        d.authenticated();
        assert_eq!(d.decode::<WorkerFrame>(), Ok(None));
        // Every handshake frame fits.
        let hello = WorkerFrame::Hello { threads: 4096, nonce: [7; 32], peer_address: Some("x".repeat(300)) };
        let mut bytes = Vec::new();
        encode_frame(&hello, &mut bytes).unwrap();
        let mut d = FrameDecoder::handshake();
        d.feed(&bytes);
        assert_eq!(d.decode::<WorkerFrame>(), Ok(Some(hello)));
    }

    #[test]
    fn a_frame_too_large_to_send_is_refused_and_leaves_the_buffer_as_it_was() {
        let big = MasterFrame::Message {
            thread: 0,
            message: ToWorker::Jobs(vec![Job {
                id: JobId(1),
                depth: 0,
                budget: Budget(1),
                max_depth: None,
                node: NodeBytes::from_slice(&vec![0u8; MAX_FRAME]),
                incumbent: Default::default(),
            }]),
        };
        let mut out = vec![1, 2, 3];
        assert!(matches!(encode_frame(&big, &mut out), Err(FrameError::TooLarge { .. })));
        assert_eq!(out, vec![1, 2, 3]);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
            let mut d = FrameDecoder::new();
            for c in chunks {
                d.feed(&c);
                while let Ok(Some(_)) = d.decode::<WorkerFrame>() {}
            }
        }
    }
}
