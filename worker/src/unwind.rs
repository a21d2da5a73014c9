//! Catching panics of user code, so that a panicking oracle fails one job instead of a thread.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};

thread_local! {
    /// This thread runs user code under [`catch`].
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// Where the panic being caught happened, as [`quiet_caught_panics`]'s hook saw it.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`; a panic becomes `Err` with the panic's message (and where it happened, once
/// [`quiet_caught_panics`] has run).
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let outer = CATCHING.replace(true);
    LOCATION.set(None);
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.set(outer);
    result.map_err(|payload| {
        let message = message(&*payload);
        match LOCATION.take() {
            Some(at) => format!("{message} (at {at})"),
            None => message,
        }
    })
}

/// Leaves the panics that bts catches in a tree's code to the job failures that report them, with
/// where they happened: the default hook printed each one too, before the job's failure and the
/// run's error said it again. Other panics, and every one with `RUST_BACKTRACE` set, are printed
/// as before. For a program's `main` (the panic hook is the program's): `bts::cli::main_with`
/// calls it.
pub fn quiet_caught_panics() {
    let default = std::panic::take_hook();
    let backtraces = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    std::panic::set_hook(Box::new(move |info| {
        if !CATCHING.get() || backtraces {
            default(info);
        }
        if CATCHING.get() {
            LOCATION.set(info.location().map(ToString::to_string));
        }
    }));
}

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
