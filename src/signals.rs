//! SIGINT and SIGTERM: the first stops the run cleanly (the jobs out with workers are waited for, or
//! polling workers paused); a second one exits at once.

use crate::run::Stopper;
use bts_master::StopReason;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

pub fn forward(stopper: Stopper) {
    let Ok(mut signals) = Signals::new([SIGINT, SIGTERM]) else {
        tracing::warn!("cannot install signal handlers; Ctrl-C will not stop the run cleanly");
        return;
    };
    std::thread::Builder::new()
        .name("bts-signals".into())
        .spawn(move || {
            let mut seen = 0;
            for signal in signals.forever() {
                seen += 1;
                if seen == 1 {
                    eprintln!("bts: signal {signal}: stopping once the workers hand their work back (signal again to quit now)");
                    stopper.stop(StopReason::Signal);
                } else if seen == 2 {
                    eprintln!("bts: second signal: saving what is committed and quitting now");
                    stopper.abort(StopReason::Signal);
                } else {
                    eprintln!("bts: third signal: quitting without saving");
                    std::process::exit(3);
                }
            }
        })
        .ok();
}
