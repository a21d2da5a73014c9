//! `bts plot`: the job list, the busy workers and the budget of a run over time, from its `--hist`
//! file, as in Figure 2 of Avis & Devroye (in polling mode the workers' stacks, the busy workers and
//! the nodes visited). SVG or PNG, by the output's extension.

use plotters::coord::Shift;
use plotters::prelude::*;
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

/// Reads a `--hist` file; the message says what is wrong with a bad one.
pub fn read_hist(path: &Path) -> Result<Vec<Sample>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| format!("{} is empty", path.display()))?.split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("{} is not a bts --hist file (no column {name})", path.display()))
    };
    let cols = [column("elapsed_s")?, column("nodes")?, column("queued")?, column("busy_workers")?];
    let (workers, budget) = (column("workers")?, column("budget")?);
    let mut samples = Vec::new();
    let rows: Vec<(usize, &str)> = lines.enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
    for (at, &(i, line)) in rows.iter().enumerate() {
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < header.len() {
            // A run writing the history as it goes (or a disk that filled up) leaves its last row
            // cut short: the rows before it still make a plot.
            if at + 1 == rows.len() && !samples.is_empty() {
                crate::logging::say!("bts: {}: its last line is cut short; plotted without it", path.display());
                break;
            }
            return Err(format!(
                "{}: line {} has {} columns where the header has {}",
                path.display(),
                i + 2,
                fields.len(),
                header.len()
            ));
        }
        let get = |c: usize| -> Result<f64, String> {
            fields
                .get(c)
                .and_then(|f| f.trim().parse::<f64>().ok())
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{}: line {} is not a row of numbers", path.display(), i + 2))
        };
        samples.push(Sample {
            elapsed_s: get(cols[0])?,
            nodes: get(cols[1])?,
            queued: get(cols[2])?,
            busy_workers: get(cols[3])?,
            workers: get(workers)?,
            budget: get(budget)?,
        });
    }
    if samples.is_empty() {
        return Err(format!("{} has no rows", path.display()));
    }
    Ok(samples)
}

/// Why a plot was not made.
#[derive(Debug)]
pub enum PlotError {
    /// What was asked cannot be done (an unknown format, the input as the output).
    Usage(String),
    /// The plot could not be drawn or written.
    Failed(String),
}

