//! The files of a run: checked together before any is opened for writing, locked against a second
//! bts, and the output file, which keeps a running checksum for checkpoints and is cut only once
//! the run writes to it (so a refusal up to then leaves it as it was).

use super::CliError;
use super::args::RunArgs;
use bts_checkpoints::{Checkpoint, OutputSum, sum_prefix};
use bts_master::Output;
use bts_protocol::TreeSpec;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A path made absolute (without resolving links), as checkpoints record them.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A path as it goes into a command shown to the user: quoted where a shell would split it.
pub fn typed(path: &Path) -> String {
    bts_protocol::shell_word(&path.to_string_lossy()).into_owned()
}

/// A path, absolute, and the file a symbolic link names rather than the link: where a run writes
/// a file given by a link. A checkpoint's save renames a new file over the path, which would
/// replace the link (leaving the file it names stale), and the lock beside it must be the file's,
/// whichever name a run is given.
pub fn link_target(path: &Path) -> PathBuf {
    let mut path = absolute(path);
    // A link to a checkpoint not yet written names no file yet: follow it by hand (a chain too,
    // but not a loop).
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&path) else { break };
        path = absolute(&path.parent().map_or(target.clone(), |folder| folder.join(&target)));
    }
    path
}

/// Checks the files a run will use, before any is opened for writing: no file given to two
/// options, none that the tree's options name (its input, a program), and every file to be
/// written in an existing folder, and writable if it exists. `output` and `checkpoint` are the
/// run's (when resuming, those the checkpoint names).
pub fn check(
    args: &RunArgs,
    tree: &TreeSpec,
    output: Option<&Path>,
    checkpoint: Option<&Path>,
) -> Result<(), CliError> {
    let o = &args.output;
    if o.summary_json.as_deref().is_some_and(|p| p.as_os_str() == "-") && !stdout_is_open() {
        return Err(CliError::usage("stdout is closed, so the summary cannot go there: give --summary-json a file"));
    }
    let summary = o.summary_json.as_deref().filter(|p| p.as_os_str() != "-");
    let written = [
        ("--output", output, "output"),
        ("--checkpoint", checkpoint, "checkpoint"),
        ("--summary-json", summary, "summary"),
        ("--hist", o.hist.as_deref(), "history (--hist)"),
        ("--freq", o.freq.as_deref(), "job sizes (--freq)"),
        ("--address-file", args.remote.address_file.as_deref(), "address"),
        ("--rendezvous", args.remote.rendezvous.as_deref(), "rendezvous"),
    ];
    // A regular file that stdout or stderr goes to (`/dev/stdout`, or `> FILE` named again) would
    // be written from two places, each cutting or overwriting the other's bytes; the summary alone
    // is added to the stream instead.
    for (option, path, what) in written.iter().filter(|w| w.0 != "--summary-json") {
        let Some(path) = path.filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file())) else { continue };
        if let Some(fd) = standard_stream(path) {
            let stream = if fd == 1 { "stdout" } else { "stderr" };
            return Err(CliError::usage(format!(
                "{} is the file {stream} goes to: the {what} and what bts prints there would overwrite each \
                 other; give {option} another file",
                path.display()
            )));
        }
    }
    let read =
        [("--stop-file", args.stopping.stop_file.as_deref()), ("--token-file", args.remote.token_file.as_deref())];
    let named: Vec<(&str, &Path)> = written
        .iter()
        .map(|&(option, path, _)| (option, path))
        .chain(read)
        .filter_map(|(option, path)| Some((option, path?)))
        .collect();
    for (i, (a, path_a)) in named.iter().enumerate() {
        if let Some((b, _)) = named[..i].iter().find(|(_, path_b)| same_file(path_a, path_b)) {
            return Err(CliError::usage(format!(
                "{} is given as both {b} and {a}: give each its own file",
                path_a.display()
            )));
        }
    }
    // A file replaced atomically comes with a temporary file and a lock beside it, which bts
    // removes and writes: another option naming one of them would lose its file.
    let atomic = [
        ("--checkpoint", checkpoint),
        ("--address-file", args.remote.address_file.as_deref()),
        ("--rendezvous", args.remote.rendezvous.as_deref()),
    ];
    let companions: Vec<(String, PathBuf)> = atomic
        .into_iter()
        .filter_map(|(option, path)| Some((option, path?)))
        .flat_map(|(option, path)| {
            [
                (format!("the temporary file of {option}"), bts_checkpoints::temporary_path(path)),
                (format!("the lock file of {option}"), lock_path(path)),
            ]
        })
        .collect();
    for (option, path) in &named {
        if let Some((what, _)) = companions.iter().find(|(_, companion)| same_file(path, companion)) {
            return Err(CliError::usage(format!(
                "{} is {what}, which bts writes over: give {option} another file",
                path.display()
            )));
        }
    }
    // A tree's files are its options' words, or what follows `=` in `--file=F`.
    let tree_files = tree.args.iter().flat_map(|a| [Some(a.as_str()), a.split_once('=').map(|(_, f)| f)]).flatten();
    for word in tree_files.filter(|w| std::fs::metadata(w).is_ok_and(|m| m.is_file())) {
        if let Some((option, ..)) =
            written.iter().find(|(_, path, _)| path.is_some_and(|p| same_file(p, Path::new(word))))
        {
            return Err(CliError::usage(format!(
                "{word} is the tree's own file ({}), and {option} would overwrite it: give {option} another file",
                tree.command_line()
            )));
        }
    }
    // A resumed run's output is the checkpoint's unless --output is given.
    let (output_name, output_why) = match o.output {
        Some(_) => (
            "--output",
            "the output is a file that a resumed run cuts back to its checkpoint; leave out --output to have the \
             records on stdout",
        ),
        None => (
            "the checkpoint's output file",
            "the output is a file that a resumed run cuts back to its checkpoint; give --output FILE if it is elsewhere",
        ),
    };
    let needs_a_file = [
        (output_name, output, output_why),
        ("--checkpoint", checkpoint, "a checkpoint is a file that the run replaces as it goes"),
    ];
    for (option, path, why) in needs_a_file {
        if let Some(path) = path.filter(|p| std::fs::metadata(p).is_ok_and(|m| !m.is_file())) {
            return Err(CliError::usage(format!(
                "{option} {} is a folder, a pipe or a device, not a regular file: {why}",
                path.display()
            )));
        }
    }
    for (_, path, what) in written {
        if let Some(path) = path {
            check_writable(path)
                .map_err(|e| CliError::usage(format!("cannot write the {what} file {}: {e}", path.display())))?;
        }
    }
    // These are replaced by a new file, made beside them (through a link, where it points).
    for (option, path) in atomic.iter().filter_map(|&(option, path)| Some((option, path?))) {
        let path = link_target(path);
        check_folder(&path).map_err(|e| CliError::usage(format!("cannot write {option} {}: {e}", path.display())))?;
    }
    // The run replaces these files as it starts and removes an address file as it ends: anything
    // else at their paths stays as it was. The other ranks of a launch refuse such a rendezvous
    // file too (see `bts_worker::remote`).
    let address_files = [
        ("--address-file", args.remote.address_file.as_deref(), "an address file"),
        ("--rendezvous", args.remote.rendezvous.as_deref(), "a rendezvous file"),
    ];
    for (option, file, kind) in address_files {
        if let Some(why) = file.and_then(bts_worker::remote::why_not_replaced) {
            return Err(CliError::usage(format!(
                "{option}: {why}; the run would replace it with {kind}: remove it, or give {option} a file of its own"
            )));
        }
    }
    Ok(())
}

