//! Log output on stderr through `tracing`: warnings by default, `-v`/`-vv` for more, `-q` for
//! errors only; `RUST_LOG` overrides all of these.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// As `eprintln!`, but a stderr that is gone (the terminal hung up, the pipe to `tee` closed) is
/// no panic: a run goes on without its messages and can still stop cleanly and save itself.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

pub fn init(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        // A log line that cannot be written is dropped (tracing would say so with a panicking
        // `eprintln!`, taking the run down with its terminal).
        .log_internal_errors(false)
        .try_init();
}
