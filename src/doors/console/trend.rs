//! A small trend per target of heap in use, live threads and the JVM's
//! CPU load over the last minutes, drawn as SVG lines (no script). Its
//! points are the values the target's page reads each time it is shown,
//! as the person who opens it (audited like the page's other reads; the
//! page without an MBean chosen asks for itself again every few seconds,
//! so a page left open draws the line). A person is shown only the lines
//! their own policy lets them read on that target. Bounded: so many
//! targets, so many points each, none older than the window. The
//! samples' keeping and the drawing are pure.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maud::{html, Markup};
use serde_json::Value;

/// How far back a trend reaches.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Points kept per target (a page asking every 15 s fills 15 minutes).
const MAX_POINTS: usize = 60;
/// Targets with a trend at once; the least recently shown go first.
const MAX_TARGETS: u64 = 10_000;

/// What the page reads for a trend: (MBean, attribute, path).
pub const READS: [(&str, &str, Option<&str>); 3] = [
    ("java.lang:type=Memory", "HeapMemoryUsage", Some("used")),
    ("java.lang:type=Threading", "ThreadCount", None),
    ("java.lang:type=OperatingSystem", "ProcessCpuLoad", None),
];

/// One reading of a target: seconds since 1970, and each value (`None`
/// where it was not read: denied, missing, not a number).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub at: u64,
    pub values: [Option<f64>; 3],
}

impl Point {
    /// From the answers to [`READS`], in order.
    pub fn of(at: u64, answers: &[Value]) -> Point {
        let mut values = [None; 3];
        for (v, answer) in values.iter_mut().zip(answers) {
            if answer["status"] == 200 {
                // A CPU load the JVM can't tell is negative.
                *v = answer["value"].as_f64().filter(|n| *n >= 0.0);
            }
        }
        Point { at, values }
    }
}

/// The trends of the targets people looked at, in the console's room.
#[derive(Clone)]
pub struct Trends(moka::sync::Cache<String, Arc<Mutex<VecDeque<Point>>>>);

impl Default for Trends {
    fn default() -> Self {
        Trends(
            moka::sync::Cache::builder()
                .max_capacity(MAX_TARGETS)
                .time_to_idle(WINDOW)
                .build(),
        )
    }
}

impl Trends {
    /// Adds `point` to `target`'s trend, dropping what is past the window
    /// or the bound; returns the trend.
    pub fn add(&self, target: &str, point: Point) -> Vec<Point> {
        let line = self
            .0
            .get_with(target.to_string(), || Arc::new(Mutex::new(VecDeque::new())));
        let mut line = line.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        keep(&mut line, point);
        line.iter().copied().collect()
    }
}

impl Trends {
    /// `target`'s trend as it is.
    pub fn of(&self, target: &str) -> Vec<Point> {
        self.0.get(target).map_or_else(Vec::new, |line| {
            let line = line.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            line.iter().copied().collect()
        })
    }
}

fn keep(line: &mut VecDeque<Point>, point: Point) {
    let oldest = point.at.saturating_sub(WINDOW.as_secs());
    // Two pages in the same second are one point.
    if line.back().is_some_and(|p| p.at == point.at) {
        line.pop_back();
    }
    line.push_back(point);
    while line.front().is_some_and(|p| p.at < oldest) || line.len() > MAX_POINTS {
        line.pop_front();
    }
}

/// The trend's lines, for the series the viewer may read (`shown[i]`).
pub fn render(points: &[Point], shown: [bool; 3]) -> Markup {
    let names = ["heap used", "threads", "CPU"];
    let last = |i: usize| points.iter().rev().find_map(|p| p.values[i]);
    let reading = |i: usize, n: f64| match i {
        0 => {
            super::values::human(n, super::values::Unit::Bytes).unwrap_or_else(|| format!("{n} B"))
        }
        1 => format!("{n}"),
        _ => format!("{:.1} %", n * 100.0),
    };
    let since = points.first().map(|p| p.at);
    html! {
        @if shown.iter().any(|s| *s) && !points.is_empty() {
            p.trend {
                @for i in 0..3 {
                    @if shown[i] {
                        span.series {
                            (names[i]) " "
                            (line(points, i))
                            " " (last(i).map(|n| reading(i, n)).unwrap_or_else(|| "-".into()))
                        }
                        " "
                    }
                }
                small {
                    (points.len()) " point(s) over the last "
                    (since.zip(points.last().map(|p| p.at))
                        .map(|(a, b)| format!("{} min", (b - a).div_ceil(60).max(1)))
                        .unwrap_or_default())
                    ", read each time this page is shown"
                }
            }
        }
    }
}

/// One series as an SVG line, scaled to its own range.
fn line(points: &[Point], i: usize) -> Markup {
    const W: f64 = 120.0;
    const H: f64 = 24.0;
    let series: Vec<(u64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.at, p.values[i]?)))
        .collect();
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return html! {};
    };
    let span = (last.0 - first.0).max(1) as f64;
    let (lo, hi) = series
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (_, v)| {
            (lo.min(*v), hi.max(*v))
        });
    let range = if hi > lo { hi - lo } else { 1.0 };
    let coords: Vec<String> = series
        .iter()
        .map(|(at, v)| {
            let x = if series.len() == 1 {
                W
            } else {
                (at - first.0) as f64 / span * W
            };
            let y = H - 2.0 - (v - lo) / range * (H - 4.0);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    html! {
        svg.trend width=(W) height=(H) viewBox={ "0 0 " (W) " " (H) } role="img" {
            polyline points=(coords.join(" ")) {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(at: u64, heap: f64) -> Point {
        Point {
            at,
            values: [Some(heap), Some(10.0), None],
        }
    }

    #[test]
    fn a_trend_keeps_its_window_and_bound() {
        let mut line = VecDeque::new();
        for t in 0..100 {
            keep(&mut line, at(1_000 + t * 15, t as f64));
        }
        assert!(line.len() <= MAX_POINTS);
        let newest = line.back().unwrap().at;
        assert!(line.iter().all(|p| p.at >= newest - WINDOW.as_secs()));
        keep(&mut line, at(newest, 1.0));
        assert_eq!(
            line.back().unwrap().values[0],
            Some(1.0),
            "the same second is one point"
        );
        assert_eq!(line.iter().filter(|p| p.at == newest).count(), 1);
    }

    #[test]
    fn answers_make_a_point_and_denials_none() {
        let p = Point::of(
            5,
            &[
                json!({"status": 200, "value": 1048576}),
                json!({"status": 403, "error": "Reading attribute ThreadCount is forbidden"}),
                json!({"status": 200, "value": -1.0}),
            ],
        );
        assert_eq!(p.values, [Some(1048576.0), None, None]);
    }

    #[test]
    fn only_the_lines_the_viewer_may_read_are_drawn() {
        let points = [at(0, 1048576.0), at(60, 2097152.0)];
        let all = render(&points, [true, true, false]).into_string();
        assert!(all.contains("heap used <svg class=\"trend\""), "{all}");
        assert!(all.contains("2.0 MiB"), "{all}");
        assert!(
            all.contains("threads <svg") && !all.contains("CPU"),
            "{all}"
        );
        assert!(
            all.contains("<polyline points=\"0.0,22.0 120.0,2.0\">"),
            "{all}"
        );
        let heap_hidden = render(&points, [false, true, false]).into_string();
        assert!(
            !heap_hidden.contains("heap") && !heap_hidden.contains("MiB"),
            "{heap_hidden}"
        );
        assert_eq!(render(&points, [false; 3]).into_string(), "");
    }
}
