//! Watching a run: the progress display, the history files (`--hist`, `--freq`) and the estimate
//! of the work left, refined as the run goes by probing nodes of the job list.

use bts_master::{Observer, Pending, RunView};
use bts_worker::estimate::{Estimate, SplitMix64, probe};
use bts_worker::{RunnerSettings, Searcher};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// How progress is shown on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, otherwise a line every few seconds.
    Auto,
    /// A bar, whatever stderr is.
    Always,
    Never,
}

#[derive(Clone, Debug)]
pub struct MonitorOptions {
    pub progress: ProgressMode,
    /// A CSV time series of the run.
    pub hist: Option<PathBuf>,
    /// The nodes of every job, one per line.
    pub freq: Option<PathBuf>,
}

impl MonitorOptions {
    pub fn is_active(&self) -> bool {
        self.progress != ProgressMode::Never || self.hist.is_some() || self.freq.is_some()
    }
}

/// The files of `--hist` and `--freq`, as messages name them.
const HIST: &str = "history file (--hist)";
const FREQ: &str = "job sizes file (--freq)";

/// How often the monitor looks at the run (the history gets a row each time).
pub const TICK: Duration = Duration::from_millis(250);
/// Without a terminal, a progress line this often.
const LINE_EVERY: Duration = Duration::from_secs(5);
/// Nodes of the job list probed, one every this long.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// Probes per sampled node.
const PROBES_PER_NODE: u32 = 8;
/// The estimator uses at most this share of one core.
const ESTIMATOR_SHARE: f64 = 0.003;
/// The remaining work is estimated from this many recent samples.
const WINDOW: usize = 128;

enum Display {
    Bar(ProgressBar),
    Lines { next: Instant },
    None,
}

pub struct Monitor {
    started: Instant,
    /// Seconds of earlier segments of the run.
    before_s: f64,
    display: Display,
    hist: Option<BufWriter<File>>,
    freq: Option<BufWriter<File>>,
    last: (Instant, u64),
    rate: f64,
    estimator: Option<Estimator>,
    next_sample: Instant,
    /// Recent estimates of the size of a node's subtree in the job list.
    samples: VecDeque<f64>,
    rng: SplitMix64,
}

impl Monitor {
    /// `probe`: the tree whose job-list nodes are probed for estimates of the work left (not in
    /// polling mode, which has no job list to sample).
    pub fn new(options: &MonitorOptions, probe: Option<&Arc<dyn Searcher>>, before_s: f64) -> std::io::Result<Self> {
        let create = |p: &PathBuf, what: &str| {
            let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()));
            File::create(p).map(|f| BufWriter::with_capacity(1 << 16, f)).map_err(named)
        };
        let mut hist = options.hist.as_ref().map(|p| create(p, HIST)).transpose()?;
        if let Some(h) = hist.as_mut() {
            writeln!(h, "elapsed_s,nodes,rate,queued,busy_workers,workers,budget,jobs,in_flight,estimated_total")?;
        }
        let freq = options.freq.as_ref().map(|p| create(p, FREQ)).transpose()?;
        let display = match options.progress {
            ProgressMode::Never => Display::None,
            ProgressMode::Auto if !std::io::stderr().is_terminal() => {
                Display::Lines { next: Instant::now() + LINE_EVERY }
            }
            mode => {
                let target = match mode {
                    ProgressMode::Always => ProgressDrawTarget::term_like(Box::new(console::Term::stderr())),
                    _ => ProgressDrawTarget::stderr(),
                };
                let bar = ProgressBar::with_draw_target(Some(1000), target);
                bar.set_style(
                    ProgressStyle::with_template("{bar:20.cyan/blue} {wide_msg}")
                        .expect("a valid template")
                        .progress_chars("█▉▊▋▌▍▎▏ "),
                );
                Display::Bar(bar)
            }
        };
        let now = Instant::now();
        Ok(Self {
            started: now,
            before_s,
            display,
            hist,
            freq,
            last: (now, 0),
            rate: 0.0,
            estimator: probe.and_then(Estimator::spawn),
            next_sample: now,
            samples: VecDeque::new(),
            rng: SplitMix64::new(now.elapsed().as_nanos() as u64 ^ 0x5EED),
        })
    }

    /// Nodes still to visit, estimated from probes of nodes sampled from the job list.
    fn remaining(&self, scheduler: &dyn RunView) -> Option<f64> {
        if self.samples.len() < 4 {
            return None;
        }
        let mean = self.samples.iter().sum::<f64>() / self.samples.len() as f64;
        Some(mean * (scheduler.queued() + scheduler.in_flight()) as f64)
    }

    fn sample(&mut self, scheduler: &dyn RunView) {
        let Some(estimator) = &self.estimator else { return };
        while let Ok(e) = estimator.results.try_recv() {
            if self.samples.len() == WINDOW {
                self.samples.pop_front();
            }
            self.samples.push_back(e);
        }
        let now = Instant::now();
        if now >= self.next_sample && scheduler.queued() > 0 {
            self.next_sample = now + SAMPLE_EVERY;
            let i = self.rng.below(scheduler.queued());
            if let Some(p) = scheduler.pending_at(i) {
                let _ = estimator.requests.send(p.clone());
            }
        }
    }

    fn record(&mut self, scheduler: &dyn RunView, last: bool) {
        let now = Instant::now();
        let nodes = scheduler.totals().nodes;
        let dt = now.duration_since(self.last.0).as_secs_f64();
        if dt > 0.0 {
            let instant = nodes.saturating_sub(self.last.1) as f64 / dt;
            self.rate = if self.rate == 0.0 { instant } else { 0.7 * self.rate + 0.3 * instant };
        }
        self.last = (now, nodes);
        self.sample(scheduler);
        let remaining = self.remaining(scheduler);
        let elapsed = self.before_s + self.started.elapsed().as_secs_f64();
        let t = scheduler.totals();
        if let Some(h) = self.hist.as_mut() {
            let total = remaining.map_or(String::new(), |r| format!("{:.0}", nodes as f64 + r));
            let _ = writeln!(
                h,
                "{elapsed:.3},{nodes},{:.0},{},{},{},{},{},{},{total}",
                self.rate,
                scheduler.queued(),
                scheduler.busy_workers(),
                scheduler.workers(),
                scheduler.budget().map_or(0, |b| b.base()),
                t.jobs,
                scheduler.in_flight()
            );
        }
        if let Some(f) = self.freq.as_mut() {
            for size in scheduler.job_sizes() {
                let _ = writeln!(f, "{size}");
            }
        }
        let line = || {
            let mut s = format!("{}  {} nodes  {}/s", duration(elapsed), human(nodes as f64), human(self.rate));
            let (queued, busy, workers) =
                (human(scheduler.queued() as f64), scheduler.busy_workers(), scheduler.workers());
            s += &match scheduler.budget() {
                Some(b) => format!("  L {queued}  busy {busy}/{workers}  b {}", human(b.base() as f64)),
                // Random polling: no job list and no budget, the nodes wait on the workers' stacks.
                None => format!("  stacks {queued}  busy {busy}/{workers}"),
            };
            if let Some(r) = remaining {
                let fraction = nodes as f64 / (nodes as f64 + r);
                s += &format!("  ~{:.0}% of ~{}", 100.0 * fraction, human(nodes as f64 + r));
                if self.rate > 0.0 {
                    s += &format!("  ETA {}", duration(r / self.rate));
                }
            }
            (s, remaining.map(|r| nodes as f64 / (nodes as f64 + r)))
        };
        match &mut self.display {
            Display::Bar(bar) => {
                let (text, fraction) = line();
                bar.set_position(fraction.map_or(0, |f| (f * 1000.0) as u64));
                bar.set_message(text);
                if last {
                    bar.finish_and_clear();
                }
            }
            Display::Lines { next } if now >= *next && !last => {
                *next = now + LINE_EVERY;
                eprintln!("bts: {}", line().0);
            }
            _ => {}
        }
    }
}

