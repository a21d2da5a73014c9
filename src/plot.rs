//! `bts plot`: the job list, the busy workers and the budget of a run over time, from its `--hist`
//! file, as in Figure 2 of Avis & Devroye (in polling mode the workers' stacks, the busy workers and
//! the nodes visited). SVG or PNG, by the output's extension.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// One row of a `--hist` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub elapsed_s: f64,
    pub nodes: f64,
    pub queued: f64,
    pub busy_workers: f64,
    pub workers: f64,
    pub budget: f64,
}

/// Reads a `--hist` file row by row into what the plot draws (a week's history is 2.4 million
/// rows: they are not kept); the message says what is wrong with a bad one.
pub fn read_hist(path: &Path) -> Result<History, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut lines = Lines(BufReader::new(File::open(path).map_err(cannot)?));
    let (header, _) = lines.next().ok_or_else(|| format!("{} is empty", path.display()))?.map_err(cannot)?;
    let header: Vec<&str> = header.split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("{} is not a bts --hist file (no column {name})", path.display()))
    };
    let cols = [column("elapsed_s")?, column("nodes")?, column("queued")?, column("busy_workers")?];
    let (workers, budget) = (column("workers")?, column("budget")?);
    let mut history = History::default();
    // A row cut short, with its line number: an error unless it is the last.
    let mut short: Option<(usize, usize)> = None;
    for (i, line) in lines.enumerate() {
        let (line, ended) = line.map_err(cannot)?;
        if line.trim().is_empty() {
            continue;
        }
        let line_no = i + 2;
        if let Some((at, columns)) = short.take() {
            return Err(cut_short(path, at, columns, header.len()));
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() > header.len() {
            return Err(cut_short(path, line_no, fields.len(), header.len()));
        }
        // bts ends every row with a newline: a last line without one was cut, perhaps in a number.
        if fields.len() < header.len() || !ended {
            short = Some((line_no, fields.len()));
            continue;
        }
        let get = |c: usize| -> Result<f64, String> {
            fields
                .get(c)
                .and_then(|f| f.trim().parse::<f64>().ok())
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{}: line {line_no} is not a row of numbers", path.display()))
        };
        history.push(&Sample {
            elapsed_s: get(cols[0])?,
            nodes: get(cols[1])?,
            queued: get(cols[2])?,
            busy_workers: get(cols[3])?,
            workers: get(workers)?,
            budget: get(budget)?,
        });
    }
    match short {
        // A run writing the history as it goes (or a disk that filled up) leaves its last row cut
        // short: the rows before it still make a plot.
        Some(_) if history.rows > 0 => {
            crate::logging::say!("bts: {}: its last line is cut short; plotted without it", path.display());
        }
        Some(_) => return Err(format!("{} has no rows (its one row is cut short)", path.display())),
        None => {}
    }
    if history.rows == 0 {
        return Err(format!("{} has no rows", path.display()));
    }
    Ok(history)
}

/// The lines of a file, as text without their line ends, each with whether its newline was there.
struct Lines<R>(R);

impl<R: BufRead> Iterator for Lines<R> {
    type Item = std::io::Result<(String, bool)>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = Vec::new();
        match self.0.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) => {
                let ended = line.pop_if(|b| *b == b'\n').is_some();
                // A file that went through an editor that ends lines with \r\n.
                line.pop_if(|b| *b == b'\r');
                let text = String::from_utf8(line).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8")
                });
                Some(text.map(|t| (t, ended)))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

fn cut_short(path: &Path, line: usize, columns: usize, header: usize) -> String {
    format!("{}: line {line} has {columns} columns where the header has {header}", path.display())
}

