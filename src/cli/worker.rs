//! `bts worker`, and the worker ranks of a cluster launch.

use super::args::WorkerArgs;
use super::{CliError, Exit};
use crate::Registry;
use bts_worker::remote::{MasterAddress, RemoteError, RemoteOptions, work_for};
use std::path::Path;

pub fn worker(registry: &Registry, args: WorkerArgs) -> Result<Exit, CliError> {
    crate::logging::init(args.verbose, args.quiet);
    let master = match (args.connect, args.connect_file) {
        (Some(address), _) => MasterAddress::Fixed(address),
        (None, Some(file)) => MasterAddress::File(file),
        (None, None) => return Err(CliError::usage("give --connect HOST:PORT or --connect-file F")),
    };
    let token = match &args.token_file {
        Some(path) => read_token(path)?,
        None => Vec::new(),
    };
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    work(registry, RemoteOptions { master, token, threads, retry_for: args.retry })
}

/// Works for a master until its run ends: exit 0; refused (wrong token or version, a tree this bts
/// does not have): exit 2; the master unreachable or lost: exit 1.
pub fn work(registry: &Registry, options: RemoteOptions) -> Result<Exit, CliError> {
    let build = |spec: &bts_protocol::TreeSpec| registry.build(spec).map_err(|e| e.to_string());
    match work_for(&options, &build) {
        Ok(()) => {
            tracing::info!("the run is over");
            Ok(Exit::Complete)
        }
        Err(e @ (RemoteError::Refused(_) | RemoteError::Tree(_))) => Err(CliError::usage(e)),
        Err(e) => Err(CliError::failure(e)),
    }
}

/// The token in `path`, without surrounding white space.
pub fn read_token(path: &Path) -> Result<Vec<u8>, CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::usage(format!("cannot read the token file {}: {e}", path.display())))?;
    let token = bytes.trim_ascii().to_vec();
    if token.is_empty() {
        return Err(CliError::usage(format!("the token file {} is empty", path.display())));
    }
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!("the token file {} can be read by other users (chmod 600 it)", path.display());
    }
    Ok(token)
}
