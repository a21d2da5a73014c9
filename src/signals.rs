//! SIGINT, SIGTERM and SIGHUP, received by a task on the process's I/O runtime
//! ([`bts_protocol::runtime`]). A run: the first stops it cleanly (the jobs out with workers are
//! waited for, or polling workers paused); a second one exits at once. A worker process: the first
//! has it leave the run, handing its work back; a second one quits at once.

use crate::run::Stopper;
use bts_master::StopReason;
use bts_protocol::runtime::runtime;
use bts_worker::remote::CancellationToken;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals that stop bts.
struct Stops {
    interrupt: Signal,
    terminate: Signal,
    hangup: Option<Signal>,
}

impl Stops {
    /// Installs the handlers (on the runtime, which must be entered).
    fn install() -> Option<Stops> {
        // Under `nohup` a hangup is ignored, and stays so.
        let hangup = (!ignored(libc::SIGHUP)).then(|| signal(SignalKind::hangup())).transpose();
        match (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), hangup) {
            (Ok(interrupt), Ok(terminate), Ok(hangup)) => Some(Stops { interrupt, terminate, hangup }),
            _ => {
                tracing::warn!("cannot install signal handlers; Ctrl-C will not stop bts cleanly");
                None
            }
        }
    }

    /// The next signal's number.
    async fn next(&mut self) -> Option<libc::c_int> {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Some(libc::SIGINT),
            Some(()) = self.terminate.recv() => Some(libc::SIGTERM),
            // The terminal closed (a lost ssh session): as for SIGTERM, where the default would kill.
            Some(()) = async { self.hangup.as_mut()?.recv().await } => Some(libc::SIGHUP),
            else => None,
        }
    }
}

/// The command line's handling of SIGINT, SIGTERM and SIGHUP, for a run of your own: the first
/// stops the run as [`Stopper::stop`] does (the jobs out with workers are waited for, and a
/// checkpoint is saved), a second saves what is committed and ends the run at once
/// ([`Stopper::abort`]), a third exits the process with status 3. Each is told on stderr. Call it
/// once per run, before the run starts.
///
/// ```no_run
/// # let tree = bts::trees::Queens::new(14);
/// let run = bts::Run::new("queens", tree);
/// bts::stop_on_signals(run.stopper());
/// let finished = run.run(&mut std::io::stdout())?;
/// # Ok::<(), bts::RunError>(())
/// ```
pub fn stop_on_signals(stopper: Stopper) {
    // A run stopping already (a limit, the stop file) waits for its jobs out, a hung legacy
    // program's up to its --job-timeout: a first signal then counts as the second, and ends the
    // wait.
    let mut ahead = 0;
    on_signals(move |seen, signal| match seen + ahead {
        1 if stopper.stopping() && stopper.abort(StopReason::Signal) => {
            ahead = 1;
            say_quitting(&stopper, &format!("{}: the run was stopping already", signal_name(signal)));
        }
        // A signal as the run ends finds nothing to stop: its summary says how it ended.
        1 if stopper.stop(StopReason::Signal) => crate::logging::say!(
            "bts: {}: stopping once the workers hand their work back (signal again to quit now)",
            signal_name(signal)
        ),
        1 => {}
        2 if stopper.abort(StopReason::Signal) => say_quitting(&stopper, "second signal"),
        2 => crate::logging::say!("bts: the run is over and its summary being written: signal again to quit now"),
        _ => {
            crate::logging::say!("bts: third signal: quitting without saving");
            bts_adapters::kill_all();
            std::process::exit(3);
        }
    });
}

/// Says that the run quits now, `why`, and what it keeps.
fn say_quitting(stopper: &Stopper, why: &str) {
    match stopper.abort_saves() {
        true => crate::logging::say!("bts: {why}: saving what is committed and quitting now"),
        false => crate::logging::say!("bts: {why}: quitting now; the last checkpoint stays"),
    }
}

/// A worker process: the first signal cancels `leave`, a second one exits at once (status 3).
pub fn leave_on_signal(leave: CancellationToken) {
    on_signals(move |seen, signal| {
        if seen == 1 {
            crate::logging::say!(
                "bts: {}: leaving, once any work this worker holds is handed back (signal again to quit now)",
                signal_name(signal)
            );
            leave.cancel();
        } else {
            crate::logging::say!("bts: second signal: quitting now (the master redoes this worker's unfinished work)");
            bts_adapters::kill_all();
            std::process::exit(3);
        }
    });
}

/// `bts estimate`: the first signal sets `stop` and ends the probes under way (those done give
/// the estimate), a second one exits at once (status 3).
pub(crate) fn stop_probes_on_signal(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    searcher: std::sync::Arc<dyn bts_worker::Searcher>,
) {
    on_signals(move |seen, signal| {
        if seen == 1 {
            crate::logging::say!(
                "bts: {}: no more probes; the estimate takes those done (signal again to quit now)",
                signal_name(signal)
            );
            stop.store(true, Ordering::SeqCst);
            // Probes under way end: a legacy program's job is given up, not waited for.
            searcher.abandon();
        } else {
            crate::logging::say!("bts: second signal: quitting now, without an estimate");
            bts_adapters::kill_all();
            std::process::exit(3);
        }
    });
}