/// What a plot draws of a history, taken in row by row: each line's envelope and the axes'
/// extent.
#[derive(Default)]
pub struct History {
    rows: usize,
    /// The latest time, which is the last row's in a history bts wrote.
    t_max: f64,
    /// The most workers: the busy workers' axis goes up to it.
    workers: f64,
    /// Every row so far says budget 0: a random-polling run (no job list, no budget)...
    polling: bool,
    /// ... or some: a run that changed mode.
    polled: bool,
    queued: Envelope,
    busy: Envelope,
    nodes: Envelope,
    /// The budget's stretches above 0: a run that changed mode has no budget while it polled.
    budget: Vec<Envelope>,
    in_budget: bool,
}

impl History {
    /// The rows taken in.
    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn push(&mut self, s: &Sample) {
        self.polling = s.budget == 0.0 && (self.polling || self.rows == 0);
        self.polled |= s.budget == 0.0;
        self.rows += 1;
        self.t_max = self.t_max.max(s.elapsed_s);
        self.workers = self.workers.max(s.workers);
        self.queued.push((s.elapsed_s, s.queued));
        self.busy.push((s.elapsed_s, s.busy_workers));
        self.nodes.push((s.elapsed_s, s.nodes));
        match s.budget > 0.0 {
            true if self.in_budget => {
                self.budget.last_mut().expect("a stretch under way").push((s.elapsed_s, s.budget))
            }
            true => {
                let mut stretch = Envelope::default();
                stretch.push((s.elapsed_s, s.budget));
                self.budget.push(stretch);
            }
            false => {}
        }
        self.in_budget = s.budget > 0.0;
    }
}

impl<'a> FromIterator<&'a Sample> for History {
    fn from_iter<I: IntoIterator<Item = &'a Sample>>(samples: I) -> Self {
        let mut history = History::default();
        samples.into_iter().for_each(|s| history.push(s));
        history
    }
}

/// Why a plot was not made.
#[derive(Debug)]
pub enum PlotError {
    /// What was asked cannot be done (an unknown format, the input as the output).
    Usage(String),
    /// The plot could not be drawn or written.
    Failed(String),
}

