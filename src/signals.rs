//! SIGINT, SIGTERM and SIGHUP: the first stops the run cleanly (the jobs out with workers are
//! waited for, or polling workers paused); a second one exits at once. Received by a task on the
//! process's I/O runtime ([`bts_protocol::runtime`]).

use crate::run::Stopper;
use bts_master::StopReason;
use bts_protocol::runtime::runtime;
use tokio::signal::unix::{SignalKind, signal};

pub fn forward(stopper: Stopper) {
    let _runtime = runtime().enter();
    // Under `nohup` a hangup is ignored, and stays so.
    let hangup = (!ignored(libc::SIGHUP)).then(|| signal(SignalKind::hangup())).transpose();
    let kinds = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), hangup);
    let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = kinds else {
        tracing::warn!("cannot install signal handlers; Ctrl-C will not stop the run cleanly");
        return;
    };
    runtime().spawn(async move {
        let mut seen = 0;
        loop {
            let signal = tokio::select! {
                Some(()) = interrupt.recv() => libc::SIGINT,
                Some(()) = terminate.recv() => libc::SIGTERM,
                // The terminal closed (a lost ssh session): stop as for SIGTERM, saving the run,
                // where the default would kill it.
                Some(()) = async { hangup.as_mut()?.recv().await } => libc::SIGHUP,
                else => return,
            };
            seen += 1;
            if seen == 1 {
                crate::logging::say!(
                    "bts: signal {signal}: stopping once the workers hand their work back (signal again to quit now)"
                );
                stopper.stop(StopReason::Signal);
            } else if seen == 2 {
                crate::logging::say!("bts: second signal: saving what is committed and quitting now");
                stopper.abort(StopReason::Signal);
            } else {
                crate::logging::say!("bts: third signal: quitting without saving");
                std::process::exit(3);
            }
        }
    });
}

/// Whether `signal` is ignored (`SIG_IGN`), as `nohup` leaves SIGHUP for the programs it starts.
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}
