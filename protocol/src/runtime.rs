//! The process's one tokio runtime. Network and subprocess I/O run on it as tasks, on a fixed number
//! of threads whatever the number of connections; searching stays on plain threads, which talk to
//! the tasks through channels.
//!
//! Also the one way any thread shuts a connection down ([`shutdown_handle`]), and name resolution
//! that starts no thread for a literal address ([`resolve`]).

use std::os::fd::AsFd;
use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

/// Threads that run I/O tasks: I/O waits, it does not compute, so one keeps up with a thousand
/// connections while leaving the cores to the search.
const IO_THREADS: usize = 1;

/// The runtime, started on first use and kept until the process exits.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let runtime = Builder::new_multi_thread()
            .worker_threads(IO_THREADS)
            .max_blocking_threads(2)
            .thread_keep_alive(std::time::Duration::from_secs(1))
            .thread_name("bts-io")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot start the I/O runtime: {e}"));
        runtime.spawn(stalls::tick());
        runtime
    })
}

/// Whether this process's I/O stood still for a while (the process suspended by SIGSTOP or a
/// paused machine, its I/O thread starved), so that a peer's silence over that time is not the
/// peer's fault: a master continued after a suspend must not drop every worker as silent.
pub mod stalls {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    const TICK: Duration = Duration::from_millis(200);
    /// A tick this late means the runtime stood still.
    const STALL: Duration = Duration::from_secs(1);

    /// The last tick, and the end of the last stall seen.
    static TICKS: Mutex<Option<(Instant, Option<Instant>)>> = Mutex::new(None);

    pub(super) async fn tick() {
        loop {
            let now = Instant::now();
            {
                let mut ticks = TICKS.lock().unwrap_or_else(|e| e.into_inner());
                let stall_end = match *ticks {
                    Some((last, _)) if now.duration_since(last) > STALL => Some(now),
                    Some((_, end)) => end,
                    None => None,
                };
                *ticks = Some((now, stall_end));
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// The runtime stood still at some time after `since`, or stands still now (its tick is
    /// late: a timer that fired as the process was continued may run before the tick does).
    pub fn since(since: Instant) -> bool {
        let now = Instant::now();
        match *TICKS.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((last, end)) => now.duration_since(last) > STALL || end.is_some_and(|end| end > since),
            None => false,
        }
    }
}

/// Runs `future` on the runtime to its end, from any thread: one inside another tokio runtime
/// (a library user's `#[tokio::main]`), where blocking on a runtime panics, hands it to a thread
/// of its own.
pub fn block_on<F>(future: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return runtime().block_on(future);
    }
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("bts-block-on".into())
            .spawn_scoped(s, || runtime().block_on(future))
            .unwrap_or_else(|e| panic!("cannot start a thread: {e}"))
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// A second handle on a task's socket, with which any thread can shut the connection down (to evict
/// it from the handshakes, or to close a link): the tasks reading and writing it then see it end.
pub fn shutdown_handle(stream: &tokio::net::TcpStream) -> std::io::Result<std::net::TcpStream> {
    Ok(std::net::TcpStream::from(stream.as_fd().try_clone_to_owned()?))
}

/// The socket addresses `address` names: parsed when it is one (no thread is started for that),
/// looked up otherwise.
pub async fn resolve(address: &str) -> std::io::Result<Vec<std::net::SocketAddr>> {
    match address.parse() {
        Ok(a) => Ok(vec![a]),
        Err(_) => Ok(tokio::net::lookup_host(address).await?.collect()),
    }
}
