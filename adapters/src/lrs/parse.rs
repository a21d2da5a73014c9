//! What one lrs job prints, read line by line: its output records (verbatim), the cobases it left
//! unexplored (`... h=<depth> facets <f...> I#... *unexplored` with `verbose`), its `*Totals` line,
//! and the lines before the records that make the head of an lrs file.
//!
//! lrs 7.1 prints a `*lrs:lrslib` banner when it starts and again after `*Totals`. A second banner
//! before `*Totals` means that arithmetic overflowed and lrs started the whole job again with wider
//! arithmetic: everything before it is void.

/// One job's output so far.
#[derive(Debug, Default)]
pub struct JobOutput {
    /// The input's name, which lrs echoes before anything else (skipped once).
    name: Option<String>,
    name_seen: bool,
    banners: u32,
    /// Output records, each ending in `\n`.
    pub records: String,
    pub record_count: u64,
    /// (depth, cobasis) of each unexplored cobasis.
    pub unexplored: Vec<(u32, String)>,
    /// The `*Totals` line's counts, by name (sums such as `vertices+rays=` left out).
    pub totals: Option<Vec<(String, u64)>>,
    /// Lines before the first record that are not comments: `V-representation`, `linearity ..`,
    /// `begin`, and the `***** <n> rational` line.
    pub head: Vec<String>,
    /// The last comment lines (lrs's complaints, for error messages).
    pub notes: Vec<String>,
    /// The job ran in lrs's 128-bit arithmetic, whose numbers of 19 digits and more lrs 7.1
    /// prints wrongly (see [`MISPRINTS_128`]).
    pub in_128_bits: bool,
    /// The input rows declared as `linearity` that lrs found redundant and made inequalities.
    pub redundant_linearities: Vec<usize>,
}

const NOTES: usize = 6;

impl JobOutput {
    /// A job of an input called `name` (`None` for an input without a name line).
    pub fn new(name: Option<&str>) -> Self {
        Self { name: name.map(str::to_string), ..Self::default() }
    }

    /// Whether lrs's banner came: a program that never prints one is not lrs.
    pub fn saw_banner(&self) -> bool {
        self.banners > 0
    }

    /// Takes one line (without its newline); an error says why it makes no sense.
    pub fn line(&mut self, line: &str) -> Result<(), String> {
        let text = line.trim();
        if text.is_empty() {
            return Ok(());
        }
        if text.starts_with("*lrs:lrslib") {
            self.banners += 1;
            if self.banners > 1 && self.totals.is_none() {
                // Overflow: lrs starts again with wider arithmetic (or it found no feasible
                // solution and ends: its notes say so).
                let (name, notes) = (self.name.take(), std::mem::take(&mut self.notes));
                *self = Self { name, notes, banners: 1, ..Self::default() };
            }
            if self.totals.is_none() {
                self.in_128_bits = text.contains("(128bit,");
            }
            return Ok(());
        }
        if text.ends_with("*unexplored") {
            self.unexplored.push(cobasis(text).ok_or("an unexplored cobasis lrs printed in an unknown form")?);
            return Ok(());
        }
        if let Some(totals) = text.strip_prefix("*Totals:") {
            self.totals = Some(parse_totals(totals));
            return Ok(());
        }
        if text.starts_with("*****") {
            self.head.push(text.to_string());
            return Ok(());
        }
        if let Some(row) = redundant_linearity(text) {
            self.redundant_linearities.push(row);
            return Ok(());
        }
        if text.starts_with('*') {
            if !is_routine(text) {
                self.note(text);
            }
            return Ok(());
        }
        if !self.name_seen {
            self.name_seen = true;
            if self.name.as_deref().map(str::trim) == Some(text) {
                return Ok(());
            }
        }
        if is_record(text) {
            self.records.push_str(line);
            self.records.push('\n');
            self.record_count += 1;
        } else if is_head(text) && self.record_count == 0 && self.unexplored.is_empty() {
            self.head.push(text.to_string());
        } else if text != "end" {
            // Options echoed, cobases of `printcobasis`, slacks, `No feasible solution`, ...
            self.note(text);
        }
        Ok(())
    }

    fn note(&mut self, text: &str) {
        if self.notes.len() == NOTES {
            self.notes.remove(0);
        }
        self.notes.push(text.to_string());
    }

    /// A count of the `*Totals` line (0 when absent).
    pub fn total(&self, name: &str) -> u64 {
        let totals = self.totals.as_deref().unwrap_or_default();
        totals.iter().find(|(n, _)| n == name).map_or(0, |&(_, v)| v)
    }
}

/// lrs 7.1 prints a number of 19 digits or more in its 128-bit arithmetic as two halves, the
/// lower without its leading zeros: 1000000000000000289 as `1289`. Plain lrs does so too, but only
/// while it runs in 128 bits; a job that never meets the numbers that took plain lrs on to GMP
/// stays there, and may print such a number wrongly where plain lrs printed it right.
pub const MISPRINTS_128: &str = "lrs ran a job in its 128-bit arithmetic, in which lrs 7.1 prints numbers of 19 \
     digits or more wrongly (1000000000000000289 as 1289), as plain lrs does while it runs in it: if the \
     records may hold such numbers, check them with an lrs that prints them right";

