//! The options of the user's input file. lrs reads them after the matrix's `end`, word by word
//! (from a `*` to the end of its line is a comment). Most apply to each job as they would to the whole run
//! and pass through unchanged; `maxdepth` bts applies itself, as every job's returned cobases
//! depend on it; those that limit or change the whole run cannot be split into jobs and are refused.

/// What bts takes from the input's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputOptions {
    /// lrs's `maxdepth D`: cobases at depth D are printed and not expanded.
    pub max_depth: Option<u32>,
    /// `startingcobasis`, with which lrs may name the wrong row of a redundant linearity.
    pub starting_cobasis: bool,
}

/// What lrs reads before `begin`: the representation and the input's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// A V-representation (`V-representation` or `hull`): lrs computes facets.
    pub hull: bool,
    /// The name lrs echoes first: the first word that is not one of its keywords.
    pub name: Option<String>,
    /// `nonnegative`: lrs adds the inequalities x ≥ 0 of its own.
    pub nonnegative: bool,
    /// How many rows `linearity` declares.
    pub linearities: usize,
    /// A row `linearity` lists more than once.
    pub repeated_linearity: Option<String>,
}

/// Reads the head of `input` as lrs does: word by word up to `begin`, a word starting with `*`
/// makes the rest of its line a comment; `H-representation`, `V-representation` and `hull` set the
/// representation (the last one counts), `digits` and `linearity` take their numbers, `nonnegative`
/// stands alone, and the first other word is the name.
pub fn header(input: &str) -> Header {
    let mut header = Header::default();
    let mut words = input.lines().flat_map(words_of);
    while let Some(word) = words.next() {
        match word {
            "begin" => break,
            "H-representation" => header.hull = false,
            "V-representation" | "hull" => header.hull = true,
            "digits" => {
                words.next();
            }
            "linearity" => {
                let count = words.next().and_then(|k| k.parse::<usize>().ok()).unwrap_or(0);
                header.linearities = count;
                // A set, not a search of the rows before each: a file may declare many.
                let mut seen = std::collections::HashSet::new();
                let mut repeated = words.by_ref().take(count).filter(|row| !seen.insert(*row));
                header.repeated_linearity = repeated.next().map(str::to_string);
                // The rest of the declaration is read past, as before.
                repeated.for_each(drop);
            }
            "nonnegative" => header.nonnegative = true,
            name => {
                header.name.get_or_insert_with(|| name.to_string());
            }
        }
    }
    header
}

/// `input` with the rows `redundant` taken out of its `linearity` declaration (which goes when no
/// row is left), the rest as it was. lrs makes an equation it finds redundant an inequality, but a
/// job restarted from a cobasis of such an input lands on another basis than the one printed: its
/// jobs get the input as lrs reads it. `None` if there is no declaration to change.
pub fn without_linearities(input: &[u8], redundant: &[usize]) -> Option<Vec<u8>> {
    let mut words = byte_words(input).take_while(|&(_, w)| w != b"begin");
    let (start, _) = words.find(|&(_, w)| w == b"linearity")?;
    let (count_at, count_word) = words.next()?;
    let count: usize = std::str::from_utf8(count_word).ok()?.parse().ok()?;
    let mut end = count_at + count_word.len();
    let mut kept = Vec::new();
    for (at, word) in words.take(count) {
        end = at + word.len();
        let row: usize = std::str::from_utf8(word).ok()?.parse().ok()?;
        if !redundant.contains(&row) {
            kept.push(row.to_string());
        }
    }
    let declaration = match kept.len() {
        0 => String::new(),
        n => format!("linearity {n} {}", kept.join(" ")),
    };
    Some([&input[..start], declaration.as_bytes(), &input[end..]].concat())
}

/// The words of `input` and where each starts, as lrs reads them: a word starting with `*` makes
/// the rest of its line a comment.
fn byte_words(input: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut line_start = 0;
    input.split(|&b| b == b'\n').flat_map(move |line| {
        let at = line_start;
        line_start += line.len() + 1;
        line.split(u8::is_ascii_whitespace)
            .scan(at, |offset, word| {
                let start = *offset;
                *offset += word.len() + 1;
                Some((start, word))
            })
            .filter(|(_, w)| !w.is_empty())
            .take_while(|(_, w)| w[0] != b'*')
    })
}

