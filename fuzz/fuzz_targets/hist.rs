//! A `--hist` file is read as `bts plot` reads it without a panic, and what it accepts is plotted
//! (as SVG) without one: its numbers are finite, however large.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir();
    let hist = dir.join(format!("bts-fuzz-hist-{}.csv", std::process::id()));
    std::fs::write(&hist, data).unwrap();
    let Ok(history) = bts::plot::read_hist(&hist) else { return };
    assert!(history.rows() > 0);
    let out = dir.join(format!("bts-fuzz-hist-{}.svg", std::process::id()));
    if let Err(bts::plot::PlotError::Failed(e)) = bts::plot::plot(&history, "fuzz", &out) {
        panic!("{e}");
    }
});
