//! `bts worker`, and the worker ranks of a cluster launch.

use super::args::WorkerArgs;
use super::{CliError, Exit};
use crate::Registry;
use bts_worker::remote::{Ended, MasterAddress, RemoteError, RemoteOptions, seconds, wait_for_the_end, work_for};
use std::path::Path;
use std::time::{Duration, Instant};

pub fn worker(registry: &Registry, args: WorkerArgs) -> Result<Exit, CliError> {
    crate::logging::init(args.verbose, args.quiet);
    super::files::no_dash(&[("--connect-file", &args.connect_file), ("--token-file", &args.token_file)])?;
    let master = match (args.connect, args.connect_file) {
        (Some(address), _) => MasterAddress::Fixed(address),
        (None, Some(file)) => MasterAddress::File(file),
        (None, None) => return Err(CliError::usage("give --connect HOST:PORT or --connect-file F")),
    };
    let stop = bts_worker::remote::CancellationToken::default();
    crate::signals::leave_on_signal(stop.clone());
    let started = Instant::now();
    let token = match &args.token_file {
        Some(path) => {
            // Started with its master, which makes the token as it starts: the worker waits for
            // it as for the address file.
            if matches!(master, MasterAddress::File(_)) && !wait_for_file(path, args.retry, &stop) {
                crate::logging::say!("bts: stopped before joining a run");
                return Ok(Exit::Complete);
            }
            read_token(path)?
        }
        None => Vec::new(),
    };
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    // --retry bounds the whole wait at the start, for the token file and then the master; it is
    // whole again for every later loss of the master.
    let options = RemoteOptions { master, token, threads, retry_for: args.retry, stop };
    work(registry, options, started.elapsed())
}