/// The options refused, and why.
const REFUSED: [(&str, &str); 23] = [
    ("maxcobases", "limits the whole run, which bts splits into jobs of their own budgets (--node-limit counts bases)"),
    ("maxoutput", "limits the output of the whole run, which bts splits into jobs"),
    ("countonly", "prints no records, which bts counts and writes (give bts --count-only instead)"),
    ("mindepth", "is set by bts for each job"),
    ("restart", "is set by bts for each job (bts resume carries on a stopped run)"),
    ("estimates", "estimates instead of enumerating (bts estimate lrs FILE estimates the bases)"),
    ("subtreesize", "goes with estimates (bts estimate lrs FILE estimates the bases)"),
    ("lponly", "solves a linear program instead of enumerating"),
    ("lponly_b", "solves a linear program instead of enumerating"),
    ("lponly_d", "solves a linear program instead of enumerating"),
    ("lponly_r", "solves a linear program instead of enumerating"),
    ("lponly_rd", "solves a linear program instead of enumerating"),
    ("maximize", "makes lrs print its objective among the records"),
    ("minimize", "makes lrs print its objective among the records"),
    ("extract", "is not an enumeration"),
    ("redund", "is not an enumeration"),
    ("redund_list", "is not an enumeration"),
    ("voronoi", "prints Voronoi vertices and cobases in a form bts does not read"),
    ("Voronoi", "prints Voronoi vertices and cobases in a form bts does not read"),
    ("triangulation", "prints the triangulation's simplices as cobasis lines, which bts does not keep as records"),
    ("checkpoint", "makes lrs write checkpoints of its own (bts checkpoints the run: --checkpoint FILE)"),
    ("volume", "adds up a volume over the whole run, and bts does not add up the jobs' volumes"),
    ("debug", "prints tableaux that cannot be told apart from the records"),
];

/// Reads the options of `input` (an lrs input file's text): the words after the matrix. lrs reads
/// words, not lines: `begin`, then `m n <type>`, then m·n numbers (`end` is optional), wherever the
/// line breaks fall.
pub fn read(input: &str) -> Result<InputOptions, String> {
    let mut options = InputOptions::default();
    let mut words = input.lines().flat_map(words_of).skip_while(|&w| w != "begin");
    if words.next().is_none() {
        return Err("there is no `begin`: lrs reads the matrix after it, and this is no lrs input".into());
    }
    let size: Vec<_> = words.by_ref().take(2).map(str::parse::<usize>).collect();
    let &[Ok(m), Ok(n)] = size.as_slice() else {
        // No matrix that lrs can read: the input check says what lrs makes of it.
        return Ok(options);
    };
    // The number type.
    words.next();
    // A matrix cut short would take the option lines bts appends as numbers, and lrs would
    // complain of words the user never wrote.
    let numbers = m.saturating_mul(n);
    let (mut found, mut ended) = (0, false);
    while found < numbers {
        match words.next() {
            Some("end") => {
                ended = true;
                break;
            }
            Some(_) => found += 1,
            None => break,
        }
    }
    if found < numbers {
        let stop = if ended { "`end`" } else { "the end of the file" };
        return Err(format!(
            "the input's matrix is cut short: `{m} {n}` after `begin` promises {m} rows of {n} numbers, and {stop} \
             comes after {found}"
        ));
    }
    while let Some(word) = words.next() {
        if let Some((_, why)) = REFUSED.iter().find(|(name, _)| *name == word) {
            return Err(format!("the input's option `{word}` {why}: bts run lrs cannot take it; remove it"));
        }
        options.starting_cobasis |= word == "startingcobasis";
        if word == "maxdepth" {
            let depth = words.next().and_then(|d| d.parse::<u64>().ok());
            let depth = depth.ok_or("the input's option `maxdepth` needs a depth (a number from 0)")?;
            // The last one counts, as in lrs; beyond any depth a tree reaches, it is no limit.
            options.max_depth = Some(u32::try_from(depth).unwrap_or(u32::MAX));
        }
    }
    Ok(options)
}

/// The dimension of the input's space: n - 1 for the `m n` after `begin` (0 if unreadable).
pub fn dimension(input: &str) -> u64 {
    let n = input.lines().flat_map(words_of).skip_while(|&w| w != "begin").nth(2);
    n.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0).saturating_sub(1)
}