/// A run replaces its checkpoint file as it goes: refuse a file that holds what should not be lost,
/// another run's unfinished checkpoint or anything that is not a checkpoint (a complete run's
/// checkpoint and an empty file may go). `resumed_from` is the checkpoint a resumed run carries on.
pub fn check_replaceable(checkpoint: &Path, resumed_from: Option<&Path>) -> Result<(), CliError> {
    if resumed_from.is_some_and(|from| same_file(from, checkpoint)) {
        return Ok(());
    }
    if std::fs::metadata(checkpoint).map_or(true, |m| m.len() == 0) {
        return Ok(());
    }
    let path = checkpoint.display();
    match bts_checkpoints::load(checkpoint) {
        Ok(saved) if saved.is_complete() => Ok(()),
        Ok(saved) => Err(CliError::usage(format!(
            "--checkpoint {path} holds the checkpoint of an unfinished run ({}, {} nodes so far), which \
             this run would replace: carry it on with bts resume {path}, or give another file",
            saved.tree.command_line(),
            saved.totals.nodes
        ))),
        Err(e) => Err(CliError::usage(format!(
            "--checkpoint {path} exists and cannot be read as a checkpoint ({e}): the run would \
             replace it; give another file, or remove this one"
        ))),
    }
}

/// Whether two paths name one file: the same file if both exist, else the same absolute path.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => absolute(a) == absolute(b),
    }
}

