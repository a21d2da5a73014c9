//! What a checkpoint records of the output file, so that a resumed run can tell its own output
//! from a file rewritten or appended to by someone else.
//!
//! The master writes the output file sequentially, so its checksum is kept up to date as records
//! are written ([`OutputSum`]): a checkpoint costs no reading of the file, however long it is.
//! Resuming reads the committed prefix once ([`sum_prefix`]).

use serde::{Deserialize, Serialize};
use std::io::{self, Read};

/// The output file as a checkpoint saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSeal {
    /// CRC-32 of the committed prefix: the first `Checkpoint::output_len` bytes.
    pub crc: u32,
    /// The run wrote nothing to the output after this checkpoint (it was the run's last): the file
    /// must hold exactly the committed prefix. Otherwise the bytes beyond it are records of jobs
    /// committed after the checkpoint, which a resumed run cuts off and writes again.
    pub ended: bool,
}

/// A running checksum of the bytes written to an output file from its start.
#[derive(Clone, Debug, Default)]
pub struct OutputSum(crc32fast::Hasher);

impl OutputSum {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Bytes summed so far.
    pub fn len(&self) -> u64 {
        self.0.total_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The checksum of the bytes summed so far.
    pub fn crc(&self) -> u32 {
        self.0.clone().finalize()
    }
}

/// The checksum of the first `len` bytes read from `reader`; an error if it holds fewer.
pub fn sum_prefix(reader: &mut dyn Read, len: u64) -> io::Result<OutputSum> {
    let mut sum = OutputSum::default();
    let mut buffer = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let want = buffer.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match reader.read(&mut buffer[..want]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file is shorter")),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sum.update(&buffer[..n]);
        left -= n as u64;
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_sum_equals_the_sum_of_the_whole() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut running = OutputSum::default();
        for piece in bytes.chunks(777) {
            running.update(piece);
        }
        let whole = sum_prefix(&mut &bytes[..], bytes.len() as u64).unwrap();
        assert_eq!((running.crc(), running.len()), (whole.crc(), whole.len()));
        assert_eq!(whole.crc(), crc32fast::hash(&bytes));
        // A prefix; a reader too short for the length asked.
        assert_eq!(sum_prefix(&mut &bytes[..], 10).unwrap().crc(), crc32fast::hash(&bytes[..10]));
        assert!(sum_prefix(&mut &bytes[..5], 10).is_err());
    }
}