/// Waits up to `at_most` for `path` to exist, saying so after a while; false if told to stop.
fn wait_for_file(path: &Path, at_most: Duration, stop: &bts_worker::remote::CancellationToken) -> bool {
    let started = Instant::now();
    let mut said = false;
    while !path.exists() && started.elapsed() < at_most {
        if stop.is_cancelled() {
            return false;
        }
        if !said && started.elapsed() >= Duration::from_secs(2) {
            said = true;
            tracing::warn!(
                "waiting for the token file {} to appear (for {} s at most)",
                path.display(),
                seconds(at_most)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !stop.is_cancelled()
}

/// Works for a master until its run ends: exit 0; refused (wrong token or version, a tree this bts
/// does not have): exit 2; the master unreachable or lost: exit 1. Told to stop by a signal, it
/// leaves the run handing its work back: exit 0 too, as it did nothing wrong (launchers such as
/// mpirun and srun take any other status for a failure of the whole job).
/// The caller has the signals cancel `options.stop` ([`crate::signals::leave_on_signal`]); `waited`
/// is how long it has waited already (for a token file), which the first join takes off
/// `options.retry_for`.
pub fn work(registry: &Registry, mut options: RemoteOptions, waited: Duration) -> Result<Exit, CliError> {
    super::enough_open_files()?;
    super::warn_if_confined(options.threads as usize);
    let build = |spec: &bts_protocol::TreeSpec| registry.build(spec).map_err(|e| e.to_string());
    // A worker that loses its master while the master lives on (a network cut, a suspended
    // machine: the master drops a worker silent for --worker-timeout), or comes back (resumed on
    // the same address file), joins the run again as a new worker: the master has put its jobs
    // back. It keeps trying for --retry from the first of a series of losses, each soon after
    // joining (a master restarted again and again, a flaky network); a longer stay ends the
    // series. A rank of a cluster launch tries for 10 s at most (its launcher may hold the nodes
    // until it exits).
    let retry_for = options.retry_for;
    options.retry_for = retry_for.saturating_sub(waited);
    let mut series: Option<(Instant, u32)> = None;
    let mut last_loss = String::new();
    loop {
        let joined_at = Instant::now();
        let ended = work_for(&options, &build);
        match ended {
            Err(RemoteError::Lost(why)) if !options.stop.is_cancelled() => {
                if joined_at.elapsed() >= REJOIN_FOR {
                    series = None;
                }
                let (since, losses) = series.get_or_insert((Instant::now(), 0));
                *losses += 1;
                let mut left = retry_for.saturating_sub(since.elapsed());
                if matches!(options.master, MasterAddress::Rendezvous(_)) {
                    left = left.min(REJOIN_FOR);
                }
                if retry_for.is_zero() {
                    return Err(CliError::failure(format!("lost the master ({why}); not joining again (--retry 0)")));
                }
                if left.is_zero() {
                    return Err(CliError::failure(format!(
                        "lost the master {losses} times in {} s, each soon after joining its run (the last: \
                         {why}); giving up (--retry {})",
                        seconds(since.elapsed()),
                        seconds(retry_for)
                    )));
                }
                options.retry_for = left;
                last_loss.clone_from(&why);
                crate::logging::say!(
                    "bts: lost the master ({why}); joining its run again (for {} s at most)",
                    seconds(left)
                );
                continue;
            }
            // Told to stop as it lost its master (dropped for a suspend past --worker-timeout, a
            // cut, the master gone): the jobs it held are the master's to redo, or a resumed run's,
            // so it has left as cleanly as it could.
            Err(RemoteError::Lost(why)) => {
                crate::logging::say!(
                    "bts: left the run; the master had lost this worker already ({why}), and does its jobs again"
                );
                return Ok(Exit::Complete);
            }
            Err(RemoteError::Unreachable(e)) if series.is_some() => {
                return Err(CliError::failure(format!(
                    "lost the master ({last_loss}), and cannot reach it again: {e}"
                )));
            }
            // Told to stop while joining the run again: it has none of the run's work.
            Ok(Ended::NeverJoined) if series.is_some() => {
                crate::logging::say!("bts: stopped while joining the run again; the master had this worker's work");
                return Ok(Exit::Complete);
            }
            ended => return finish(ended, &options),
        }
    }
}

/// A session shorter than this that ends with the master lost continues a series of losses; and
/// how long a rank of a cluster launch tries to reach its master.
const REJOIN_FOR: Duration = Duration::from_secs(10);

/// The exit of a worker process, from how its work for a master ended.
fn finish(ended: Result<Ended, RemoteError>, options: &RemoteOptions) -> Result<Exit, CliError> {
    match ended {
        Ok(Ended::RunOver) => {
            tracing::info!("the run is over");
            Ok(Exit::Complete)
        }
        Ok(Ended::NeverJoined) => {
            crate::logging::say!("bts: stopped before joining a run");
            Ok(Exit::Complete)
        }
        Ok(Ended::Left) => {
            crate::logging::say!("bts: left the run; the master has this worker's work");
            if let MasterAddress::Rendezvous(file) = &options.master
                && !wait_for_the_end(file, RANK_OUTLIVES_MASTER)
            {
                tracing::info!("the master is still running; this rank exits");
            }
            Ok(Exit::Complete)
        }
        Err(e @ (RemoteError::Refused(_) | RemoteError::Tree(_))) => Err(CliError::usage(e)),
        Err(e) => Err(CliError::failure(e)),
    }
}

/// How long a worker rank of a cluster launch that left waits for its master to end the run (see
/// [`wait_for_the_end`]): a rank taken out alone does not linger for the rest of the run.
const RANK_OUTLIVES_MASTER: Duration = Duration::from_secs(10);

/// How to make a token file, for messages.
const MAKE_ONE: &str = "the master makes one when it does not exist (bts run --listen ... --token-file F), or \
                        make one with: (umask 077; openssl rand -hex 32 > F)";

/// The token in `path`, without surrounding white space.
pub fn read_token(path: &Path) -> Result<Vec<u8>, CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::usage(format!("cannot read the token file {}: {e}; {MAKE_ONE}", path.display())))?;
    let token = bytes.trim_ascii().to_vec();
    if token.is_empty() {
        return Err(CliError::usage(format!("the token file {} is empty; {MAKE_ONE}", path.display())));
    }
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!("the token file {} can be read by other users (chmod 600 it)", path.display());
    }
    Ok(token)
}

/// The master's token: read from `path`, or, if there is no such file, made there (a random token
/// of 64 hex digits, readable by its owner only) and said so. The file appears whole: a worker
/// started with its master never reads it empty.
pub fn read_or_make_token(path: &Path) -> Result<Vec<u8>, CliError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return read_token(path);
    }
    let token: String = bts_protocol::auth::nonce().iter().map(|b| format!("{b:02x}")).collect();
    let name = path.file_name().map_or_else(|| "token".into(), |n| n.to_string_lossy().into_owned());
    let new = path.with_file_name(format!(".{name}.new-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&new)
        .and_then(|mut file| file.write_all(format!("{token}\n").as_bytes()).and_then(|_| file.sync_all()));
    // Linked into place, so that a token another master made meanwhile is kept.
    let linked = written.and_then(|_| std::fs::hard_link(&new, path));
    let _ = std::fs::remove_file(&new);
    match linked {
        Ok(()) => {
            crate::logging::say!(
                "bts: made a new token in {0} (readable by you only); give the workers the same file: \
                 bts worker --token-file {0} ...",
                path.display()
            );
            Ok(token.into_bytes())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_token(path),
        Err(e) => Err(CliError::usage(format!("cannot make the token file {}: {e}", path.display()))),
    }
}