/// `-` is stdout for --summary-json only (records go there without --output): as any other file
/// option's name it would make a file called `-`.
pub fn refuse_dash(args: &RunArgs) -> Result<(), CliError> {
    no_dash(&[
        ("--checkpoint", &args.stopping.checkpoint),
        ("--stop-file", &args.stopping.stop_file),
        ("--hist", &args.output.hist),
        ("--freq", &args.output.freq),
        ("--address-file", &args.remote.address_file),
        ("--token-file", &args.remote.token_file),
        ("--rendezvous", &args.remote.rendezvous),
    ])
}

/// Refuses `-` as the file of any of these options.
pub fn no_dash(files: &[(&str, &Option<PathBuf>)]) -> Result<(), CliError> {
    match files.iter().find(|(_, path)| path.as_ref().is_some_and(|p| p.as_os_str() == "-")) {
        Some((option, _)) => {
            Err(CliError::usage(format!("{option} -: `-` names no file here (give ./- for a file of that name)")))
        }
        None => Ok(()),
    }
}

/// Whether this process has a stdout: it had none if it was started with stdout closed (`>&-`),
/// which Rust's runtime then opens on /dev/null, where what bts writes would be lost without a word.
pub fn stdout_is_open() -> bool {
    !STDOUT_CLOSED_AT_START.load(Ordering::Relaxed)
}

static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// Looks at stdout before Rust's runtime starts (the loader runs `.init_array` first).
#[used]
#[unsafe(link_section = ".init_array")]
static SEE_STDOUT_AT_START: extern "C" fn() = {
    extern "C" fn see() {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        let closed = unsafe { libc::fcntl(1, libc::F_GETFD) } == -1;
        STDOUT_CLOSED_AT_START.store(closed, Ordering::Relaxed);
    }
    see
};

/// 1 or 2 when `path` is the file that stdout or stderr writes to (`/dev/stdout`, or the file
/// they were redirected to).
pub fn standard_stream(path: &Path) -> Option<i32> {
    let m = std::fs::metadata(path).ok()?;
    [1, 2].into_iter().find(|&fd| {
        // SAFETY: fstat writes only the zeroed struct it is given.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        unsafe { libc::fstat(fd, &mut st) == 0 && (st.st_dev as u64, st.st_ino as u64) == (m.dev(), m.ino()) }
    })
}

/// Whether `path` can be written, without creating or changing it.
fn check_writable(path: &Path) -> io::Result<()> {
    // A link, even a dangling one, makes the file where it points.
    let path = link_target(path);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => return OpenOptions::new().write(true).open(&path).map(drop),
        Ok(m) if m.is_dir() => {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, format!("{} is a folder", path.display())));
        }
        // A pipe opened and closed would tell its reader the end has come (and with no reader,
        // opening it waits): its permissions say enough.
        Ok(_) => return writable(&path, libc::W_OK),
        Err(_) => {}
    }
    // A file made at the end (the summary) must not find out then that it cannot be.
    check_folder(&path)
}

/// Whether files can be made in `path`'s folder (a file replaced atomically is made anew there).
fn check_folder(path: &Path) -> io::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => {
            writable(folder, libc::W_OK | libc::X_OK).map_err(|e| io::Error::new(e.kind(), format!("its folder: {e}")))
        }
        Ok(_) => Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} is not a folder", folder.display()))),
        Err(e) => Err(io::Error::new(e.kind(), format!("no folder {}", folder.display()))),
    }
}

/// Whether `e` is a disk full or failing, or a file at its size limit: no fault of the command line
/// (exit 1, not 2).
pub fn disk_trouble(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge)
        || e.raw_os_error() == Some(libc::EIO)
}

