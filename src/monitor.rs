//! Watching a run: the progress display and the history files (`--hist`, `--freq`), with the
//! estimate of the work left that [`crate::remaining`] refines as the run goes.

use crate::remaining::{Guess, Remaining};
use bts_master::{Observer, RunView};
use bts_protocol::Budget;
use bts_worker::Searcher;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

const HIST_HEADER: &str =
    "elapsed_s,nodes,rate,queued,busy_workers,workers,budget,jobs,in_flight,estimated_total,estimated_std_error";

/// A history file carried on by a resumed run, open for its rows: the rows up to `before_s`, the
/// time of the checkpoint it resumes from, are kept (a run that died after the checkpoint wrote
/// rows of work the resumed run does again). None when the file is not a history.
fn carry_on_history(path: &Path, before_s: f64) -> std::io::Result<Option<BufWriter<File>>> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let mut lines = text.lines();
    if lines.next() != Some(HIST_HEADER) {
        return Ok(None);
    }
    // Rows carry their time to the millisecond.
    let kept = lines.take_while(|row| {
        let elapsed = row.split(',').next().and_then(|t| t.parse::<f64>().ok());
        elapsed.is_some_and(|t| t <= before_s + 0.001)
    });
    let mut out = String::with_capacity(text.len());
    for line in std::iter::once(HIST_HEADER).chain(kept) {
        out.push_str(line);
        out.push('\n');
    }
    if out.len() != text.len() {
        std::fs::write(path, out)?;
    }
    let file = std::fs::OpenOptions::new().append(true).open(path)?;
    Ok(Some(BufWriter::with_capacity(1 << 16, file)))
}

/// The files of `--hist` and `--freq`, as messages name them.
const HIST: &str = "history file (--hist)";
const FREQ: &str = "job sizes file (--freq)";

/// How often the monitor looks at the run (the history gets a row each time).
pub const TICK: Duration = Duration::from_millis(250);
/// Without a terminal, a progress line this often.
const LINE_EVERY: Duration = Duration::from_secs(5);

enum Display {
    /// A bar, and whether stderr is taken as wide (`--progress always`, see [`WideStderr`]).
    Bar(ProgressBar, bool),
    Lines {
        next: Instant,
    },
    None,
}

/// A history file (`--hist`, `--freq`), written out at every look at the run: what a run killed
/// at once leaves of it is what it had written then.
struct ReportFile {
    file: BufWriter<File>,
    path: PathBuf,
    what: &'static str,
    /// It could not be written: warned of once, and written no more.
    failed: bool,
}

impl ReportFile {
    /// Writes out what was buffered; a failure is warned of once, naming the file (the run goes on).
    fn flush(&mut self) {
        if self.failed {
            return;
        }
        if let Err(e) = self.file.flush() {
            self.failed = true;
            tracing::warn!("cannot write the {} {}: {e}; it ends here", self.what, self.path.display());
        }
    }
}

pub struct Monitor {
    started: Instant,
    /// Seconds of earlier segments of the run.
    before_s: f64,
    display: Display,
    hist: Option<ReportFile>,
    freq: Option<ReportFile>,
    rate: Rate,
    remaining: Option<Remaining>,
    /// See [`Monitor::ends_at`].
    ended_at: Option<f64>,
}

