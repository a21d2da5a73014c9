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
        Builder::new_multi_thread()
            .worker_threads(IO_THREADS)
            .max_blocking_threads(2)
            .thread_keep_alive(std::time::Duration::from_secs(1))
            .thread_name("bts-io")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot start the I/O runtime: {e}"))
    })
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