/// Whether this process may `mode` (`W_OK`, and `X_OK` to make a file in a folder) `path`, as its
/// effective user with its capabilities.
fn writable(path: &Path, mode: libc::c_int) -> io::Result<()> {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: faccessat only reads the NUL-terminated name.
    match unsafe { libc::faccessat(libc::AT_FDCWD, name.as_ptr(), mode, libc::AT_EACCESS) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Takes an exclusive advisory lock (`flock`) on `file`: false if another open file holds it.
/// The kernel releases a lock when its file is closed, however the process ends, but a program
/// that a killed bts was starting holds bts's files until it runs its own code, which on a loaded
/// machine may take a while: so a held lock is tried again for [`LOCK_GRACE`].
fn try_lock(file: &File) -> io::Result<bool> {
    let deadline = Instant::now() + LOCK_GRACE;
    loop {
        // SAFETY: flock on a descriptor that `file` owns and keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) if Instant::now() >= deadline => return Ok(false),
            Some(libc::EWOULDBLOCK) => std::thread::sleep(Duration::from_millis(10)),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

/// How long a held lock is tried again before bts says the file is in use.
const LOCK_GRACE: Duration = Duration::from_secs(1);

/// The lock of a file a run replaces or removes (its checkpoint, its address file): held while the
/// run goes on. Such a file comes and goes, so the lock is on a file of its own beside it,
/// `.NAME.lock`, which holds the owner's process id.
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Locks `path`, the run's `what` ("checkpoint").
    pub fn take(path: &Path, what: &str) -> Result<Self, CliError> {
        Self::try_take(path, what).map_err(|e| match e {
            Refused::Held(e) | Refused::Failed(e) => e,
        })
    }

    /// As [`take`](Self::take), telling a lock another bts holds from one that cannot be taken.
    pub fn try_take(path: &Path, what: &str) -> Result<Self, Refused> {
        let lock = lock_path(path);
        let cannot = |e: io::Error| {
            let message = format!("cannot lock the {what} {}: {}: {e}", path.display(), lock.display());
            Refused::Failed(if disk_trouble(&e) { CliError::failure(message) } else { CliError::usage(message) })
        };
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&lock).map_err(cannot)?;
        if !try_lock(&file).map_err(cannot)? {
            let owner = std::fs::read_to_string(&lock).unwrap_or_default();
            let owner = owner.trim();
            let owner = if owner.is_empty() { String::new() } else { format!(" (process {owner})") };
            return Err(Refused::Held(CliError::usage(format!(
                "the {what} {} is in use by another bts{owner}; wait for it to end, or stop it first",
                path.display()
            ))));
        }
        let pid = std::process::id().to_string();
        file.set_len(0).and_then(|_| file.write_all(pid.as_bytes())).map_err(cannot)?;
        Ok(Self { _file: file })
    }
}

/// The lock file of `path`: `.NAME.lock` beside it.
fn lock_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.lock"))
}

/// Why a [`RunLock`] was not taken.
pub enum Refused {
    /// Another bts holds it.
    Held(CliError),
    /// The file system refused (some shared ones have no `flock`).
    Failed(CliError),
}

/// Opens `path` for writing without changing it, and locks it.
fn open_locked(path: &Path, create: bool) -> Result<File, CliError> {
    // Appending: whatever else cuts or writes the file, the run's records go to its end, and the
    // file's length then tells (see `FileOutput::still_there`).
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(create)
        .truncate(false)
        .open(path)
        .map_err(|e| CliError::usage(format!("cannot write the output file {}: {e}", path.display())))?;
    let locked =
        try_lock(&file).map_err(|e| CliError::usage(format!("cannot lock the output file {}: {e}", path.display())))?;
    if !locked {
        return Err(CliError::usage(format!(
            "the output file {} is in use by another bts; wait for it to end, or stop it first",
            path.display()
        )));
    }
    Ok(file)
}

/// The output file of a run, locked, with a running checksum of what it holds.
pub struct FileOutput {
    writer: BufWriter<File>,
    path: PathBuf,
    sum: OutputSum,
    /// The records start this far into the file, after a tree's header (see `FileFrame`): lengths
    /// and checksums are of the records only.
    offset: u64,
    /// A new file's header, written when the run starts writing.
    header: Option<Vec<u8>>,
    /// Where the run starts writing, in bytes of records: the file is cut there at the first write
    /// or sync.
    start: Option<u64>,
    /// The checksums at the start and at the last sync: the places a rollback returns to.
    marks: [OutputSum; 2],
}

impl FileOutput {
    /// The output file of a new run: created if need be, emptied when the run starts writing, and
    /// then given `header` (a tree's, before its records).
    pub fn create(path: &Path, header: &str) -> Result<Self, CliError> {
        let file = open_locked(path, true)?;
        let mut output = Self::new(file, path, OutputSum::default(), header.len() as u64);
        output.header = Some(header.as_bytes().to_vec());
        Ok(output)
    }

    /// The output file of a run resumed from `checkpoint`: it must hold the records the
    /// checkpoint committed, as its seal records them; bytes written after the checkpoint by the
    /// run itself, and a branch and bound's best records, are cut off when the run starts writing.
    /// `(header, footer)`: the lengths of a tree's frame around the records (the footer ends a
    /// complete run's file).
    pub fn reopen(path: &Path, checkpoint: &Checkpoint, (header, footer): (u64, u64)) -> Result<Self, CliError> {
        let shown = path.display();
        if !path.exists() {
            return Err(CliError::usage(format!(
                "the output file {shown} is missing: the run wrote {} bytes of records to it before the checkpoint; \
                 put it back to resume",
                checkpoint.output_len
            )));
        }
        let mut file = open_locked(path, false)?;
        let unreadable = |e: io::Error| CliError::usage(format!("cannot read the output file {shown}: {e}"));
        let whole = file.metadata().map_err(unreadable)?.len();
        // The records, and what follows them but the footer of a complete run.
        let footer = if checkpoint.is_complete() { footer } else { 0 };
        let len = whole.saturating_sub(header).saturating_sub(footer);
        let committed = checkpoint.output_len;
        // A branch and bound's best records end the output of a run that ended: the resumed run
        // cuts them and writes its own when it ends, so the file need only hold what came before
        // (a resumed run may have been killed between the two).
        let kept = checkpoint.resumed_output_len();
        if len < kept {
            return Err(CliError::usage(format!(
                "the output file {shown} holds {len} bytes but the checkpoint committed {committed}: it was cut short, or \
                 it is not this run's output"
            )));
        }
        let Some(seal) = checkpoint.seal else {
            let why = match checkpoint.options.output {
                None => "the run wrote its records to stdout",
                Some(_) => "a run of the library or an older bts wrote it",
            };
            tracing::warn!(
                "the checkpoint records no checksum of the output ({why}): {shown} is checked by its length only"
            );
            let sum = sum_records(&mut file, header, kept).map_err(unreadable)?;
            return Ok(Self::new(file, path, sum, header));
        };
        let sum = sum_records(&mut file, header, kept).map_err(unreadable)?;
        let mut sealed = sum.clone();
        let best = checkpoint.written_best();
        sealed.update(&best);
        // What the file holds of the best records must be theirs.
        let mut tail = vec![0; (len.min(committed) - kept) as usize];
        file.read_exact(&mut tail).map_err(unreadable)?;
        if sealed.crc() != seal.crc || !best.starts_with(&tail) {
            return Err(CliError::usage(format!(
                "the output file {shown} is not this run's output: its first {committed} bytes are not the records the \
                 checkpoint committed (rewritten by another run?)"
            )));
        }
        // Checked after the records it should hold: cutting the file is advice only for this run's.
        if seal.ended && len > committed {
            return Err(CliError::usage(format!(
                "the output file {shown} holds {} bytes more than this checkpoint's run wrote, which wrote nothing after \
                 its last save: they come from elsewhere, another program or a later run of this checkpoint that saved \
                 to another --checkpoint file (resume that one); else move them away (or cut the file to {} \
                 bytes) and resume again",
                len - committed,
                header + committed + footer
            )));
        }
        Ok(Self::new(file, path, sum, header))
    }

    fn new(file: File, path: &Path, sum: OutputSum, offset: u64) -> Self {
        Self {
            writer: BufWriter::with_capacity(1 << 16, file),
            path: path.to_path_buf(),
            offset,
            header: None,
            start: Some(sum.len()),
            marks: [sum.clone(), sum.clone()],
            sum,
        }
    }

    /// Cuts the file to where the run starts, once.
    fn begin(&mut self) -> io::Result<()> {
        self.cut_to_start().map_err(|e| self.named(e))
    }

    /// `e`, naming the file (a full disk must say which file it stopped).
    fn named(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("cannot write the output file {}: {e}", self.path.display()))
    }

    /// Fails if something else removed, moved, replaced or cut the file while the run wrote to
    /// it: the run would go on writing records that no file named by the checkpoint holds.
    fn still_there(&self) -> io::Result<()> {
        let file = self.writer.get_ref().metadata().map_err(|e| self.named(e))?;
        let shown = self.path.display();
        if !std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == (file.dev(), file.ino())) {
            return Err(io::Error::other(format!(
                "the output file {shown} was removed, moved or replaced while the run wrote to it: the run stops (if it \
                 was moved, resume with --output naming where it is now)"
            )));
        }
        // The run appends: a file cut short since is shorter than what the run wrote to it, one
        // written to by something else longer.
        let written = self.offset + self.sum.len();
        if file.len() < written {
            return Err(io::Error::other(format!(
                "the output file {shown} was cut short while the run wrote to it: records are lost, and the run stops"
            )));
        }
        if file.len() > written {
            return Err(io::Error::other(format!(
                "something else wrote {} bytes to the output file {shown} while the run wrote to it: the run stops",
                file.len() - written
            )));
        }
        Ok(())
    }

    /// [`begin`](Self::begin)'s work, its errors not yet naming the file.
    fn cut_to_start(&mut self) -> io::Result<()> {
        if let Some(records) = self.start.take() {
            let file = self.writer.get_mut();
            if let Some(header) = self.header.take() {
                // A new run's file: its header, then its records.
                file.set_len(0)?;
                file.seek(SeekFrom::Start(0))?;
                return file.write_all(&header);
            }
            let len = self.offset + records;
            let was = file.metadata()?.len();
            if was != len {
                file.set_len(len)?;
                tracing::info!(
                    "cut {} bytes written after the checkpoint from {} (their jobs run again)",
                    was.saturating_sub(len),
                    self.path.display()
                );
            }
            file.seek(SeekFrom::End(0))?;
        }
        Ok(())
    }
}