/// A line of an lrs file's head that lrs prints before the records, besides the name and the
/// `*****` line: the output's representation, its `linearity`, `begin`.
fn is_head(text: &str) -> bool {
    matches!(text, "H-representation" | "V-representation" | "begin") || text.starts_with("linearity ")
}

/// A comment lrs prints on every run, when it widens its arithmetic, or to echo the options bts
/// gives a job: no help in an error message. (`*Input taken from` names the job's own input file,
/// not the user's.)
fn is_routine(text: &str) -> bool {
    let timing = text[1..].starts_with(|c: char| c.is_ascii_digit()) && text.contains("u ");
    let echo = ["*restart ", "*mindepth", "*maxcobases", "*maxdepth", "*countonly"];
    timing
        || text.starts_with("*Overflow checking")
        || text.starts_with("*lrs:overflow possible")
        || text.starts_with("*Input taken from")
        || echo.iter().any(|e| text.starts_with(e))
}

/// The row of `*Input linearity in row <row> is redundant--converted to inequality`.
fn redundant_linearity(text: &str) -> Option<usize> {
    let rest = text.strip_prefix("*Input linearity in row ")?;
    let (row, rest) = rest.split_once(' ')?;
    rest.starts_with("is redundant").then(|| row.parse().ok())?
}

/// A line of integers and rationals only: a vertex, ray, facet or lineality row.
pub fn is_record(text: &str) -> bool {
    let number = |t: &str| {
        let t = t.strip_prefix('-').unwrap_or(t);
        let mut parts = t.splitn(2, '/');
        let digits = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let first = parts.next();
        digits(first) && parts.next().is_none_or(|q| digits(Some(q)))
    };
    let mut tokens = text.split_whitespace().peekable();
    tokens.peek().is_some() && tokens.all(number)
}

/// `V#3 R#0 B#3 h=1 facets  2 4 6 I#3 det= 1 in_det= 1 z= 2  *unexplored` (H-representation) or
/// `F#4 B#3 h=2 vertices/rays  3 4 5 7 I#8 ...` (V-representation): (1, "2 4 6").
pub fn cobasis(text: &str) -> Option<(u32, String)> {
    let mut tokens = text.split_whitespace();
    let depth = tokens.by_ref().find_map(|t| t.strip_prefix("h="))?.parse().ok()?;
    tokens.by_ref().find(|&t| t == "facets" || t == "vertices/rays")?;
    // With `incidence` the other tight inequalities follow a `:`.
    let indices: Vec<&str> = tokens.take_while(|t| !t.starts_with("I#") && !t.starts_with('*') && *t != ":").collect();
    let valid = !indices.is_empty() && indices.iter().all(|t| t.bytes().all(|b| b.is_ascii_digit()));
    valid.then(|| (depth, indices.join(" ")))
}

