//! Remote workers for a run: listening, the address file, and what a worker process is told.

use crate::RunError;
use crate::run::ListenOptions;
use bts_checkpoints::write_atomically;
use bts_master::Event;
use bts_master::net::{NetConfig, Server};
use bts_protocol::{TreeSpec, Welcome, WireMode};
use bts_worker::RunnerSettings;
use bts_worker::peers::{PeerServer, Router};
use bts_worker::remote::{address_file_finished, address_file_text, launch_id};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// A listening master; [`finish`](Listening::finish) when the run is over.
pub struct Listening {
    server: Server,
    address_file: Option<std::path::PathBuf>,
    rendezvous: bool,
}

impl Listening {
    /// Says goodbye to the remote workers, and removes the address file. A rendezvous file is
    /// marked `finished`, so that ranks that start late do not wait for a master that is gone,
    /// when the returned mark is dropped: the worker ranks of a stopped launch wait for it before
    /// they exit, and a launcher kills rank 0 as soon as one exits, so the caller drops it once
    /// it has told the run's end.
    pub fn finish(self) -> Option<FinishedMark> {
        self.server.finish(Duration::from_secs(5));
        match self.address_file {
            Some(file) if self.rendezvous => Some(FinishedMark(file)),
            Some(f) => {
                let _ = std::fs::remove_file(f);
                None
            }
            None => None,
        }
    }
}

/// Marks a rendezvous file `finished` when dropped (see [`Listening::finish`]).
#[derive(Debug)]
pub struct FinishedMark(std::path::PathBuf);

impl Drop for FinishedMark {
    fn drop(&mut self) {
        let text = address_file_finished(launch_id().as_deref());
        match write_atomically(&self.0, text.as_bytes(), true) {
            Ok(()) => tracing::debug!("marked the rendezvous file {} finished", self.0.display()),
            Err(e) => tracing::warn!("cannot mark the rendezvous file {} finished: {e}", self.0.display()),
        }
    }
}

/// Whether this process has written its address file.
static ANNOUNCED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process has announced where it listens (written its address file).
pub fn announced() -> bool {
    ANNOUNCED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Raises this process's soft limit of open files towards `to`, within its hard limit, if it is
/// below `if_below`: the soft limit then, or None if it cannot be read.
pub(crate) fn raise_open_files_limit(if_below: libc::rlim_t, to: libc::rlim_t) -> Option<libc::rlim_t> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write one valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        let wanted = limit.rlim_max.min(to);
        if limit.rlim_cur < wanted && limit.rlim_cur < if_below {
            let raised = libc::rlimit { rlim_cur: wanted, rlim_max: limit.rlim_max };
            match libc::setrlimit(libc::RLIMIT_NOFILE, &raised) {
                0 => limit = raised,
                _ => tracing::debug!("cannot raise the limit of open files: {}", std::io::Error::last_os_error()),
            }
        }
    }
    Some(limit.rlim_cur)
}

/// True if every address `address` stands for is a loopback one.
pub fn is_loopback(address: &str) -> bool {
    match address.to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

pub fn serve(
    listen: &ListenOptions,
    tree: &TreeSpec,
    input_digest: Option<u32>,
    settings: RunnerSettings,
    mode: WireMode,
    events: &Sender<Event>,
    first_id: u64,
) -> Result<Listening, RunError> {
    let failed = |source| RunError::Listen { address: listen.address.clone(), source };
    if listen.token.is_empty() && !is_loopback(&listen.address) {
        return Err(RunError::Setup(format!(
            "refusing to listen on {} beyond loopback without a token (--token-file)",
            listen.address
        )));
    }
    let listener = TcpListener::bind(&listen.address).map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    if listen.rendezvous
        && let Some(file) = &listen.address_file
    {
        // Whatever an earlier run left there is not this run's address.
        let _ = std::fs::remove_file(file);
    }
    // Every worker's connection holds two descriptors, and the usual soft limit of 1,024 would
    // refuse workers long before the master's connection slots are full.
    raise_open_files_limit(libc::RLIM_INFINITY, libc::RLIM_INFINITY);
    let timeout = listen.worker_timeout;
    let config = NetConfig {
        token: listen.token.clone(),
        welcome: Welcome {
            tree: tree.clone(),
            keep_output: settings.keep_output,
            heartbeat_ms: (timeout / 5).clamp(Duration::from_millis(50), Duration::from_secs(1)).as_millis() as u64,
            silence_ms: timeout.as_millis() as u64,
            mode,
            input_digest,
        },
        max_connections: listen.max_connections,
        handshake_timeout: timeout,
    };
    let server = Server::start(listener, config, events.clone(), first_id).map_err(failed)?;
    let advertised = advertised(bound);
    // Said whatever the log level: with port 0 nothing else tells the user which port it is.
    let program = crate::cli::program_name();
    let join = match &listen.address_file {
        // A launch's token may be in its rendezvous file only.
        Some(file) if listen.rendezvous => {
            let token =
                if listen.token_in_address_file { "" } else { " --token-file FILE (the one the launch was given)" };
            format!("--connect-file {}{token}", file.display())
        }
        _ => format!("--connect {advertised}"),
    };
    crate::logging::say!("bts: listening for remote workers on {bound}: {program} worker {join}");
    if let Some(file) = &listen.address_file {
        let token = listen.token_in_address_file.then_some(listen.token.as_slice());
        let launch = launch_id().filter(|_| listen.rendezvous);
        let launch = launch.as_deref();
        write_atomically(file, address_file_text(&advertised, token, launch).as_bytes(), token.is_some()).map_err(
            |e| {
                let what = if listen.rendezvous { "rendezvous" } else { "address" };
                RunError::Setup(format!("cannot write the {what} file {}: {e}", file.display()))
            },
        )?;
        ANNOUNCED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    Ok(Listening { server, address_file: listen.address_file.clone(), rendezvous: listen.rendezvous })
}

/// Serves the workers of other processes that poll the master's own workers (random polling), on
/// the interface the master listens on. Returns the server and the address to announce.
pub fn serve_peers(listen: &ListenOptions, router: Arc<Router>) -> Result<(PeerServer, String), RunError> {
    let failed = |source| RunError::Listen { address: listen.address.clone(), source };
    let ip = match listen.address.to_socket_addrs().map_err(failed)?.next() {
        Some(a) => a.ip(),
        None => return Err(failed(std::io::Error::other("the address names no host"))),
    };
    let listener = TcpListener::bind((ip, 0)).map_err(failed)?;
    let server = PeerServer::serve(listener, listen.token.clone(), Arc::clone(&router)).map_err(failed)?;
    let address = advertised(server.address());
    router.set_address(address.clone());
    Ok((server, address))
}

/// The address other hosts should connect to: the bound one, or this host's name when bound to
/// every interface.
fn advertised(bound: SocketAddr) -> String {
    if bound.ip().is_unspecified() { format!("{}:{}", host_name(), bound.port()) } else { bound.to_string() }
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length, and gethostname writes at most that much.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..len]) {
        Ok(name) if ok && !name.is_empty() => name.to_string(),
        _ => "localhost".to_string(),
    }
}
