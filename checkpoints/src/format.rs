//! Encoding and decoding checkpoints, with every way a file can be wrong named.

use crate::{Checkpoint, OutputSeal, usable_seconds};

pub const MAGIC: [u8; 8] = *b"bts-ckpt";
/// Version 2 added the [`OutputSeal`] and the tree's counters, version 3 the branch and bound's
/// [`StoredOptimum`](crate::StoredOptimum), version 4 the input digest, version 5 the length of
/// the best records at the end of the output, version 6 whether the run's segments ran in both
/// modes, version 7 whether the run is a branch and bound; older files are still read.
pub const CURRENT_VERSION: u32 = 7;
const HEADER: usize = 8 + 4 + 8 + 4;

/// Why a file is not a checkpoint this bts can use.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("the file is empty")]
    Empty,
    #[error("not a bts checkpoint")]
    Foreign,
    #[error("written by a newer bts (format version {found}; this bts reads up to version {supported})")]
    Newer { found: u32, supported: u32 },
    #[error("format version {0} is not one this bts knows")]
    UnknownVersion(u32),
    #[error("truncated: {found} bytes where {expected} were expected")]
    Truncated { expected: u64, found: u64 },
    #[error("corrupt: {0}")]
    Corrupt(String),
}

/// The bytes of a checkpoint file.
pub fn encode(checkpoint: &Checkpoint) -> Vec<u8> {
    let mut payload = postcard::to_allocvec(checkpoint).expect("checkpoints serialise");
    payload.extend(postcard::to_allocvec(&checkpoint.seal).expect("seals serialise"));
    payload.extend(postcard::to_allocvec(&checkpoint.counters).expect("counters serialise"));
    payload.extend(postcard::to_allocvec(&checkpoint.optimum).expect("optima serialise"));
    payload.extend(postcard::to_allocvec(&checkpoint.input_digest).expect("digests serialise"));
    payload.extend(postcard::to_allocvec(&checkpoint.optimum.best_len).expect("lengths serialise"));
    payload.extend(postcard::to_allocvec(&checkpoint.mixed_modes).expect("flags serialise"));
    payload.extend(postcard::to_allocvec(&checkpoint.optimum.optimises).expect("flags serialise"));
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&CURRENT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = checksum(&out[8..20], &payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The format version in the header of a checkpoint file's bytes, if they have one.
pub fn version_of(bytes: &[u8]) -> Option<u32> {
    let header = bytes.get(..12).filter(|h| h[..8] == MAGIC)?;
    Some(u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")))
}

/// Reads a checkpoint from the bytes of a file; never panics, whatever the bytes.
pub fn decode(bytes: &[u8]) -> Result<Checkpoint, LoadError> {
    if bytes.is_empty() {
        return Err(LoadError::Empty);
    }
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(LoadError::Foreign);
    }
    if bytes.len() < HEADER {
        return Err(LoadError::Truncated { expected: HEADER as u64, found: bytes.len() as u64 });
    }
    let version = version_of(bytes).expect("a full header with the magic");
    // Everything after the version may differ in later formats; a version thousands ahead is a
    // damaged header (one flipped bit of it reads as 65,541), not a newer bts.
    if version > CURRENT_VERSION.saturating_add(1000) {
        return Err(LoadError::Corrupt(format!("its header names format version {version}, which no bts writes")));
    }
    if version > CURRENT_VERSION {
        return Err(LoadError::Newer { found: version, supported: CURRENT_VERSION });
    }
    let length = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    let payload = &bytes[HEADER..];
    if (payload.len() as u64) < length {
        return Err(LoadError::Truncated {
            expected: (HEADER as u64).saturating_add(length),
            found: bytes.len() as u64,
        });
    }
    if payload.len() as u64 > length {
        let extra = payload.len() as u64 - length;
        return Err(LoadError::Corrupt(format!("{extra} bytes after the end of the checkpoint")));
    }
    if checksum(&bytes[8..20], payload) != crc {
        return Err(LoadError::Corrupt("checksum mismatch".into()));
    }
    if version == 0 {
        return Err(LoadError::UnknownVersion(version));
    }
    let cannot_decode = |e: postcard::Error| LoadError::Corrupt(format!("cannot decode the contents: {e}"));
    let (mut checkpoint, mut rest) = postcard::take_from_bytes::<Checkpoint>(payload).map_err(cannot_decode)?;
    if version >= 2 {
        (checkpoint.seal, rest) = postcard::take_from_bytes::<Option<OutputSeal>>(rest).map_err(cannot_decode)?;
        (checkpoint.counters, rest) = postcard::take_from_bytes::<Vec<u64>>(rest).map_err(cannot_decode)?;
    }
    if version >= 3 {
        (checkpoint.optimum, rest) = postcard::take_from_bytes(rest).map_err(cannot_decode)?;
    }
    if version >= 4 {
        (checkpoint.input_digest, rest) = postcard::take_from_bytes(rest).map_err(cannot_decode)?;
    }
    if version >= 5 {
        (checkpoint.optimum.best_len, rest) = postcard::take_from_bytes(rest).map_err(cannot_decode)?;
    } else {
        checkpoint.optimum.best_len = best_written_before_version_5(&checkpoint);
    }
    if version >= 6 {
        (checkpoint.mixed_modes, rest) = postcard::take_from_bytes(rest).map_err(cannot_decode)?;
    }
    if version >= 7 {
        (checkpoint.optimum.optimises, rest) = postcard::take_from_bytes(rest).map_err(cannot_decode)?;
    } else if checkpoint.optimum.best.is_some() || checkpoint.optimum.pruned > 0 {
        checkpoint.optimum.optimises = Some(true);
    }
    if !rest.is_empty() {
        return Err(LoadError::Corrupt("trailing bytes in the contents".into()));
    }
    check_times(&checkpoint)?;
    let best_len = checkpoint.optimum.best_len;
    if best_len > checkpoint.output_len || (best_len > 0 && best_len != records_len(&checkpoint)) {
        return Err(LoadError::Corrupt(format!(
            "{best_len} bytes of best records in an output of {} bytes",
            checkpoint.output_len
        )));
    }
    Ok(checkpoint)
}

/// The best records an older file's output ends with: a branch and bound wrote them when it
/// completed (a stop at its target cannot be told apart, and is taken as not written).
fn best_written_before_version_5(checkpoint: &Checkpoint) -> u64 {
    let Some(best) = checkpoint.optimum.best.as_ref().filter(|_| checkpoint.is_complete()) else {
        return 0;
    };
    let len = records_len(checkpoint);
    let fits = checkpoint.totals.outputs >= best.records.len() as u64 && checkpoint.output_len >= len;
    if fits { len } else { 0 }
}

/// The bytes the best records take in the output, a line each.
fn records_len(checkpoint: &Checkpoint) -> u64 {
    checkpoint.optimum.best.iter().flat_map(|b| &b.records).map(|r| r.len() as u64 + 1).sum()
}

/// The times a checkpoint holds must be ones a clock can take.
fn check_times(checkpoint: &Checkpoint) -> Result<(), LoadError> {
    if !usable_seconds(checkpoint.elapsed_s) {
        return Err(LoadError::Corrupt(format!(
            "elapsed_s is {}, not a usable number of seconds",
            checkpoint.elapsed_s
        )));
    }
    if let Some(every) = checkpoint.options.checkpoint_every
        && !(usable_seconds(every) && every > 0.0)
    {
        return Err(LoadError::Corrupt(format!("checkpoint_every is {every}, not a usable number of seconds")));
    }
    Ok(())
}

fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(payload);
    h.finalize()
}
