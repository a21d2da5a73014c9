//! Checkpoint files on disk: replaced atomically, read without ever being modified.

use crate::{Checkpoint, LoadError, MAGIC, decode, encode};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Writes `checkpoint` to `path` atomically: the bytes go to a temporary file in the same folder,
/// which is synced, renamed over `path`, and the folder synced. A crash at any moment leaves either
/// the previous checkpoint or the new one, both complete.
pub fn write(path: &Path, checkpoint: &Checkpoint) -> io::Result<()> {
    write_atomically(path, &encode(checkpoint), false)
}

/// Replaces `path` with `bytes` as [`write()`] does; `private` makes the file readable by its owner
/// only (it holds a secret).
pub fn write_atomically(path: &Path, bytes: &[u8], private: bool) -> io::Result<()> {
    let tmp = temporary_path(path);
    let result = (|| {
        // A temporary file left by a crash goes first: the new one is created afresh, with the
        // mode asked for, and never through a link someone put in its place.
        let _ = fs::remove_file(&tmp);
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        sync_folder(path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads the checkpoint at `path`.
pub fn load(path: &Path) -> Result<Checkpoint, LoadError> {
    decode(&read_bytes(path)?)
}

/// The bytes of the checkpoint file at `path`: a regular file (a pipe would block, a device never
/// end), read whole only if it starts as a checkpoint does (a large file named by mistake is not;
/// [`decode`] then says what it is).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, LoadError> {
    let failed = |source| LoadError::Io { path: path.display().to_string(), source };
    if !fs::metadata(path).map_err(failed)?.is_file() {
        return Err(failed(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")));
    }
    let mut file = File::open(path).map_err(failed)?;
    let mut bytes = Vec::new();
    (&mut file).take(MAGIC.len() as u64).read_to_end(&mut bytes).map_err(failed)?;
    if bytes[..] == MAGIC {
        file.read_to_end(&mut bytes).map_err(failed)?;
    }
    Ok(bytes)
}

/// Where [`write_atomically`] writes `path`'s new bytes before renaming them over it: `.NAME.tmp`
/// beside it, removed first if a crash left it.
pub fn temporary_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    path.with_file_name(format!(".{name}.tmp"))
}

fn sync_folder(path: &Path) -> io::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(folder)?.sync_all()
}