/// Signals delivered so far, counted in the handler itself: tokio wakes its task once for signals
/// that come before the task runs, so two quick Ctrl-C on a busy machine would look like one.
static DELIVERED: AtomicU32 = AtomicU32::new(0);

/// A signal that comes again within this time counts once: GNU `timeout` sends its SIGTERM to bts
/// and then to its whole process group, microseconds apart, and means one stop. Two presses of
/// Ctrl-C are 100 ms apart or more.
const SAME_SIGNAL_WITHIN_NS: u64 = 50_000_000;

/// When each of SIGINT, SIGTERM and SIGHUP was last counted (monotonic ns; 0: never).
static LAST_COUNTED: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// The signal handler's count: async-signal-safe (an atomic and `clock_gettime`).
fn count(index: usize) {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let now = (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64).max(1);
    let last = LAST_COUNTED[index].load(Ordering::SeqCst);
    if last != 0 && now.saturating_sub(last) < SAME_SIGNAL_WITHIN_NS {
        return;
    }
    LAST_COUNTED[index].store(now, Ordering::SeqCst);
    let n = DELIVERED.fetch_add(1, Ordering::SeqCst);
    KINDS[n as usize % KINDS.len()].store(index as u8 + 1, Ordering::SeqCst);
}

/// Which signal each count was (1 + its index in SIGINT, SIGTERM, SIGHUP), for the last few
/// counts: tokio's task learns only of one of the signals that came before it woke.
static KINDS: [AtomicU8; 4] = [AtomicU8::new(0), AtomicU8::new(0), AtomicU8::new(0), AtomicU8::new(0)];

/// The signal of count `n` (from 0), if it is known.
fn kind(n: u32) -> Option<libc::c_int> {
    let index = KINDS[n as usize % KINDS.len()].load(Ordering::SeqCst);
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].get(usize::from(index).checked_sub(1)?).copied()
}

/// Counts the stopping signals into [`DELIVERED`], once a process; false if it cannot.
fn count_signals() -> bool {
    static COUNTING: OnceLock<bool> = OnceLock::new();
    *COUNTING.get_or_init(|| {
        [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
            .into_iter()
            .enumerate()
            // A hangup stays ignored under `nohup`.
            .filter(|&(_, signal)| signal != libc::SIGHUP || !ignored(signal))
            // SAFETY: the action is async-signal-safe (see `count`).
            .map(|(index, signal)| unsafe { signal_hook_registry::register(signal, move || count(index)) })
            .all(|registered| registered.is_ok())
    })
}

/// Calls `act` with the count of signals so far (from 1) and the signal's number, for each one.
fn on_signals(mut act: impl FnMut(u32, libc::c_int) + Send + 'static) {
    let _runtime = runtime().enter();
    // Counted before tokio's handler wakes the task: a signal's actions run in the order they
    // were registered, and nothing in bts listens to signals through tokio before this. (A
    // program embedding bts that did would have a signal acted on only with the next one.)
    let counting = count_signals();
    let before = DELIVERED.load(Ordering::SeqCst);
    let Some(mut stops) = Stops::install() else { return };
    runtime().spawn(async move {
        let mut seen = 0;
        while let Some(signal) = stops.next().await {
            let delivered = match counting {
                true => DELIVERED.load(Ordering::SeqCst) - before,
                false => seen + 1,
            };
            while seen < delivered {
                let which = if counting { kind(before + seen).unwrap_or(signal) } else { signal };
                seen += 1;
                act(seen, which);
            }
        }
    });
}

/// SIGINT, SIGTERM or SIGHUP by name ("signal 2" reads as a second signal).
fn signal_name(signal: libc::c_int) -> String {
    match signal {
        libc::SIGINT => "SIGINT (Ctrl-C)".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        other => format!("signal {other}"),
    }
}

/// Has a write past the limit of file sizes (`ulimit -f`) fail with `EFBIG`, which the run reports
/// and stops on with its checkpoint, where SIGXFSZ's default killed bts without a word. A handler
/// rather than `SIG_IGN`: the programs bts starts get the default back at `exec`.
pub(crate) fn survive_file_size_limit() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: installs a handler that does nothing, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

/// Whether `signal` is ignored (`SIG_IGN`), as `nohup` leaves SIGHUP for the programs it starts.
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// Two signals before the task wakes count as two (the second Ctrl-C quits), but for the same
    /// signal again within 50 ms, which counts once (GNU `timeout` sends its SIGTERM twice).
    #[test]
    fn signals_in_quick_succession_each_count_but_for_repeats_within_50_ms() {
        let (tx, rx) = std::sync::mpsc::channel();
        super::on_signals(move |seen, signal| {
            let _ = tx.send((seen, signal));
        });
        // SAFETY: the handlers installed above replace the default action. `raise` runs them on
        // this thread before it returns, so all three usually come before the task wakes.
        unsafe {
            libc::raise(libc::SIGINT);
            libc::raise(libc::SIGTERM);
            libc::raise(libc::SIGINT);
        }
        let wait = || rx.recv_timeout(Duration::from_secs(10)).expect("a signal was not seen");
        // Each named as it came, though the task woke for one of them.
        assert_eq!([wait(), wait()], [(1, libc::SIGINT), (2, libc::SIGTERM)]);
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a repeat within 50 ms was counted");
        // Later, the same signal counts again.
        unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(wait(), (3, libc::SIGINT));
    }
}