/// Draws `samples` to `out` (`.svg` or `.png`), through a temporary file beside it renamed over it
/// once whole: a plot that fails leaves `out` as it was.
pub fn plot(samples: &[Sample], title: &str, out: &Path) -> Result<(), PlotError> {
    let svg = match out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => true,
        Some("png") => false,
        _ => return Err(PlotError::Usage(format!("{}: the plot's name must end in .svg or .png", out.display()))),
    };
    // A folder that is not there is the command's mistake, as for every file bts writes.
    if let Some(folder) = out.parent().filter(|f| !f.as_os_str().is_empty() && !f.is_dir()) {
        return Err(PlotError::Usage(format!("cannot write {}: no folder {}", out.display(), folder.display())));
    }
    register_font().map_err(PlotError::Failed)?;
    // Its extension is the plot's: the PNG encoder goes by it.
    let tmp = bts_checkpoints::temporary_path(out).with_extension(if svg { "tmp.svg" } else { "tmp.png" });
    // Made here first, so that a folder that cannot take it is told plainly.
    let cannot = |e: &dyn std::fmt::Display| PlotError::Failed(format!("cannot write {}: {e}", out.display()));
    std::fs::File::create(&tmp).map_err(|e| cannot(&e))?;
    let drawn = match svg {
        true => present(SVGBackend::new(&tmp, (1000, 900)).into_drawing_area(), samples, title),
        false => present(BitMapBackend::new(&tmp, (1000, 900)).into_drawing_area(), samples, title),
    };
    let written = drawn.map_err(|e| cannot(&e)).and_then(|()| std::fs::rename(&tmp, out).map_err(|e| cannot(&e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Draws on `root` and writes it out.
fn present<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, samples: &[Sample], title: &str) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    draw(&root, samples, title).map_err(|e| e.to_string())?;
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
struct Panel {
    name: &'static str,
    unit: &'static str,
    value: fn(&Sample) -> f64,
    color: RGBColor,
    /// The highest value the axis must show besides the data (the workers for busy workers).
    ceiling: fn(&Sample) -> f64,
    log: bool,
}

/// The three pictures: in budget mode the job list, the busy workers and the budget; in polling
/// mode (no job list, no budget: its `--hist` rows say budget 0) the nodes on the workers' stacks,
/// the busy workers and the nodes visited.
fn panels(polling: bool) -> [Panel; 3] {
    let busy = Panel {
        name: "busy workers",
        unit: "workers",
        value: |s| s.busy_workers,
        color: RGBColor(0, 140, 0),
        ceiling: |s| s.workers,
        log: false,
    };
    if polling {
        return [
            Panel {
                name: "nodes on the workers' stacks",
                unit: "nodes waiting",
                value: |s| s.queued,
                color: BLUE,
                ceiling: |_| 0.0,
                log: false,
            },
            busy,
            Panel {
                name: "nodes visited",
                unit: "nodes",
                value: |s| s.nodes,
                color: RED,
                ceiling: |_| 0.0,
                log: false,
            },
        ];
    }
    [
        Panel {
            name: "job list |L|",
            unit: "jobs waiting",
            value: |s| s.queued,
            color: BLUE,
            ceiling: |_| 0.0,
            log: false,
        },
        busy,
        Panel {
            name: "budget b",
            unit: "nodes per job (log)",
            value: |s| s.budget,
            color: RED,
            ceiling: |_| 0.0,
            log: true,
        },
    ]
}

/// Points drawn of a line at most: a picture 1,000 pixels wide shows no more (a week's history
/// has 2.4 million rows, whose SVG was 57 MB).
const MAX_POINTS: usize = 4000;

/// The points of a line to draw: all of them, or of each run of consecutive points, the lowest and
/// the highest in the order they come, so that a spike of one row still shows.
fn envelope(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    let run = points.len().div_ceil(MAX_POINTS / 2).max(1);
    points.chunks(run).flat_map(|chunk| {
        let by_y = |a: &(usize, &(f64, f64)), b: &(usize, &(f64, f64))| a.1.1.total_cmp(&b.1.1);
        let low = chunk.iter().enumerate().min_by(by_y).expect("a chunk is not empty");
        let high = chunk.iter().enumerate().max_by(by_y).expect("a chunk is not empty");
        match low.0.cmp(&high.0) {
            std::cmp::Ordering::Less => vec![*low.1, *high.1],
            std::cmp::Ordering::Equal => vec![*low.1],
            std::cmp::Ordering::Greater => vec![*high.1, *low.1],
        }
    })
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    samples: &[Sample],
    title: &str,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let areas = root.split_evenly((3, 1));
    // The latest time, which is the last row's in a history bts wrote.
    let t_max = samples.iter().map(|s| s.elapsed_s).fold(1e-3, f64::max);
    let polling = samples.iter().all(|s| s.budget == 0.0);
    for (area, panel) in areas.iter().zip(&panels(polling)) {
        let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.elapsed_s, (panel.value)(s))).collect();
        let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0);
        let mut chart = ChartBuilder::on(area);
        chart.margin(12).x_label_area_size(36).y_label_area_size(70).caption(panel.name, ("sans-serif", 18));
        let style = panel.color.stroke_width(2);
        // A history's numbers are finite but may be as large as a float goes: the axes' ends, past
        // the data, are kept finite too, and so is the ratio of a log axis's ends (plotters never
        // finishes an axis that reaches infinity). Points are drawn within the axes, at their edge
        // if need be: a point far outside them (a negative count or time, a value beyond a top
        // kept finite) overflows plotters' pixel arithmetic.
        if panel.log {
            let y_min = points.iter().map(|p| p.1).filter(|&y| y > 0.0).fold(f64::MAX, f64::min).min(y_max);
            let bottom = y_min.max(1.0) / 2.0;
            let top = (y_max * 2.0).min(f64::MAX / 4.0).max(bottom * 2.0);
            let mut c = chart.build_cartesian_2d(0.0..t_max, (bottom..top).log_scale())?;
            c.configure_mesh().x_desc("seconds").y_desc(panel.unit).y_label_formatter(&|y| short(*y)).draw()?;
            // A run that changed mode has no budget while it polled (its rows say 0): gaps there.
            for segment in points.split(|p| p.1 <= 0.0).filter(|s| !s.is_empty()) {
                let within = envelope(segment).map(|(x, y)| (x.clamp(0.0, t_max), y.max(1.0).min(top)));
                c.draw_series(LineSeries::new(within, style))?;
            }
        } else {
            let ceiling = samples.iter().map(panel.ceiling).fold(0.0, f64::max);
            let top = if ceiling > 0.0 { ceiling.max(y_max) + 0.5 } else { y_max * 1.05 }.min(f64::MAX);
            let mut c = chart.build_cartesian_2d(0.0..t_max, 0.0..top)?;
            c.configure_mesh().x_desc("seconds").y_desc(panel.unit).y_label_formatter(&|y| short(*y)).draw()?;
            let within = envelope(&points).map(|(x, y)| (x.clamp(0.0, t_max), y.clamp(0.0, top)));
            c.draw_series(LineSeries::new(within, style))?;
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
            std::thread::spawn(move || sender.send(plot(&samples, "big", &plotting).map_err(|e| format!("{e:?}"))));
            let plotted = receiver.recv_timeout(std::time::Duration::from_secs(60)).expect("drawn within a minute");
            plotted.unwrap();
            assert!(std::fs::read_to_string(&out).unwrap().trim_end().ends_with("</svg>"), "{name}");
        }
    }

    /// A long history draws at most a few thousand points a line, its spikes kept.
    #[test]
    fn a_long_history_is_drawn_as_its_envelope() {
        let points: Vec<(f64, f64)> =
            (0..1_000_000).map(|i| (i as f64, if i == 654_321 { 1e9 } else { 5.0 })).collect();
        let drawn: Vec<(f64, f64)> = envelope(&points).collect();
        assert!(drawn.len() <= MAX_POINTS, "{} points", drawn.len());
        assert!(drawn.contains(&(654_321.0, 1e9)), "the spike is lost");
        assert!(drawn.windows(2).all(|w| w[0].0 <= w[1].0), "points in time order");
        // Rows of one time (a history written faster than its clock ticks): the spike stays.
        let same_time: Vec<(f64, f64)> =
            (0..100_000).map(|i| ((i / 100) as f64, if i == 777 { 9e9 } else { 1.0 })).collect();
        assert!(envelope(&same_time).any(|p| p == (7.0, 9e9)), "a spike at a repeated time is lost");
        let few = [(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)];
        assert_eq!(envelope(&few).collect::<Vec<_>>(), few, "a short history is drawn whole");
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
            plot(&samples, "mixed", &out).unwrap();
            // The budget's lines are the red ones.
            std::fs::read_to_string(&out)
                .unwrap()
                .lines()
                .filter(|l| l.contains("<polyline") && l.contains("#FF0000"))
                .count()
        };
        assert_eq!(lines(&[100.0, 200.0, 400.0, 800.0, 400.0]), 1);
        assert_eq!(lines(&[100.0, 200.0, 0.0, 0.0, 400.0, 800.0]), 2);
    }
}
