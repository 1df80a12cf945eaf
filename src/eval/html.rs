//! `eval report --html`: one self-contained page (inline CSS, inline SVG, no scripts): who made
//! it and when, the tables of the text report as HTML tables, and three charts, all from the
//! same summaries as the text table.

use super::report::VERSUS_NOTE;
use super::report::{by_task, cells, label, totals, versus, BestOf, Summary, Versus, COLUMNS};
use super::results::RunRecord;
use super::EvalError;
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::time::SystemTime;

/// The fill of each configuration's bars: A, then B (`--vs`).
pub const BAR_COLOURS: [RGBColor; 2] = [RGBColor(0x3b, 0x6e, 0xa8), RGBColor(0xd9, 0x82, 0x2b)];
/// Bars of impossible tasks (solved = not passed) are grey, so nobody reads them as skill.
pub const IMPOSSIBLE_COLOURS: [RGBColor; 2] =
    [RGBColor(0x80, 0x80, 0x80), RGBColor(0xbb, 0xbb, 0xbb)];

/// One row of a horizontal bar chart: one bar per configuration (None: no bar).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The name at the left of the row (a task's).
    pub label: String,
    /// One value per configuration, in the configurations' order.
    pub values: Vec<Option<f64>>,
    /// The task is marked impossible: its bars are grey.
    pub impossible: bool,
}

/// A bar chart: rows top to bottom, values on the x axis from 0 to `x_max`; `empty` says, per
/// configuration, why it has no bar to show (None: it has one).
pub struct BarChart<'a> {
    /// Above the chart.
    pub title: &'a str,
    /// The x axis's caption: what the values are (`solved / runs`).
    pub x_label: &'a str,
    /// Top to bottom.
    pub rows: Vec<Row>,
    /// The right end of the x axis.
    pub x_max: f64,
    /// The values are counts: the x axis has whole-number ticks.
    pub counts: bool,
    /// Per configuration: why it has no bar (None: it has one).
    pub empty: Vec<Option<String>>,
}

/// One configuration of the page: its records and the result files they came from.
pub struct Configuration<'a> {
    /// Its runs.
    pub records: &'a [RunRecord],
    /// The results files the runs were read from, as named on the command line.
    pub files: Vec<String>,
}

impl Configuration<'_> {
    /// Its models, in name order.
    fn models(&self) -> String {
        let set: BTreeSet<&str> = self.records.iter().map(|r| r.model.as_str()).collect();
        match set.is_empty() {
            true => "no runs".into(),
            false => set.into_iter().collect::<Vec<_>>().join(", "),
        }
    }

    /// Its models and, where known, its result files.
    fn name(&self) -> String {
        match self.files.is_empty() {
            true => self.models(),
            false => format!("{} ({})", self.models(), self.files.join(", ")),
        }
    }
}