fn parse_totals(text: &str) -> Vec<(String, u64)> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| !k.contains('+'))
        .filter_map(|(k, v)| Some((k.replace('-', "_"), v.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: Option<&str>, text: &str) -> JobOutput {
        let mut out = JobOutput::new(name);
        for line in text.lines() {
            out.line(line).unwrap();
        }
        out
    }

    #[test]
    fn a_root_job_with_a_budget() {
        // lrs 7.1 on a cube with `verbose` and `maxcobases 3`.
        let out = read(
            Some("cube"),
            "\n*lrs:lrslib v.7.1 2021.6.2(64bit,lrslong.h,hybrid arithmetic)\ncube\n*maxcobases  3\n\
             V-representation\nbegin\n***** 4 rational\n 1  1  1  1 \n 1 -1  1  1 \n 1  1 -1  1 \n\
             V#3 R#0 B#3 h=1 facets  2 4 6 I#3 det= 1 in_det= 1 z= 2  *unexplored\n 1  1  1 -1 \n\
             V#4 R#0 B#4 h=1 facets  3 4 5 I#3 det= 1 in_det= 1 z= 2  *unexplored\nend\n*maxcobases = 3\n\
             *Totals: vertices=4 rays=0 bases=4 integer_vertices=4 \n\
             *lrs:lrslib v.7.1 2021.6.2(64bit,lrslong.h,hybrid arithmetic)\n",
        );
        assert_eq!(out.records, " 1  1  1  1 \n 1 -1  1  1 \n 1  1 -1  1 \n 1  1  1 -1 \n");
        assert_eq!(out.record_count, 4);
        assert_eq!(out.unexplored, vec![(1, "2 4 6".to_string()), (1, "3 4 5".to_string())]);
        assert_eq!(out.head, vec!["V-representation", "begin", "***** 4 rational"]);
        assert!(out.notes.iter().all(|n| !n.contains("maxcobases") || n.starts_with('*')), "{:?}", out.notes);
        assert_eq!((out.total("vertices"), out.total("bases"), out.total("rays")), (4, 4, 0));
    }

    #[test]
    fn the_head_holds_only_what_an_lrs_file_has_before_its_records() {
        // lrs 7.1 on a cube with `printcobasis` (echoed) and `incidence`, whose lines come
        // before the first record; then an empty polyhedron.
        let out = read(
            Some("cube"),
            "*lrs:lrslib v.7.1\ncube\nprintcobasis\nincidence\nV-representation\nlinearity 1 2\nbegin\n\
             ***** 4 rational\nV#1 R#0 B#1 h=0 facets  2 4 6 : 1 I#3 det= 1 in_det= 1 z= 0\n 1  1  1  1 \n\
             slack ineq: 1 3 5\nend\n*0.001u 0.000s 1688Kb 1 flts 0 swaps 56 blks-in 8 blks-out\n\
             *Totals: vertices=1 rays=0 bases=1 integer_vertices=1\n",
        );
        assert_eq!(out.head, vec!["V-representation", "linearity 1 2", "begin", "***** 4 rational"]);
        assert_eq!(out.record_count, 1);
        assert_eq!(out.notes[..2], ["printcobasis", "incidence"]);
        assert!(out.notes.iter().all(|n| !n.contains("blks-in")), "{:?}", out.notes);
        let empty = read(
            Some("e"),
            "*lrs:lrslib v.7.1\ne\nV-representation\nbegin\n***** 3 rational\nend\nNo feasible solution\n\
             *Overflow checking on lrslong arithmetic\n*lrs:lrslib v.7.1\n",
        );
        assert_eq!(empty.notes, ["No feasible solution"]);
    }

    #[test]
    fn an_overflow_voids_what_came_before() {
        let out = read(
            Some("x"),
            "*lrs:lrslib v.7.1 (64bit)\nx\n 1 2 \n*lrs:lrslib v.7.1 (128bit)\nx\n 1 2 \n 1 3 \n\
             *Totals: vertices=2 rays=0 bases=2 integer_vertices=2\n*lrs:lrslib v.7.1 (128bit)\n",
        );
        assert_eq!(out.records, " 1 2 \n 1 3 \n");
        assert_eq!(out.total("vertices"), 2);
    }

    #[test]
    fn numbers_only_make_a_record() {
        for yes in [" 1  0  1/2 -3/4 ", "0 0 0 1", "-5"] {
            assert!(is_record(yes), "{yes:?}");
        }
        for no in ["", "end", "begin", "linearity 1  1", "1 2 x", "1/", "/2", "1/-2", "cube", "1.5"] {
            assert!(!is_record(no), "{no:?}");
        }
    }

    #[test]
    fn cobases_of_both_representations() {
        let h = "V#3 R#0 B#3 h=1 facets  2 4 6 I#3 det= 1 in_det= 1 z= 2  *unexplored";
        assert_eq!(cobasis(h), Some((1, "2 4 6".into())));
        let v = "F#4 B#3 h=2 vertices/rays  3 4 5 7 I#8 det= 8 in_det= 8 z= 0  *unexplored";
        assert_eq!(cobasis(v), Some((2, "3 4 5 7".into())));
        let incidence = "V#1 R#0 B#1 h=0 facets  12 14 15 16 : 9 10 11 13 I#8 det= 8 in_det= 8 z= 0  *unexplored";
        assert_eq!(cobasis(incidence), Some((0, "12 14 15 16".into())));
        assert_eq!(cobasis("h=x facets 1 2 *unexplored"), None);
        assert_eq!(cobasis("h=1 facets *unexplored"), None);
    }

    #[test]
    fn the_arithmetic_of_the_jobs_last_start_counts() {
        let banner = |bits: &str| format!("*lrs:lrslib v.7.1 2021.6.2({bits},lrslong.h,hybrid arithmetic)\n");
        let job = |text: &str| read(Some("b"), text).in_128_bits;
        assert!(job(&format!("{}b\n{}b\n 1  1289 \n*Totals: vertices=1\n", banner("64bit"), banner("128bit"))));
        assert!(!job(&format!("{}b\n{}b\n 1  7 \n", banner("128bit"), banner("64bit"))));
        // The banner lrs prints again after its totals is not a restart.
        assert!(!job(&format!("{}b\n 1  7 \n*Totals: vertices=1\n{}", banner("64bit"), banner("128bit"))));
    }

    #[test]
    fn redundant_linearities_are_noted_by_row() {
        let out = read(
            Some("b"),
            "b\n*Input linearity in row 15 is redundant--converted to inequality\n*Input linearity in row 2 is redundant--converted to inequality\n",
        );
        assert_eq!(out.redundant_linearities, [15, 2]);
        assert!(out.notes.is_empty());
        assert_eq!(redundant_linearity("*Input linearity in row x is redundant"), None);
    }

    #[test]
    fn totals_by_name() {
        let t = parse_totals(" vertices=3 rays=1 bases=3 integer_vertices=3  linearities=1 vertices+rays=4");
        let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["vertices", "rays", "bases", "integer_vertices", "linearities"]);
        assert_eq!(parse_totals(" facets=6 bases=6"), vec![("facets".into(), 6), ("bases".into(), 6)]);
    }
}