impl Observer for Monitor {
    fn tick(&mut self, scheduler: &dyn RunView) {
        self.record(scheduler, false);
    }

    fn finish(&mut self, scheduler: &dyn RunView) {
        self.record(scheduler, true);
        for (what, file) in [(HIST, self.hist.as_mut()), (FREQ, self.freq.as_mut())] {
            if let Some(Err(e)) = file.map(|f| f.flush()) {
                tracing::warn!("cannot write the {what}: {e}");
            }
        }
    }
}

/// Probes nodes of the job list on a thread of its own, at a small share of one core.
struct Estimator {
    requests: Sender<Pending>,
    results: Receiver<f64>,
}

impl Estimator {
    fn spawn(searcher: &Arc<dyn Searcher>) -> Option<Self> {
        let mut runner = match searcher.runner(RunnerSettings { keep_output: false }) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!("no progress estimate: {e}");
                return None;
            }
        };
        let (requests, inbox) = mpsc::channel::<Pending>();
        let (outbox, results) = mpsc::channel();
        let spawned = std::thread::Builder::new().name("bts-estimator".into()).spawn(move || {
            let mut rng = SplitMix64::new(0x6B6E_7574_6865_7374);
            for p in inbox {
                let started = Instant::now();
                let mut estimate = Estimate::default();
                for _ in 0..PROBES_PER_NODE {
                    match probe(&mut *runner, p.node.clone(), p.depth, &mut |d| rng.below(d)) {
                        Ok(e) => estimate.add(e),
                        Err(f) => {
                            tracing::debug!("progress estimates stop: a probe failed at {}: {}", f.node, f.message);
                            return;
                        }
                    }
                }
                if outbox.send(estimate.mean).is_err() {
                    return;
                }
                let pause = started.elapsed().mul_f64(1.0 / ESTIMATOR_SHARE - 1.0);
                std::thread::sleep(pause.min(Duration::from_secs(30)));
            }
        });
        spawned.ok().map(|_| Self { requests, results })
    }
}

/// 12.3k, 45.6M, 7.89G.
fn human(x: f64) -> String {
    match x {
        x if x >= 1e12 => format!("{:.2}T", x / 1e12),
        x if x >= 1e9 => format!("{:.2}G", x / 1e9),
        x if x >= 1e6 => format!("{:.2}M", x / 1e6),
        x if x >= 1e4 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// 42 s, 3 min 05 s, 2 h 07 min, 3 d 04 h.
fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {:02} s", s / 60, s % 60),
        s if s < 86_400 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        s => format!("{} d {:02} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations_read_well() {
        assert_eq!(human(999.0), "999");
        assert_eq!(human(12_345.0), "12.3k");
        assert_eq!(human(45_600_000.0), "45.60M");
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(185.0), "3 min 05 s");
        assert_eq!(duration(7620.0), "2 h 07 min");
        assert_eq!(duration(273_600.0), "3 d 04 h");
    }
}