/// The whole page; `vs` is the other configuration of `--vs`, `made` when the page was made.
pub fn page(
    a: &Configuration<'_>,
    vs: Option<&Configuration<'_>>,
    made: SystemTime,
) -> Result<String, EvalError> {
    let configs: Vec<&Configuration> = std::iter::once(a).chain(vs).collect();
    let groups: Vec<&[RunRecord]> = configs.iter().map(|c| c.records).collect();
    let mut body = header(&configs, made);
    for (config, letter) in configs.iter().zip(letters(configs.len())) {
        let title = match letter {
            "" => "Results".to_string(),
            _ => format!("Results of {letter}: {}", config.name()),
        };
        let _ = write!(
            body,
            "<h2>{}</h2>\n{}",
            escape(&title),
            results_table(config.records)
        );
    }
    if let Some(other) = vs {
        let _ = write!(
            body,
            "<h2>A vs B</h2>\n{}",
            versus_table(a.records, other.records)
        );
    }
    body.push_str(&legend(&configs));
    for chart in [
        pass_rate_chart(&groups),
        cost_chart(&groups),
        turns_chart(&groups),
    ] {
        let _ = write!(
            body,
            "<h2>{}</h2>\n{}",
            escape(chart.title),
            chart_html(&chart)?
        );
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>agent-git eval report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>agent-git eval report</h1>\n{body}</body>\n</html>\n"
    ))
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:70em}\
table{border-collapse:collapse;margin:.5em 0}\
th,td{padding:.25em .6em;border-bottom:1px solid #ddd;white-space:nowrap}\
th{background:#f0f0f0;text-align:left}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\
tfoot td{font-weight:bold;border-top:2px solid #888}\
tr.impossible td{color:#666;background:#f7f7f7}\
.tag{font-size:.8em;border:1px solid #999;border-radius:3px;padding:0 .3em;margin-left:.4em}\
.note{color:#555;font-size:.9em;max-width:60em}\
.empty{border:1px dashed #aaa;padding:1.5em;color:#555;max-width:50em}\
.meta{color:#444}\
.key span{display:inline-block;width:1em;height:1em;margin:0 .3em 0 1em;vertical-align:middle}";

/// The letters of the configurations: none for one, A and B for two.
fn letters(count: usize) -> Vec<&'static str> {
    match count {
        1 => vec![""],
        _ => vec!["A", "B"],
    }
}

/// The agent-git version, when the page was made (UTC) and the models.
fn header(configs: &[&Configuration], made: SystemTime) -> String {
    let when = humantime::format_rfc3339_seconds(made).to_string();
    let when = when.replacen('T', " ", 1).replace('Z', " UTC");
    let models: Vec<String> = configs
        .iter()
        .zip(letters(configs.len()))
        .map(|(c, letter)| match letter {
            "" => c.models(),
            _ => format!("{letter}: {}", c.models()),
        })
        .collect();
    format!(
        "<p class=\"meta\">agent-git {} &middot; made {} &middot; model: {}</p>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&when),
        escape(&models.join("; "))
    )
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A `<tr>` of a name cell and right-aligned number cells.
fn tr(class: &str, name: &str, numbers: &[String]) -> String {
    let mut out = match class {
        "" => "<tr>".to_string(),
        _ => format!("<tr class=\"{class}\">"),
    };
    let _ = write!(out, "<td>{name}</td>");
    for n in numbers {
        let _ = write!(out, "<td class=\"n\">{}</td>", escape(n));
    }
    out.push_str("</tr>\n");
    out
}

/// `solved/tried rate` of one attempt alone, for best-of-N records.
fn alone(best: Option<BestOf>) -> String {
    best.map_or("-".into(), |b| {
        format!("{}/{} {:.2}", b.alone, b.tried, b.one_alone())
    })
}

/// The table of one configuration: a row per task, the totals row, and the text's notes.
pub fn results_table(records: &[RunRecord]) -> String {
    let best = BestOf::of(records);
    let mut head: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    if let Some(b) = best {
        head[3] = format!("rate (best of {})", b.n);
        head.insert(4, "pass@1 (one attempt)".into());
    }
    let mut out = String::from("<table>\n<thead><tr>");
    for (i, h) in head.iter().enumerate() {
        let class = if i == 0 { "" } else { " class=\"n\"" };
        let _ = write!(out, "<th{class}>{}</th>", escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let row = |runs: &[&RunRecord], name: String, class: &str| {
        let s = Summary::of(runs);
        let mut numbers = cells(&s);
        if class == "total" {
            // pass@n and pass^n are of one task's runs
            numbers[3] = String::new();
            numbers[4] = String::new();
        }
        if best.is_some() {
            numbers.insert(3, alone(BestOf::of(runs.iter().copied())));
        }
        tr(class, &name, &numbers)
    };
    for (name, runs) in by_task(records) {
        let s = Summary::of(&runs);
        let (class, name) = match s.impossible {
            true => (
                "impossible",
                format!("{}<span class=\"tag\">impossible</span>", escape(name)),
            ),
            false => ("", escape(name)),
        };
        out.push_str(&row(&runs, name, class));
    }
    let all: Vec<&RunRecord> = records.iter().collect();
    let tasks = by_task(records).len();
    let tasks = match tasks {
        1 => "total: 1 task".to_string(),
        n => format!("total: {n} tasks"),
    };
    let total = row(&all, tasks, "total");
    let _ = write!(
        out,
        "</tbody>\n<tfoot>\n{total}</tfoot>\n</table>\n<p class=\"note\">{}</p>\n",
        escape(totals(records).trim_end()).replace('\n', "<br>\n")
    );
    out
}

/// The `--vs` table: per task A's and B's solved runs, B - A and whether it is beyond noise.
pub fn versus_table(a: &[RunRecord], b: &[RunRecord]) -> String {
    let mut out = String::from(
        "<table>\n<thead><tr><th>task</th><th class=\"n\">A solved</th>\
         <th class=\"n\">B solved</th><th class=\"n\">B - A</th>\
         <th class=\"n\">beyond noise</th></tr></thead>\n<tbody>\n",
    );
    let rows = versus(a, b);
    let numbers = |r: &Versus| {
        vec![
            Versus::cell(r.a),
            Versus::cell(r.b),
            format!("{:+.2}", r.difference()),
            if r.beyond_noise() { "yes" } else { "no" }.to_string(),
        ]
    };
    if let Some((total, tasks)) = rows.split_last() {
        for r in tasks {
            out.push_str(&tr("", &escape(r.task), &numbers(r)));
        }
        let _ = write!(
            out,
            "</tbody>\n<tfoot>\n{}</tfoot>\n",
            tr("", "total", &numbers(total))
        );
    }
    let _ = writeln!(
        out,
        "</table>\n<p class=\"note\">{}</p>",
        escape(VERSUS_NOTE)
    );
    out
}

fn legend(configs: &[&Configuration]) -> String {
    let swatch = |c: RGBColor| format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2);
    let mut out = String::from("<p class=\"key\">");
    let letters = letters(configs.len());
    let names = configs
        .iter()
        .zip(letters)
        .zip(BAR_COLOURS.iter().zip(IMPOSSIBLE_COLOURS));
    for ((config, letter), (colour, grey)) in names {
        let (name, short) = match letter {
            "" => (config.name(), String::new()),
            _ => (
                format!("{letter}: {}", config.name()),
                format!("{letter}, "),
            ),
        };
        let _ = write!(
            out,
            "<span style=\"background:{}\"></span>{} \
             <span style=\"background:{}\"></span>{}impossible task (solved = not passed)",
            swatch(*colour),
            escape(&name),
            swatch(grey),
            short
        );
    }
    out.push_str("</p>\n");
    out
}

/// The chart's SVG, and under it why a configuration has no bar; when none has one, only
/// why, in place of an empty box.
fn chart_html(chart: &BarChart<'_>) -> Result<String, EvalError> {
    let letters = letters(chart.empty.len());
    let why: Vec<String> = chart
        .empty
        .iter()
        .zip(letters)
        .filter_map(|(why, letter)| {
            let why = why.as_ref()?;
            Some(match letter {
                "" => why.clone(),
                _ => format!("{letter}: {why}"),
            })
        })
        .collect();
    let why = escape(&why.join("; "));
    if chart.empty.iter().all(Option::is_some) {
        return Ok(format!("<p class=\"empty\">No chart: {why}.</p>\n"));
    }
    let mut out = svg(chart)?;
    out.push('\n');
    if !why.is_empty() {
        let _ = writeln!(out, "<p class=\"note\">No bars for {why}.</p>");
    }
    Ok(out)
}

/// Why a configuration has no bar in a chart of its solved runs or of its runs.
fn nothing_solved(records: &[RunRecord]) -> Option<String> {
    match (records.is_empty(), records.iter().any(|r| r.solved)) {
        (true, _) => Some("no runs".into()),
        (false, false) => Some("nothing solved".into()),
        _ => None,
    }
}

/// Why a configuration has no bar of cost per solved run.
fn no_cost(records: &[RunRecord]) -> Option<String> {
    let costs: Vec<f64> = records.iter().filter_map(|r| r.cost_usd).collect();
    nothing_solved(records).or_else(|| match costs.iter().sum::<f64>() {
        _ if costs.is_empty() => Some("no cost: no run recorded what it cost".into()),
        total if total <= 0.0 => Some("no cost: every run cost $0 (a scripted model)".into()),
        _ => None,
    })
}

/// Task names of every group, in name order, each with its summary per group.
fn task_rows(groups: &[&[RunRecord]], value: impl Fn(&Summary) -> Option<f64>) -> Vec<Row> {
    let per_group: Vec<_> = groups.iter().map(|g| by_task(g)).collect();
    let names: BTreeSet<&str> = per_group.iter().flat_map(|t| t.keys().copied()).collect();
    names
        .into_iter()
        .map(|name| {
            let summaries: Vec<Option<Summary>> = per_group
                .iter()
                .map(|t| t.get(name).map(|runs| Summary::of(runs)))
                .collect();
            let impossible = summaries.iter().flatten().any(|s| s.impossible);
            Row {
                label: label(name, impossible),
                values: summaries
                    .iter()
                    .map(|s| s.as_ref().and_then(&value))
                    .collect(),
                impossible,
            }
        })
        .collect()
}

/// Solved runs over runs per task: the table's `rate` column.
pub fn pass_rate_chart(groups: &[&[RunRecord]]) -> BarChart<'static> {
    BarChart {
        title: "Pass rate per task",
        x_label: "solved / runs",
        rows: task_rows(groups, |s| Some(s.rate())),
        x_max: 1.0,
        counts: false,
        empty: groups.iter().map(|g| nothing_solved(g)).collect(),
    }
}

/// The table's `$/solved` column; a task nothing solved has no bar.
pub fn cost_chart(groups: &[&[RunRecord]]) -> BarChart<'static> {
    let rows = task_rows(groups, Summary::cost_per_solved);
    BarChart {
        title: "Cost per solved task (USD)",
        x_label: "total cost / solved runs",
        x_max: axis_max(&rows),
        counts: false,
        rows,
        empty: groups.iter().map(|g| no_cost(g)).collect(),
    }
}

/// How many runs took how many turns, in at most 20 bins.
pub fn turns_chart(groups: &[&[RunRecord]]) -> BarChart<'static> {
    let max = groups
        .iter()
        .flat_map(|g| g.iter().map(|r| r.turns))
        .max()
        .unwrap_or(0);
    let width = (max + 1).div_ceil(20).max(1);
    let rows: Vec<Row> = (0..=max / width)
        .map(|bin| {
            let (lo, hi) = (bin * width, bin * width + width - 1);
            let count =
                |g: &&[RunRecord]| g.iter().filter(|r| (lo..=hi).contains(&r.turns)).count() as f64;
            Row {
                label: if lo == hi {
                    format!("{lo}")
                } else {
                    format!("{lo}-{hi}")
                },
                values: groups.iter().map(|g| Some(count(g))).collect(),
                impossible: false,
            }
        })
        .collect();
    BarChart {
        title: "Turns per run",
        x_label: "runs",
        x_max: axis_max(&rows),
        counts: true,
        rows,
        empty: groups
            .iter()
            .map(|g| g.is_empty().then(|| "no runs".to_string()))
            .collect(),
    }
}

/// A little above the largest value, so the longest bar does not touch the edge.
fn axis_max(rows: &[Row]) -> f64 {
    let top = rows
        .iter()
        .flat_map(|r| r.values.iter().flatten())
        .fold(0.0, |a: f64, v| a.max(*v));
    if top > 0.0 {
        top * 1.1
    } else {
        1.0
    }
}

fn plot_error(e: impl std::fmt::Display) -> EvalError {
    EvalError::Results(format!("cannot draw the chart: {e}"))
}

/// The chart as one `<svg>` element: one `<rect>` per bar, one `<text>` per row label.
pub fn svg(chart: &BarChart<'_>) -> Result<String, EvalError> {
    let groups = chart.rows.first().map_or(1, |r| r.values.len().max(1));
    let rows = chart.rows.len().max(1);
    let height = 70 + rows * (groups * 16 + 8);
    let label_width = chart
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(4);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (820, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut area = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size((label_width * 7 + 10).min(360) as u32)
            .build_cartesian_2d(0.0..chart.x_max, RowAxis(rows))
            .map_err(plot_error)?;
        let label = |y: &f64| {
            let row = chart.rows.len().checked_sub(1 + y.round() as usize);
            row.and_then(|i| chart.rows.get(i))
                .map_or(String::new(), |r| r.label.clone())
        };
        let whole = |x: &f64| format!("{x:.0}");
        let mut mesh = area.configure_mesh();
        mesh.disable_y_mesh()
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", 13))
            .x_desc(chart.x_label)
            .y_label_formatter(&label);
        if chart.counts {
            let ticks = (chart.x_max.floor() as usize + 1).min(10);
            mesh.x_labels(ticks).x_label_formatter(&whole);
        }
        mesh.draw().map_err(plot_error)?;
        area.draw_series(bars(chart, groups)).map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(out)
}

/// The y axis of a bar chart: one tick per row at 0, 1, ..., so each row gets its label.
struct RowAxis(usize);

impl Ranged for RowAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        plotters::coord::types::RangedCoordf64::from(self.range()).map(value, limit)
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        (0..self.0).map(|i| i as f64).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        -0.5..self.0 as f64 - 0.5
    }
}

/// The bars of every row, the first row on top; a row's configurations share its height.
fn bars(chart: &BarChart<'_>, groups: usize) -> Vec<Rectangle<(f64, f64)>> {
    let last = chart.rows.len().saturating_sub(1) as f64;
    let thickness = 0.8 / groups as f64;
    let mut out = Vec::new();
    for (i, row) in chart.rows.iter().enumerate() {
        let top = last - i as f64 + 0.4;
        for (g, value) in row.values.iter().enumerate() {
            let Some(value) = value else { continue };
            let colour = if row.impossible {
                IMPOSSIBLE_COLOURS[g % 2]
            } else {
                BAR_COLOURS[g % 2]
            };
            let y0 = top - g as f64 * thickness;
            let corners = [(0.0, y0), (*value, y0 - thickness * 0.9)];
            out.push(Rectangle::new(corners, colour.filled()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::results::Tokens;

    fn record(task: &str, run: u32, model: &str, solved: bool, turns: u64) -> RunRecord {
        RunRecord {
            task: task.into(),
            run,
            model: model.into(),
            outcome: if solved { "passed" } else { "turn-limit" }.into(),
            passed: solved,
            impossible: task.starts_with("impossible"),
            solved,
            tests: serde_json::Value::Null,
            vanished: Vec::new(),
            turns,
            tokens: Tokens::default(),
            cost_usd: Some(0.25),
            wall_secs: 1.0,
            harness_secs: None,
            kept: None,
            required_tests: None,
            attempts: None,
        }
    }

    fn suite(model: &str) -> Vec<RunRecord> {
        vec![
            record("off-by-one", 0, model, true, 3),
            record("off-by-one", 1, model, false, 7),
            record("impossible-edit-tests", 0, model, true, 2),
            record("<script>alert(1)</script>", 0, model, false, 4),
        ]
    }

    /// Each `<svg>` of the page, parsed; the page must have `count` of them.
    fn svgs(page: &str) -> Vec<String> {
        page.split("<svg")
            .skip(1)
            .map(|rest| {
                let end = rest
                    .find("</svg>")
                    .map_or(rest.len(), |i| i + "</svg>".len());
                format!("<svg{}", &rest[..end])
            })
            .collect()
    }

    fn bar_count(svg: &str) -> usize {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}:\n{svg}"));
        doc.descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") != Some("#FFFFFF"))
            .count()
    }

    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect()
    }

    /// 2009-02-13 23:31:30 UTC.
    const MADE: u64 = 1_234_567_890;

    /// The page of `a` (from a.jsonl) and `b` (from b.jsonl), made at MADE.
    fn page_of(a: &[RunRecord], b: Option<&[RunRecord]>) -> String {
        let config = |records, file: &str| Configuration {
            records,
            files: vec![file.to_string()],
        };
        let b = b.map(|b| config(b, "b.jsonl"));
        let made = std::time::UNIX_EPOCH + std::time::Duration::from_secs(MADE);
        page(&config(a, "a.jsonl"), b.as_ref(), made).unwrap()
    }

    /// The text of each `<tr>` of the page's `<table>`s, its cells joined by `|`.
    fn table_rows(page: &str) -> Vec<String> {
        let tag = regex::Regex::new(r"<[^>]+>").unwrap();
        page.split("<tr")
            .skip(1)
            .map(|rest| {
                let row = &rest[..rest.find("</tr>").unwrap()];
                let cells: Vec<String> = row
                    .split("<t")
                    .skip(1)
                    .map(|cell| tag.replace_all(&format!("<t{cell}"), "").to_string())
                    .collect();
                cells.join("|")
            })
            .collect()
    }

    #[test]
    fn the_page_has_three_valid_charts_with_a_bar_and_a_label_per_row() {
        let page = page_of(&suite("m"), None);
        let charts = svgs(&page);
        assert_eq!(charts.len(), 3);
        // three tasks, each solved by something (so a cost bar each), turns 2..=7
        assert_eq!(bar_count(&charts[0]), 3);
        assert_eq!(
            bar_count(&charts[1]),
            2,
            "a task nothing solved has no cost bar"
        );
        assert_eq!(bar_count(&charts[2]), 8, "one bar per turns bin 0..=7");
        let labels = texts(&charts[0]);
        for name in [
            "off-by-one",
            "impossible-edit-tests (i)",
            "<script>alert(1)</script>",
        ] {
            assert!(labels.iter().any(|l| l == name), "{name} in {labels:?}");
        }
    }

    #[test]
    fn with_vs_each_row_has_a_bar_per_configuration() {
        let (a, b) = (suite("a"), suite("b"));
        let page = page_of(&a, Some(&b));
        let charts = svgs(&page);
        assert_eq!(bar_count(&charts[0]), 6);
        assert_eq!(bar_count(&charts[2]), 16);
        assert!(page.contains("model: A: a; B: b"));
        assert!(page.contains("A: a (a.jsonl)") && page.contains("B: b (b.jsonl)"));
        let rows = table_rows(&page);
        assert!(
            rows.contains(&"off-by-one|1/2 0.50|1/2 0.50|+0.00|no".to_string()),
            "the --vs table: {rows:?}"
        );
        assert!(rows.contains(&"total|2/4 0.50|2/4 0.50|+0.00|no".to_string()));
    }

    #[test]
    fn the_header_names_the_version_the_date_and_the_model() {
        let page = page_of(&suite("claude"), None);
        let meta = format!(
            "<p class=\"meta\">agent-git {} &middot; made 2009-02-13 23:31:30 UTC &middot; \
             model: claude</p>",
            env!("CARGO_PKG_VERSION")
        );
        assert!(page.contains(&meta), "{page}");
        assert!(
            page.contains("</span>claude (a.jsonl) <span"),
            "one configuration, no letter"
        );
        assert!(!page.contains("B: "));
    }

    #[test]
    fn the_table_has_a_row_per_task_and_the_totals_with_numbers_right_aligned() {
        let page = page_of(&suite("m"), None);
        let rows = table_rows(&page);
        let want = [
            "task|runs|solved|rate|pass@n|pass^n|turns|cost|$/solved|wall s|harness s",
            "&lt;script&gt;alert(1)&lt;/script&gt;|1|0|0.00|0.00|0.00|4.0|$0.2500|-|1.0|-",
            "impossible-edit-testsimpossible|1|1|1.00|1.00|1.00|2.0|$0.2500|$0.2500|1.0|-",
            "off-by-one|2|1|0.50|1.00|0.00|5.0|$0.2500|$0.5000|1.0|-",
            "total: 3 tasks|4|2|0.50|||3.5|$0.2500|$0.5000|1.0|-",
        ];
        assert_eq!(rows, want);
        assert!(page.contains("<tr class=\"impossible\"><td>impossible-edit-tests<span"));
        assert!(page.contains("<td class=\"n\">$0.5000</td>"));
        assert!(page.contains("td.n,th.n{text-align:right"));
        assert!(
            page.contains("95% Wilson interval"),
            "the totals line under the table"
        );
    }

    #[test]
    fn best_of_n_shows_one_attempt_alone_beside_the_rate() {
        let mut records = suite("m");
        for r in &mut records {
            r.attempts = Some(crate::eval::results::Attempts {
                n: 3,
                solved: u32::from(r.solved),
                chosen: Some(1),
            });
        }
        let rows = table_rows(&page_of(&records, None));
        assert!(rows[0].starts_with("task|runs|solved|rate (best of 3)|pass@1 (one attempt)|"));
        assert!(
            rows[3].starts_with("off-by-one|2|1|0.50|1/6 0.17|"),
            "{rows:?}"
        );
        assert!(rows[4].starts_with("total: 3 tasks|4|2|0.50|2/12 0.17|"));
    }

    #[test]
    fn charts_without_bars_say_why() {
        let mut free = suite("scripted");
        free.iter_mut().for_each(|r| r.cost_usd = Some(0.0));
        let page = page_of(&free, None);
        assert_eq!(svgs(&page).len(), 2, "no cost chart: {page}");
        assert!(page.contains("No chart: no cost: every run cost $0 (a scripted model)."));

        let mut unsolved = suite("a");
        unsolved.iter_mut().for_each(|r| r.solved = false);
        let page = page_of(&suite("b"), Some(&unsolved));
        assert_eq!(svgs(&page).len(), 3);
        assert!(page.contains("No bars for B: nothing solved."));

        let page = page_of(&unsolved, Some(&[][..]));
        assert_eq!(svgs(&page).len(), 1, "turns of A only");
        assert!(page.contains("No chart: A: nothing solved; B: no runs."));
        assert!(page.contains("No bars for B: no runs."));
    }

    #[test]
    fn the_page_shows_the_text_table_and_nothing_from_elsewhere() {
        let records = suite("<b>m</b>");
        let page = page_of(&records, None);
        assert!(!page.contains("<script") && !page.contains("<b>m"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        let outside = page.replace("http://www.w3.org/2000/svg", "");
        assert!(!outside.contains("http://") && !outside.contains("https://"));
    }

    #[test]
    fn cost_per_solved_is_the_summary_s() {
        let records = suite("m");
        let rows = cost_chart(&[&records]).rows;
        let runs = by_task(&records);
        for row in rows {
            let name = row.label.trim_end_matches(" (i)");
            assert_eq!(row.values, vec![Summary::of(&runs[name]).cost_per_solved()]);
        }
    }

    #[test]
    fn pass_rate_rows_side_by_side_with_impossible_tasks_marked() {
        let (a, b) = (suite("a"), suite("b")[..2].to_vec());
        let row = |label: &str, values: Vec<Option<f64>>, impossible| Row {
            label: label.into(),
            values,
            impossible,
        };
        assert_eq!(
            pass_rate_chart(&[&a, &b]).rows,
            vec![
                row("<script>alert(1)</script>", vec![Some(0.0), None], false),
                row("impossible-edit-tests (i)", vec![Some(1.0), None], true),
                row("off-by-one", vec![Some(0.5), Some(0.5)], false),
            ]
        );
        let chart = svg(&pass_rate_chart(&[&a])).unwrap();
        assert_eq!(
            chart.matches("fill=\"#808080\"").count(),
            1,
            "the impossible bar is grey"
        );
    }

    #[test]
    fn escaping() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