/// Draws `history` to `out` (`.svg` or `.png`), through a temporary file beside it renamed over it
/// once whole: a plot that fails leaves `out` as it was.
pub fn plot(history: &History, title: &str, out: &Path) -> Result<(), PlotError> {
    let svg = match out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => true,
        Some("png") => false,
        _ => return Err(PlotError::Usage(format!("{}: the plot's name must end in .svg or .png", out.display()))),
    };
    // A folder that is not there is the command's mistake, as for every file bts writes.
    if let Some(folder) = out.parent().filter(|f| !f.as_os_str().is_empty() && !f.is_dir()) {
        return Err(PlotError::Usage(format!("cannot write {}: no folder {}", out.display(), folder.display())));
    }
    if out.is_dir() {
        return Err(PlotError::Usage(format!("cannot write {}: it is a folder", out.display())));
    }
    register_font().map_err(PlotError::Failed)?;
    // Its extension is the plot's: the PNG encoder goes by it.
    let tmp = bts_checkpoints::temporary_path(out).with_extension(if svg { "tmp.svg" } else { "tmp.png" });
    // Made here first, so that a folder that cannot take it is told plainly.
    let cannot = |e: &dyn std::fmt::Display| PlotError::Failed(format!("cannot write {}: {e}", out.display()));
    std::fs::File::create(&tmp).map_err(|e| cannot(&e))?;
    let drawn = match svg {
        true => present(SVGBackend::new(&tmp, (1000, 900)).into_drawing_area(), history, title),
        false => present(BitMapBackend::new(&tmp, (1000, 900)).into_drawing_area(), history, title),
    };
    let written = drawn.map_err(|e| cannot(&e)).and_then(|()| std::fs::rename(&tmp, out).map_err(|e| cannot(&e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Draws on `root` and writes it out.
fn present<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, history: &History, title: &str) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    draw(&root, history, title).map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// Text is measured (and in PNG drawn) with a font shipped in the binary: no system font is needed.
fn register_font() -> Result<(), String> {
    static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the built-in font is broken".into())
}

/// Axis labels: 1200, 1.5, 150k, 2.5M.
fn short(y: f64) -> String {
    match y.abs() {
        a if a >= 1e9 => format!("{:.3}G", y / 1e9),
        a if a >= 1e6 => format!("{:.3}M", y / 1e6),
        a if a >= 1e4 => format!("{:.0}k", y / 1e3),
        a if a >= 10.0 || y.fract() == 0.0 => format!("{y:.0}"),
        _ => format!("{y:.1}"),
    }
    .replace(".000", "")
}

/// One of the three pictures.
struct Panel<'a> {
    name: &'static str,
    unit: &'static str,
    /// Its line, in stretches (the budget's are broken where a run polled).
    line: &'a [Envelope],
    color: RGBColor,
    /// The highest value the axis must show besides the data (the workers for busy workers).
    ceiling: f64,
    log: bool,
}

/// The three pictures: in budget mode the job list, the busy workers and the budget; in polling
/// mode (no job list, no budget: its `--hist` rows say budget 0) the nodes on the workers' stacks,
/// the busy workers and the nodes visited.
fn panels(h: &History) -> [Panel<'_>; 3] {
    let busy = Panel {
        name: "busy workers",
        unit: "workers",
        line: std::slice::from_ref(&h.busy),
        color: RGBColor(0, 140, 0),
        ceiling: h.workers,
        log: false,
    };
    if h.polling {
        return [
            Panel {
                name: "nodes on the workers' stacks",
                unit: "nodes waiting",
                line: std::slice::from_ref(&h.queued),
                color: BLUE,
                ceiling: 0.0,
                log: false,
            },
            busy,
            Panel {
                name: "nodes visited",
                unit: "nodes",
                line: std::slice::from_ref(&h.nodes),
                color: RED,
                ceiling: 0.0,
                log: false,
            },
        ];
    }
    // A run that changed mode: its `queued` column counts the nodes on the stacks while it polled.
    let (name, unit) = match h.polled {
        true => ("job list |L|, and nodes on the workers' stacks while polling", "jobs (nodes) waiting"),
        false => ("job list |L|", "jobs waiting"),
    };
    [
        Panel { name, unit, line: std::slice::from_ref(&h.queued), color: BLUE, ceiling: 0.0, log: false },
        busy,
        Panel { name: "budget b", unit: "nodes per job (log)", line: &h.budget, color: RED, ceiling: 0.0, log: true },
    ]
}

/// Points drawn of a line at most: a picture 1,000 pixels wide shows no more (a week's history
/// has 2.4 million rows, whose SVG was 57 MB).
const MAX_POINTS: usize = 4000;

/// A line's points as they come, thinned to at most [`MAX_POINTS`]: of each run of consecutive
/// points only the lowest and the highest are kept, in the order they came, so that a spike of one
/// row still shows. Runs start one point long; when there are too many, neighbours merge into runs
/// twice as long.
struct Envelope {
    /// Points a run takes.
    run: usize,
    runs: Vec<Extremes>,
    /// Points taken.
    count: usize,
}

impl Default for Envelope {
    fn default() -> Self {
        Envelope { run: 1, runs: Vec::new(), count: 0 }
    }
}

/// The lowest and the highest points of a run, each with its place in the line.
#[derive(Clone, Copy)]
struct Extremes {
    taken: usize,
    low: (usize, (f64, f64)),
    high: (usize, (f64, f64)),
}

impl Extremes {
    /// `b` comes after `self`; ties keep the earlier point.
    fn merge(self, b: Extremes) -> Extremes {
        Extremes {
            taken: self.taken + b.taken,
            low: if b.low.1.1 < self.low.1.1 { b.low } else { self.low },
            high: if b.high.1.1 > self.high.1.1 { b.high } else { self.high },
        }
    }
}

impl Envelope {
    fn push(&mut self, point: (f64, f64)) {
        let one = Extremes { taken: 1, low: (self.count, point), high: (self.count, point) };
        self.count += 1;
        match self.runs.last_mut() {
            Some(last) if last.taken < self.run => *last = last.merge(one),
            _ => {
                if self.runs.len() == MAX_POINTS / 2 {
                    let pair = |p: &[Extremes]| p.iter().copied().reduce(Extremes::merge).expect("runs come in pairs");
                    self.runs = self.runs.chunks(2).map(pair).collect();
                    self.run *= 2;
                }
                self.runs.push(one);
            }
        }
    }

    /// The points to draw, in the order they came.
    fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.runs.iter().flat_map(|r| match r.low.0.cmp(&r.high.0) {
            std::cmp::Ordering::Less => vec![r.low.1, r.high.1],
            std::cmp::Ordering::Equal => vec![r.low.1],
            std::cmp::Ordering::Greater => vec![r.high.1, r.low.1],
        })
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    history: &History,
    title: &str,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let areas = root.split_evenly((3, 1));
    let t_max = history.t_max.max(1e-3);
    for (area, panel) in areas.iter().zip(&panels(history)) {
        // Each run's highest point is kept: the line's highest is among them, and so is the lowest.
        let ys = || panel.line.iter().flat_map(Envelope::points).map(|p| p.1);
        let y_max = ys().fold(0.0, f64::max).max(1.0);
        let mut chart = ChartBuilder::on(area);
        chart.margin(12).x_label_area_size(36).y_label_area_size(70).caption(panel.name, ("sans-serif", 18));
        // A line of more points than the picture has pixels across is a band: drawn 2 pixels wide,
        // each sharp turn of its zigzag made a spike far out of the panel.
        let points = panel.line.iter().map(|l| l.runs.len() * 2).sum::<usize>();
        let style = panel.color.stroke_width(if points > 1000 { 1 } else { 2 });
        // A history's numbers are finite but may be as large as a float goes: the axes' ends, past
        // the data, are kept finite too, and so is the ratio of a log axis's ends (plotters never
        // finishes an axis that reaches infinity). Points are drawn within the axes, at their edge
        // if need be: a point far outside them (a negative count or time, a value beyond a top
        // kept finite) overflows plotters' pixel arithmetic.
        if panel.log {
            let y_min = ys().filter(|&y| y > 0.0).fold(f64::MAX, f64::min).min(y_max);
            let bottom = y_min.max(1.0) / 2.0;
            let top = (y_max * 2.0).min(f64::MAX / 4.0).max(bottom * 2.0);
            let mut c = chart.build_cartesian_2d(0.0..t_max, (bottom..top).log_scale())?;
            c.configure_mesh().x_desc("seconds").y_desc(panel.unit).y_label_formatter(&|y| short(*y)).draw()?;
            for stretch in panel.line {
                let within = stretch.points().map(|(x, y)| (x.clamp(0.0, t_max), y.max(1.0).min(top)));
                c.draw_series(LineSeries::new(within, style))?;
            }
        } else {
            let top = if panel.ceiling > 0.0 { panel.ceiling.max(y_max) + 0.5 } else { y_max * 1.05 }.min(f64::MAX);
            let mut c = chart.build_cartesian_2d(0.0..t_max, 0.0..top)?;
            c.configure_mesh().x_desc("seconds").y_desc(panel.unit).y_label_formatter(&|y| short(*y)).draw()?;
            for stretch in panel.line {
                let within = stretch.points().map(|(x, y)| (x.clamp(0.0, t_max), y.clamp(0.0, top)));
                c.draw_series(LineSeries::new(within, style))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values as large as a float goes plot, on finite axes, instead of drawing for ever; values
    /// below the axes, and times that go back, plot too.
    #[test]
    fn the_largest_values_plot() {
        let dir = tempfile::tempdir().unwrap();
        let sample = |elapsed_s, big| Sample {
            elapsed_s,
            nodes: big,
            queued: big,
            busy_workers: 1.0,
            workers: 2.0,
            budget: if big > 0.0 { big } else { 1.0 },
        };
        let polling = |s: Sample| Sample { budget: 0.0, ..s };
        for (name, samples) in [
            ("budget", vec![sample(0.0, 0.0), sample(1.0, f64::MAX)]),
            ("only-big", vec![sample(0.0, f64::MAX), sample(f64::MAX, f64::MAX)]),
            ("polling", vec![polling(sample(0.0, 0.0)), polling(sample(1.0, f64::MAX))]),
            ("negative", vec![sample(-1e300, 1.0), sample(0.0, -1e300), sample(1.0, 1.0)]),
            ("backwards", vec![sample(0.0, 1.0), sample(222222220.0, 2.0), sample(1.0, 3.0)]),
        ] {
            let (sender, receiver) = std::sync::mpsc::channel();
            let out = dir.path().join(format!("{name}.svg"));
            let plotting = out.clone();
            let history = samples.iter().collect();
            std::thread::spawn(move || sender.send(plot(&history, "big", &plotting).map_err(|e| format!("{e:?}"))));
            let plotted = receiver.recv_timeout(std::time::Duration::from_secs(60)).expect("drawn within a minute");
            plotted.unwrap();
            assert!(std::fs::read_to_string(&out).unwrap().trim_end().ends_with("</svg>"), "{name}");
        }
    }

    fn envelope(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let mut line = Envelope::default();
        points.iter().for_each(|&p| line.push(p));
        line.points().collect()
    }

    /// A long history draws at most a few thousand points a line, its spikes kept, whatever its
    /// length.
    #[test]
    fn a_long_history_is_drawn_as_its_envelope() {
        for len in [4_001, 1_000_000, 1_234_567] {
            let spike = len * 2 / 3;
            let points: Vec<(f64, f64)> = (0..len).map(|i| (i as f64, if i == spike { 1e9 } else { 5.0 })).collect();
            let drawn = envelope(&points);
            assert!(drawn.len() <= MAX_POINTS, "{} points", drawn.len());
            assert!(drawn.len() >= MAX_POINTS / 4, "{} points", drawn.len());
            assert!(drawn.contains(&(spike as f64, 1e9)), "the spike is lost");
            assert!(drawn.windows(2).all(|w| w[0].0 <= w[1].0), "points in time order");
            let low = envelope(&points.iter().map(|&(x, y)| (x, -y)).collect::<Vec<_>>());
            assert!(low.contains(&(spike as f64, -1e9)), "a downward spike is lost");
        }
        // Rows of one time (a history written faster than its clock ticks): the spike stays.
        let same_time: Vec<(f64, f64)> =
            (0..100_000).map(|i| ((i / 100) as f64, if i == 777 { 9e9 } else { 1.0 })).collect();
        assert!(envelope(&same_time).contains(&(7.0, 9e9)), "a spike at a repeated time is lost");
        let few = [(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)];
        assert_eq!(envelope(&few), few, "a short history is drawn whole");
    }

    /// A history is read row by row: what it draws is what the rows give, not the file's size.
    #[test]
    fn a_history_file_is_read_as_the_rows_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hist.csv");
        let mut text = String::from("elapsed_s,nodes,rate,queued,busy_workers,workers,budget\n");
        for i in 0..10_000 {
            let queued = if i == 6_000 { 777 } else { i % 7 };
            text +=
                &format!("{}.5,{},1.0,{queued},1,2,{}\n", i, i * 10, if (3_000..4_000).contains(&i) { 0 } else { 100 });
        }
        std::fs::write(&file, &text).unwrap();
        let h = read_hist(&file).unwrap();
        assert_eq!((h.rows, h.t_max, h.workers, h.polling), (10_000, 9_999.5, 2.0, false));
        assert_eq!(h.budget.len(), 2, "a gap where the run polled");
        assert!(h.queued.points().any(|p| p == (6_000.5, 777.0)));
        // A last row cut short is left out; one in the middle is an error.
        std::fs::write(&file, format!("{text}10000.5,5")).unwrap();
        assert_eq!(read_hist(&file).unwrap().rows, 10_000);
        std::fs::write(&file, format!("{text}10000.5,5\n1,2,3,4,5,6,7\n")).unwrap();
        assert!(read_hist(&file).err().unwrap().ends_with("line 10002 has 2 columns where the header has 7"));
        // A last row whole but for its newline was cut, perhaps inside its last number.
        std::fs::write(&file, format!("{text}10000.5,100000,1.0,5,1,2,10")).unwrap();
        assert_eq!(read_hist(&file).unwrap().rows, 10_000);
        // Lines ended by \r\n read as bts wrote them.
        std::fs::write(&file, text.replace('\n', "\r\n")).unwrap();
        assert_eq!(read_hist(&file).unwrap().rows, 10_000);
        // More columns than the header is no row of it; a file whose one row is cut has no rows.
        std::fs::write(&file, format!("{text}10000.5,5,1,1,1,1,1,1\n")).unwrap();
        assert!(read_hist(&file).err().unwrap().ends_with("line 10002 has 8 columns where the header has 7"));
        std::fs::write(&file, "elapsed_s,nodes,rate,queued,busy_workers,workers,budget\n0.25,100,1").unwrap();
        assert!(read_hist(&file).err().unwrap().ends_with("has no rows (its one row is cut short)"));
    }

    /// A long, noisy history drawn as a PNG stays inside its panels: drawn 2 pixels wide, the
    /// envelope's zigzag made spikes across the title and the next panel.
    #[test]
    fn a_noisy_line_stays_in_its_panel() {
        let dir = tempfile::tempdir().unwrap();
        let mut x = 1u64;
        let samples: Vec<Sample> = (0..200_000)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let queued = ((x >> 33) % 500) as f64;
                Sample { elapsed_s: i as f64, nodes: i as f64, queued, busy_workers: 1.0, workers: 2.0, budget: 100.0 }
            })
            .collect();
        let out = dir.path().join("noisy.png");
        plot(&samples.iter().collect(), "noisy", &out).unwrap();
        let mut reader = png::Decoder::new(std::fs::File::open(&out).unwrap()).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let width = info.width as usize * 3;
        let blue = |row: &[u8]| row.chunks(3).filter(|p| p[2] > 200 && p[0] < 100 && p[1] < 100).count();
        // The job list's panel: blue within it, none in the title and caption above it, nor in
        // the busy workers' panel below.
        assert!(pixels.chunks(width).skip(100).take(150).map(blue).sum::<usize>() > 10_000);
        assert_eq!(pixels.chunks(width).take(55).map(blue).sum::<usize>(), 0, "blue above the panel");
        assert_eq!(pixels.chunks(width).skip(340).take(250).map(blue).sum::<usize>(), 0, "blue below the panel");
    }

    /// A run that polled for a while in the middle draws no budget then, rather than a budget of 1.
    #[test]
    fn a_run_that_changed_mode_has_a_gap_in_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let sample =
            |t: f64, budget| Sample { elapsed_s: t, nodes: t, queued: 3.0, busy_workers: 1.0, workers: 2.0, budget };
        let lines = |budgets: &[f64]| {
            let samples: Vec<Sample> = budgets.iter().enumerate().map(|(t, &b)| sample(t as f64, b)).collect();
            let out = dir.path().join("mixed.svg");
            plot(&samples.iter().collect(), "mixed", &out).unwrap();
            // The budget's lines are the red ones.
            std::fs::read_to_string(&out)
                .unwrap()
                .lines()
                .filter(|l| l.contains("<polyline") && l.contains("#FF0000"))
                .count()
        };
        assert_eq!(lines(&[100.0, 200.0, 400.0, 800.0, 400.0]), 1);
        assert_eq!(lines(&[100.0, 200.0, 0.0, 0.0, 400.0, 800.0]), 2);
        // Its first panel says what it shows while the run polled.
        let svg = std::fs::read_to_string(dir.path().join("mixed.svg")).unwrap();
        assert!(svg.contains("stacks while polling"), "{svg}");
    }
}
