//! `eval report --html`: one self-contained page (inline CSS, inline SVG, no scripts) with the
//! text tables and three charts, all from the same summaries as the text table.

use super::report::{by_task, compare, table, Summary};
use super::results::RunRecord;
use super::EvalError;
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::fmt::Write;

/// The fill of each configuration's bars: A, then B (`--vs`).
pub const BAR_COLOURS: [RGBColor; 2] = [RGBColor(0x3b, 0x6e, 0xa8), RGBColor(0xd9, 0x82, 0x2b)];
/// Bars of impossible tasks (solved = not passed) are grey, so nobody reads them as skill.
pub const IMPOSSIBLE_COLOURS: [RGBColor; 2] =
    [RGBColor(0x80, 0x80, 0x80), RGBColor(0xbb, 0xbb, 0xbb)];

/// One row of a horizontal bar chart: one bar per configuration (None: no bar).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub values: Vec<Option<f64>>,
    pub impossible: bool,
}

/// A bar chart: rows top to bottom, values on the x axis from 0 to `x_max`.
pub struct BarChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub rows: Vec<Row>,
    pub x_max: f64,
}

/// The whole page; `vs` is the other configuration of `--vs`.
pub fn page(records: &[RunRecord], vs: Option<&[RunRecord]>) -> Result<String, EvalError> {
    let groups: Vec<&[RunRecord]> = std::iter::once(records).chain(vs).collect();
    let mut body = String::new();
    let _ = write!(
        body,
        "<h2>Results</h2>\n<pre>{}</pre>\n",
        escape(&table(records))
    );
    if let Some(other) = vs {
        let _ = write!(
            body,
            "<h2>Results of --vs (B)</h2>\n<pre>{}</pre>\n<h2>A vs B</h2>\n<pre>{}</pre>\n",
            escape(&table(other)),
            escape(&compare(records, other))
        );
    }
    body.push_str(&legend(groups.len()));
    for chart in [
        pass_rate_chart(&groups),
        cost_chart(&groups),
        turns_chart(&groups),
    ] {
        let _ = write!(body, "<h2>{}</h2>\n{}\n", escape(chart.title), svg(&chart)?);
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>agent-git eval report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>agent-git eval report</h1>\n<p>Models: {}</p>\n{body}</body>\n</html>\n",
        escape(&models(&groups))
    ))
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}\
pre{background:#f6f6f6;padding:1em;overflow-x:auto}\
.key span{display:inline-block;width:1em;height:1em;margin:0 .3em 0 1em;vertical-align:middle}";

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

fn models(groups: &[&[RunRecord]]) -> String {
    let names = |g: &[RunRecord]| {
        let set: BTreeSet<&str> = g.iter().map(|r| r.model.as_str()).collect();
        set.into_iter().collect::<Vec<_>>().join(", ")
    };
    match groups {
        [a, b] => format!("A = {}; B = {}", names(a), names(b)),
        _ => groups
            .iter()
            .map(|g| names(g))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn legend(groups: usize) -> String {
    let swatch = |c: RGBColor| format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2);
    let mut out = String::from("<p class=\"key\">");
    let names = ["A", "B"]
        .iter()
        .zip(BAR_COLOURS.iter().zip(IMPOSSIBLE_COLOURS));
    for (name, (colour, grey)) in names.take(groups) {
        let _ = write!(
            out,
            "<span style=\"background:{}\"></span>{name} \
             <span style=\"background:{}\"></span>{name}, impossible task (solved = not passed)",
            swatch(*colour),
            swatch(grey)
        );
    }
    out.push_str("</p>\n");
    out
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
                label: if impossible {
                    format!("{name} (i)")
                } else {
                    name.to_string()
                },
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
    }
}

/// The table's `$/solved` column; a task nothing solved has no bar.
pub fn cost_chart(groups: &[&[RunRecord]]) -> BarChart<'static> {
    let rows = task_rows(groups, Summary::cost_per_solved);
    BarChart {
        title: "Cost per solved task (USD)",
        x_label: "total cost / solved runs",
        x_max: axis_max(&rows),
        rows,
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
        rows,
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
        area.configure_mesh()
            .disable_y_mesh()
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", 13))
            .x_desc(chart.x_label)
            .y_label_formatter(&label)
            .draw()
            .map_err(plot_error)?;
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

    #[test]
    fn the_page_has_three_valid_charts_with_a_bar_and_a_label_per_row() {
        let page = page(&suite("m"), None).unwrap();
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
        let page = page(&a, Some(&b)).unwrap();
        let charts = svgs(&page);
        assert_eq!(bar_count(&charts[0]), 6);
        assert_eq!(bar_count(&charts[2]), 16);
        assert!(page.contains("A = a; B = b"));
        assert!(
            page.contains(&escape(&compare(&a, &b))),
            "the --vs table as the text shows it"
        );
    }

    #[test]
    fn the_page_shows_the_text_table_and_nothing_from_elsewhere() {
        let records = suite("<b>m</b>");
        let page = page(&records, None).unwrap();
        assert!(page.contains(&escape(&table(&records))));
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