/// A line's words up to a comment, which a `*` starts and the line ends.
fn words_of(line: &str) -> impl Iterator<Item = &str> {
    line.split_whitespace().take_while(|w| !w.starts_with('*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUBE: &str = "cube\nH-representation\nbegin\n2 2 rational\n1 1\n1 -1\nend\n";

    #[test]
    fn redundant_linearities_leave_the_declaration() {
        let rewrite = |input: &str, rows: &[usize]| {
            without_linearities(input.as_bytes(), rows).map(|b| String::from_utf8(b).unwrap())
        };
        let input = "b\n* linearity 9 in a comment\nlinearity 3 1\t2\n 3 * the sums\nbegin\n3 2 rational\n";
        assert_eq!(
            rewrite(input, &[2]).unwrap(),
            "b\n* linearity 9 in a comment\nlinearity 2 1 3 * the sums\nbegin\n3 2 rational\n"
        );
        assert_eq!(
            rewrite(input, &[1, 2, 3]).unwrap(),
            "b\n* linearity 9 in a comment\n * the sums\nbegin\n3 2 rational\n"
        );
        assert_eq!(rewrite("b\nbegin\nlinearity 1 1\n", &[1]), None);
        assert_eq!(header(&rewrite(input, &[2]).unwrap()).linearities, 2);
    }

    #[test]
    fn options_after_end_are_read_word_by_word_and_comments_skipped() {
        assert_eq!(read(CUBE), Ok(InputOptions::default()));
        let with = |tail: &str| read(&format!("{CUBE}{tail}"));
        assert_eq!(with("printcobasis 2\nmaxdepth 3\n"), Ok(InputOptions { max_depth: Some(3), ..Default::default() }));
        assert_eq!(with("startingcobasis 1 2\n"), Ok(InputOptions { starting_cobasis: true, ..Default::default() }));
        assert_eq!(with("maxdepth\n4\n"), Ok(InputOptions { max_depth: Some(4), ..Default::default() }));
        assert_eq!(with("maxdepth 0 maxdepth 2\n"), Ok(InputOptions { max_depth: Some(2), ..Default::default() }));
        assert_eq!(with("* maxdepth 1\nincidence\n"), Ok(InputOptions::default()));
        assert_eq!(
            with("maxdepth 1 * not maxcobases 2\n"),
            Ok(InputOptions { max_depth: Some(1), ..Default::default() })
        );
        assert!(with("maxdepth x\n").unwrap_err().contains("needs a depth"));
        assert!(with("maxdepth").is_err());
    }

    #[test]
    fn the_matrix_is_counted_not_its_lines_and_end_is_optional() {
        let text = "cube\nH-representation\nbegin\n2 2 rational\n1 1 1\n-1\nmaxdepth 2\n";
        assert_eq!(read(text), Ok(InputOptions { max_depth: Some(2), ..Default::default() }));
        assert_eq!(read("x\nbegin\nthree 2 rational\nmaxcobases 3\n"), Ok(InputOptions::default()));
    }

    #[test]
    fn a_matrix_cut_short_is_refused_with_what_it_lacks() {
        let e = read("cube\nbegin\n2 2 rational\n1 1\n1\n").unwrap_err();
        assert!(e.contains("promises 2 rows of 2 numbers, and the end of the file comes after 3"), "{e}");
        let e = read("cube\nbegin\n2 2 rational\n1 1\nend\n").unwrap_err();
        assert!(e.contains("`end` comes after 2"), "{e}");
        let e = read("cube\nbegin\n2 2 rational\n").unwrap_err();
        assert!(e.contains("comes after 0"), "{e}");
        // A comment is not a number.
        assert!(read("cube\nbegin\n2 2 rational\n1 1 * a row\n1\n").is_err());
        // The matrix may start on the size line.
        assert_eq!(
            read("cube\nbegin\n2 2 rational 1 1\n1 -1 maxdepth 1\n"),
            Ok(InputOptions { max_depth: Some(1), ..Default::default() })
        );
    }

    #[test]
    fn begin_and_the_size_are_words_wherever_the_lines_break() {
        let matrix = "1 1 0\n1 -1 0\n1 0 1\n";
        for head in [
            "cube begin 3 3 rational\n",
            "begin 3\n3\nrational\n",
            "begin\n3 3\nrational ",
            "H-representation begin 3 3 integer\n",
        ] {
            let text = format!("{head}{matrix}end\nmaxdepth 1\n");
            assert_eq!(read(&text), Ok(InputOptions { max_depth: Some(1), ..Default::default() }), "{text}");
            let e = read(&format!("{head}{matrix}end\nmaxcobases 3\n")).unwrap_err();
            assert!(e.contains("`maxcobases`"), "{e}");
        }
        // `begin` in a comment is not lrs's.
        let e = read("cube * begin\n3 3 rational\n").unwrap_err();
        assert!(e.contains("no `begin`"), "{e}");
        assert!(read("").unwrap_err().contains("no `begin`"));
    }

    #[test]
    fn a_depth_beyond_any_tree_is_no_limit() {
        let e = |tail: &str| read(&format!("{CUBE}{tail}"));
        assert_eq!(e("maxdepth 4294967296\n"), Ok(InputOptions { max_depth: Some(u32::MAX), ..Default::default() }));
        assert!(e("maxdepth -1\n").unwrap_err().contains("needs a depth"));
    }

    #[test]
    fn options_before_begin_are_not_lrss_and_left_alone() {
        let text = "cube\nH-representation\nmaxcobases 3\nmaxdepth 1\nbegin\n1 2 rational\n1 1\nend\n";
        assert_eq!(read(text), Ok(InputOptions::default()));
    }

    #[test]
    fn the_head_is_read_word_by_word_as_lrs_reads_it() {
        let h = |text: &str| header(&format!("{text}\nbegin\n1 2 rational\n1 1\nend\n"));
        let named = |hull, name: &str| Header { hull, name: Some(name.into()), ..Header::default() };
        assert_eq!(h("cube\nH-representation"), named(false, "cube"));
        assert_eq!(h("cube\nV-representation"), named(true, "cube"));
        assert_eq!(h("V-representation"), Header { hull: true, ..Header::default() });
        // Anywhere before `begin`, on any line, the last one counting; not in a comment.
        assert_eq!(h("cube V-representation * of points"), named(true, "cube"));
        assert_eq!(h("cube\nhull"), named(true, "cube"));
        assert_eq!(h("cube\nV-representation H-representation"), named(false, "cube"));
        assert_eq!(h("* V-representation\ncube"), named(false, "cube"));
        assert_eq!(h("cube *V-representation"), named(false, "cube"));
        // A number may be the name; the numbers of `linearity` and `digits` are not.
        assert_eq!(h("600\nH-representation"), named(false, "600"));
        let all = h("linearity 2 1 3\ndigits 40\nnonnegative\nV-representation\nthe name");
        assert_eq!(all, Header { linearities: 2, nonnegative: true, ..named(true, "the") });
        assert_eq!(h("linearity 3 2 1 2").repeated_linearity.as_deref(), Some("2"));
        // After `begin`, nothing counts.
        assert_eq!(header("begin\n1 2 rational\nV-representation\n"), Header::default());
    }

    /// Many rows are checked for repeats at once, not each against those before it (which took
    /// over a minute for 300,000 rows).
    #[test]
    fn a_long_linearity_is_read_in_linear_time() {
        let rows: Vec<String> = (1..=300_000).map(|i| i.to_string()).collect();
        let text = format!("big\nlinearity {} {}\nbegin\n1 2 rational\n1 1\nend\n", rows.len(), rows.join(" "));
        let started = std::time::Instant::now();
        let h = header(&text);
        assert_eq!((h.linearities, h.repeated_linearity, h.name.as_deref()), (300_000, None, Some("big")));
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        let repeated = format!("b\nlinearity 4 {} 7 2 7 2\nbegin\n", rows.len());
        assert_eq!(header(&repeated).repeated_linearity.as_deref(), Some("7"));
    }

    #[test]
    fn the_dimension_is_one_less_than_the_columns() {
        assert_eq!(dimension(CUBE), 1);
        assert_eq!(dimension("c\n* begin 9 9\nV-representation begin 8\n 7 rational\n"), 6);
        assert_eq!(dimension("no matrix\n"), 0);
    }

    #[test]
    fn whole_run_options_are_refused_by_name() {
        for (name, _) in REFUSED {
            let e = read(&format!("{CUBE}verbose\n{name} 1\n")).unwrap_err();
            assert!(e.contains(&format!("`{name}`")), "{e}");
        }
        // Names are case-sensitive for lrs, which ignores `MAXCOBASES`.
        assert_eq!(read(&format!("{CUBE}MAXCOBASES 3\n")), Ok(InputOptions::default()));
    }
}