/// The checksum of the `len` bytes of records that start `offset` bytes into `file`.
fn sum_records(file: &mut File, offset: u64, len: u64) -> io::Result<OutputSum> {
    file.seek(SeekFrom::Start(offset))?;
    sum_prefix(file, len)
}

impl Write for FileOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.begin()?;
        let n = self.writer.write(buf).map_err(|e| self.named(e))?;
        self.sum.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush().map_err(|e| self.named(e))
    }
}

impl Output for FileOutput {
    fn sync(&mut self) -> io::Result<()> {
        self.mark()?;
        self.writer.get_ref().sync_data().map_err(|e| self.named(e))?;
        self.still_there()
    }

    fn mark(&mut self) -> io::Result<()> {
        self.begin()?;
        self.writer.flush().map_err(|e| self.named(e))?;
        self.marks[1] = self.sum.clone();
        Ok(())
    }

    fn rewind(&mut self, len: u64) -> io::Result<()> {
        self.begin()?;
        self.writer.flush()?;
        let file = self.writer.get_mut();
        file.set_len(self.offset + len)?;
        file.seek(SeekFrom::End(0))?;
        // A rollback returns to the last snapshot, where the output was synced; read the file
        // again only if that is not where it goes.
        self.sum = match self.marks.iter().find(|m| m.len() == len) {
            Some(mark) => mark.clone(),
            None => sum_records(&mut File::open(&self.path)?, self.offset, len)?,
        };
        Ok(())
    }