impl Monitor {
    /// `searcher`: the tree probed for estimates of the work left; `polling`: the run has no job
    /// list to sample; `before`: the seconds and nodes of a resumed run's earlier segments.
    pub fn new(
        options: &MonitorOptions,
        searcher: &Arc<dyn Searcher>,
        polling: bool,
        (before_s, nodes_before): (f64, u64),
    ) -> std::io::Result<Self> {
        let named = |p: &PathBuf, what: &str, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
        };
        let create = |p: &PathBuf, what: &str| {
            File::create(p).map(|f| BufWriter::with_capacity(1 << 16, f)).map_err(|e| named(p, what, e))
        };
        let open_hist = |p: &PathBuf| {
            // A resumed run carries on the history of the segments before it.
            if before_s > 0.0
                && let Some(h) = carry_on_history(p, before_s).map_err(|e| named(p, HIST, e))?
            {
                return Ok(h);
            }
            let mut h = create(p, HIST)?;
            writeln!(h, "{HIST_HEADER}")?;
            Ok::<_, std::io::Error>(h)
        };
        let report = |file, path: &PathBuf, what| ReportFile { file, path: path.clone(), what, failed: false };
        let hist =
            options.hist.as_ref().map(|p| Ok::<_, std::io::Error>(report(open_hist(p)?, p, HIST))).transpose()?;
        let freq =
            options.freq.as_ref().map(|p| Ok::<_, std::io::Error>(report(create(p, FREQ)?, p, FREQ))).transpose()?;
        let display = match options.progress {
            ProgressMode::Never => Display::None,
            ProgressMode::Auto if !std::io::stderr().is_terminal() => {
                Display::Lines { next: Instant::now() + LINE_EVERY }
            }
            mode => {
                let target = match mode {
                    ProgressMode::Always => {
                        ProgressDrawTarget::term_like(Box::new(WideStderr(console::Term::stderr())))
                    }
                    _ => ProgressDrawTarget::stderr(),
                };
                let wide = mode == ProgressMode::Always;
                let bar = ProgressBar::with_draw_target(None, target);
                bar.set_style(
                    // The bar is drawn into the message (see `bar_cells`): set apart, bar and text
                    // would each draw a frame, the first with the other's last state.
                    ProgressStyle::with_template("{wide_msg}").expect("a valid template"),
                );
                Display::Bar(bar, wide)
            }
        };
        let now = Instant::now();
        Ok(Self {
            started: now,
            before_s,
            display,
            hist,
            freq,
            // The rate is this segment's: the nodes of the segments before are not its own.
            rate: Rate::new(now, nodes_before),
            remaining: Remaining::spawn(searcher, polling),
            ended_at: None,
        })
    }

    /// The run's seconds as its final checkpoint holds them: its last row is at that time, which a
    /// resumed run keeps (rows after a checkpoint are work done again) and its summary reports.
    pub fn ends_at(&mut self, elapsed_s: f64) {
        self.ended_at = Some(elapsed_s);
    }

    fn record(&mut self, scheduler: &dyn RunView, last: bool) {
        let now = Instant::now();
        let nodes = scheduler.totals().nodes;
        let rate = self.rate.update(now, nodes);
        let guess = match last && scheduler.queued() == 0 && scheduler.in_flight() == 0 {
            // Nothing is left: the total is the count (random polling's estimate probes the root,
            // and would stay a guess to the end).
            true => Guess::Total { total: nodes as f64, std_error: 0.0 },
            false => self.remaining.as_mut().map_or(Guess::Unknown, |r| r.update(scheduler)),
        };
        let elapsed = match (last, self.ended_at) {
            (true, Some(at)) => at,
            _ => self.before_s + self.started.elapsed().as_secs_f64(),
        };
        let t = scheduler.totals();
        if let Some(h) = self.hist.as_mut().filter(|h| !h.failed) {
            let h = &mut h.file;
            let total = match guess {
                Guess::Total { total, std_error } => format!("{total:.0},{std_error:.0}"),
                Guess::Unknown => ",".to_string(),
            };
            let _ = writeln!(
                h,
                "{elapsed:.3},{nodes},{rate:.0},{},{},{},{},{},{},{total}",
                scheduler.queued(),
                scheduler.busy_workers(),
                scheduler.workers(),
                scheduler.budget().map_or(0, |b| b.base()),
                t.jobs,
                scheduler.in_flight()
            );
        }
        if let Some(f) = self.freq.as_mut().filter(|f| !f.failed) {
            for size in scheduler.job_sizes() {
                let _ = writeln!(f.file, "{size}");
            }
        }
        for file in [self.hist.as_mut(), self.freq.as_mut()].into_iter().flatten() {
            file.flush();
        }
        // The line's parts, each with its rank: a narrow terminal drops the highest ranks first,
        // so that the count, the estimate and the ETA stay.
        let line = || {
            let (queued, busy, workers) =
                (human(scheduler.queued() as f64), scheduler.busy_workers(), scheduler.workers());
            let mut parts = vec![(0, duration(elapsed)), (0, format!("{} nodes", human(nodes as f64)))];
            // No worker, no rate: the last ones' would linger for seconds.
            let shown = if workers == 0 { 0.0 } else { rate };
            parts.push((2, format!("{}/s", human(shown))));
            // What a long branch and bound has found so far.
            if let Some(best) = &t.best {
                parts.push((0, format!("best {}", best.value)));
            }
            let busy = match workers {
                0 => "busy 0/0 (waiting for workers)".to_string(),
                _ => format!("busy {busy}/{workers}"),
            };
            match scheduler.budget() {
                Some(b) => {
                    parts.extend([(3, format!("L {queued}")), (1, busy), (4, format!("b {}", budget(b.base())))])
                }
                // Random polling: no job list and no budget, the nodes wait on the workers' stacks.
                None => parts.extend([(3, format!("stacks {queued}")), (1, busy)]),
            };
            parts.extend(estimate_parts(guess, nodes as f64, rate, workers > 0).into_iter().map(|p| (0, p)));
            (parts, fraction_done(guess, nodes as f64))
        };
        match &mut self.display {
            Display::Bar(bar, wide) => {
                let (parts, fraction) = line();
                let text = fit(&parts, line_width(*wide).saturating_sub(BAR_WIDTH));
                bar.set_message(format!("{} {text}", bar_cells(fraction.unwrap_or(0.0))));
                if last {
                    bar.finish_and_clear();
                }
            }
            Display::Lines { next } if now >= *next && !last => {
                *next = now + LINE_EVERY;
                crate::logging::say!("bts: {}", fit(&line().0, usize::MAX));
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
    }
}

/// The recent rate: the nodes reported since a reference point at least [`Rate::WINDOW`] back and
/// [`Rate::ARRIVALS`] reports of new nodes back. Nodes arrive when jobs end: with jobs of
/// milliseconds that is the last two seconds, with jobs of a minute the last few minutes, where a
/// rate over the last tick said 0 or a whole job's nodes in a quarter second.
struct Rate {
    /// The reference point, then each report of new nodes since: (when, nodes so far).
    points: std::collections::VecDeque<(Instant, u64)>,
}

impl Rate {
    const WINDOW: Duration = Duration::from_secs(2);
    const ARRIVALS: usize = 8;

    fn new(now: Instant, nodes: u64) -> Self {
        Rate { points: [(now, nodes)].into() }
    }

    /// The rate in nodes a second, given the nodes so far.
    fn update(&mut self, now: Instant, nodes: u64) -> f64 {
        if self.points.back().is_some_and(|&(_, last)| nodes > last) {
            self.points.push_back((now, nodes));
        }
        // The next point becomes the reference once the window and enough reports lie after it.
        while self.points.len() > Self::ARRIVALS + 1 && now.duration_since(self.points[1].0) >= Self::WINDOW {
            self.points.pop_front();
        }
        let (since, before) = self.points[0];
        let dt = now.duration_since(since).as_secs_f64();
        match dt > 0.0 {
            true => nodes.saturating_sub(before) as f64 / dt,
            false => 0.0,
        }
    }
}

/// Stderr as a terminal for `--progress always`, which may not be one: a pipe or a file is taken
/// as wide enough for the whole line, estimate and ETA included, where the usual guess of 80
/// columns cuts them off.
#[derive(Debug)]
struct WideStderr(console::Term);

impl indicatif::TermLike for WideStderr {
    fn width(&self) -> u16 {
        // A terminal of unknown size may be narrow: a longer line would wrap, and the next frame
        // would not replace it.
        let unknown = if self.0.is_term() { 80 } else { 200 };
        self.0.size_checked().map_or(unknown, |(_, columns)| columns)
    }

    fn height(&self) -> u16 {
        self.0.size_checked().map_or(24, |(rows, _)| rows)
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }

    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A bar of 20 cells, `fraction` of it full, in eighths of a cell.
fn bar_cells(fraction: f64) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (fraction.clamp(0.0, 1.0) * 160.0) as usize;
    let (full, part) = (eighths / 8, eighths % 8);
    let mut cells = "█".repeat(full);
    if full < 20 {
        cells.push(PARTS[part]);
        cells.push_str(&" ".repeat(19 - full));
    }
    console::style(cells).cyan().for_stderr().to_string()
}

/// The fraction done, when the total is known.
fn fraction_done(guess: Guess, nodes: f64) -> Option<f64> {
    match guess {
        Guess::Total { total, .. } if total > 0.0 => Some((nodes / total).min(1.0)),
        _ => None,
    }
}

/// `~63% of ~3.24G ±8%` and `ETA 42 s` (the ± is twice the standard error, about 95% of the
/// time), or `total unknown` when the probes cannot support a figure. No ETA while no worker is
/// there (a listening run waiting for its workers: the rate is then the past's), nor one beyond
/// ten years (a run that stands still).
fn estimate_parts(guess: Guess, nodes: f64, rate: f64, working: bool) -> Vec<String> {
    let Guess::Total { total, std_error } = guess else {
        return vec!["total unknown".to_string()];
    };
    let fraction = fraction_done(guess, nodes).unwrap_or(0.0);
    let mut estimate = format!("~{:.0}% of ~{}", 100.0 * fraction, human(total));
    if total > 0.0 {
        estimate += &format!(" ±{:.0}%", 100.0 * 2.0 * std_error / total);
    }
    let eta = (total - nodes).max(0.0) / rate;
    match rate > 0.0 && working {
        true if eta > TEN_YEARS => vec![estimate, "ETA > 10 years".to_string()],
        true => vec![estimate, format!("ETA {}", duration(eta))],
        false => vec![estimate],
    }
}

const TEN_YEARS: f64 = 10.0 * 365.25 * 86_400.0;

/// The columns of the bar and the space after it.
const BAR_WIDTH: usize = 21;

/// The ranked parts of a line, joined, without those of the highest ranks that would make it wider
/// than `width`.
fn fit(parts: &[(u8, String)], width: usize) -> String {
    let mut keep = parts.iter().map(|p| p.0).max().unwrap_or(0);
    loop {
        let kept: Vec<&str> = parts.iter().filter(|p| p.0 <= keep).map(|p| p.1.as_str()).collect();
        let line = kept.join("  ");
        if keep == 0 || console::measure_text_width(&line) <= width {
            return line;
        }
        keep -= 1;
    }
}

/// The columns of stderr: a line wider would wrap, or be cut. `wide`: see [`WideStderr`].
fn line_width(wide: bool) -> usize {
    let stderr = console::Term::stderr();
    let unknown = if wide && !stderr.is_term() { 200 } else { 80 };
    // The last column stays empty: a line that fills it wraps on some terminals.
    stderr.size_checked().map_or(unknown, |(_, columns)| columns as usize).saturating_sub(1)
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

/// A budget as `human` shows numbers, or `inf`.
fn budget(b: u64) -> String {
    match Budget(b) {
        b if b.is_unlimited() => b.to_string(),
        b => human(b.0 as f64),
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
    fn the_bar_is_twenty_cells_filled_by_eighths() {
        console::set_colors_enabled_stderr(false);
        assert_eq!(bar_cells(0.0), " ".repeat(20));
        assert_eq!(bar_cells(1.0), "█".repeat(20));
        assert_eq!(bar_cells(0.5), format!("{} {}", "█".repeat(10), " ".repeat(9)));
        assert_eq!(bar_cells(0.5 + 3.0 / 160.0), format!("{}▍{}", "█".repeat(10), " ".repeat(9)));
        assert_eq!(bar_cells(f64::NAN).chars().count(), 20);
    }

    /// Nodes that come in steadily give their rate; nodes that come a job at a time, many seconds
    /// apart, give their average, not 0 between jobs and a job's nodes in a quarter second when one
    /// ends.
    #[test]
    fn the_rate_follows_the_jobs_that_end_not_the_last_tick() {
        let start = Instant::now();
        let at = |ticks: u32| start + TICK * ticks;
        let mut rate = Rate::new(start, 500);
        for tick in 1..=40 {
            let r = rate.update(at(tick), 500 + 250_000 * u64::from(tick));
            assert!((r - 1e6).abs() < 1.0, "tick {tick}: {r}");
        }
        // Jobs of 10 M nodes, one every 10 s (40 ticks), from a fresh segment.
        let mut rate = Rate::new(start, 0);
        let mut seen = Vec::new();
        for tick in 1..=40 * 30 {
            let r = rate.update(at(tick), 10_000_000 * u64::from(tick / 40));
            if tick > 40 * 10 {
                seen.push(r);
            }
        }
        let (low, high) = seen.iter().fold((f64::MAX, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
        assert!(low > 0.85e6 && high < 1.15e6, "{low} to {high}");
        // The reference moves on: a run whose jobs sped up tenfold shows it within minutes.
        for tick in 40 * 30 + 1..=40 * 50 {
            let r = rate.update(at(tick), 300_000_000 + 10_000_000 * u64::from((tick - 1200) / 4));
            seen.push(r);
        }
        assert!(seen.last().unwrap() > &9e6, "{:?}", seen.last());
        assert!(rate.points.len() <= Rate::ARRIVALS + 1 + 8, "points kept: {}", rate.points.len());
    }

    #[test]
    fn numbers_and_durations_read_well() {
        assert_eq!(human(999.0), "999");
        assert_eq!(human(12_345.0), "12.3k");
        assert_eq!(human(45_600_000.0), "45.60M");
        assert_eq!(budget(392_300), "392.3k");
        assert_eq!(budget(u64::MAX), "inf", "not 18446744.07T");
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(185.0), "3 min 05 s");
        assert_eq!(duration(7620.0), "2 h 07 min");
        assert_eq!(duration(273_600.0), "3 d 04 h");
    }

    #[test]
    fn estimates_show_their_error_or_say_unknown() {
        let guess = Guess::Total { total: 4_000_000.0, std_error: 100_000.0 };
        assert_eq!(estimate_parts(guess, 1_000_000.0, 1e6, true), ["~25% of ~4.00M ±5%", "ETA 3 s"]);
        assert_eq!(estimate_parts(guess, 1_000_000.0, 1e6, false), ["~25% of ~4.00M ±5%"], "no workers, no ETA");
        assert_eq!(estimate_parts(Guess::Unknown, 1_000_000.0, 1e6, true), ["total unknown"]);
        assert_eq!(fraction_done(Guess::Unknown, 5.0), None);
        // A run that stands still (every worker waits for a stalled message) has no real ETA.
        assert_eq!(estimate_parts(guess, 1_000_000.0, 1e-9, true)[1], "ETA > 10 years");
    }

    /// An 80-column terminal once cut the line after the budget, in the middle of the fraction
    /// done: the line drops its least useful parts instead.
    #[test]
    fn a_narrow_terminal_drops_parts_of_the_line_not_its_estimate() {
        let parts: Vec<(u8, String)> = [
            (0, "9 s"),
            (0, "887.55M nodes"),
            (2, "62.78M/s"),
            (3, "L 473"),
            (1, "busy 2/2"),
            (4, "b 392.3k"),
            (0, "~45% of ~1.97G ±8%"),
            (0, "ETA 12 s"),
        ]
        .into_iter()
        .map(|(rank, text)| (rank, text.to_string()))
        .collect();
        let full = "9 s  887.55M nodes  62.78M/s  L 473  busy 2/2  b 392.3k  ~45% of ~1.97G ±8%  ETA 12 s";
        assert_eq!(fit(&parts, usize::MAX), full);
        assert_eq!(fit(&parts, 79 - BAR_WIDTH), "9 s  887.55M nodes  busy 2/2  ~45% of ~1.97G ±8%  ETA 12 s");
        assert_eq!(fit(&parts, 20), "9 s  887.55M nodes  ~45% of ~1.97G ±8%  ETA 12 s", "too narrow still");
    }
}