    fn checksum(&self) -> Option<u32> {
        Some(self.sum.crc())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc(bytes: &[u8]) -> u32 {
        let mut sum = OutputSum::default();
        sum.update(bytes);
        sum.crc()
    }

    #[test]
    fn the_output_is_cut_only_when_the_run_writes_and_its_checksum_follows_rollbacks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "an earlier run's records\n").unwrap();
        let mut out = FileOutput::create(&path, "").unwrap();
        // Opening neither cuts nor changes the file.
        assert_eq!(std::fs::read(&path).unwrap(), b"an earlier run's records\n");
        assert_eq!(out.checksum(), Some(crc(b"")));
        out.write_all(b"one\ntwo\n").unwrap();
        out.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        out.write_all(b"three\n").unwrap();
        assert_eq!(out.checksum(), Some(crc(b"one\ntwo\nthree\n")));
        // Back to the last sync (a rollback to the snapshot), then to a place that needs reading.
        out.rewind(8).unwrap();
        assert_eq!(out.checksum(), Some(crc(b"one\ntwo\n")));
        out.write_all(b"four\n").unwrap();
        out.rewind(4).unwrap();
        assert_eq!(out.checksum(), Some(crc(b"one\n")));
        out.write_all(b"five\n").unwrap();
        out.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\nfive\n");
        assert_eq!(out.checksum(), Some(crc(b"one\nfive\n")));
    }
}
