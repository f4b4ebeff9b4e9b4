//! An attribute's value for people: a number with its human reading
//! where the attribute's name says what it counts (bytes of memory,
//! milliseconds, nanoseconds of CPU, a start time, a CPU load), a
//! composite value as a table of its items, a table of rows (Jolokia's
//! tabular data, a list of composites) as a table with a column per key.
//! The number itself is always shown as the agent sent it. Bounded: so
//! many cells at most, then "…". Pure.

use maud::{html, Markup};
use serde_json::Value;

/// Cells one value may draw, nested tables and all.
const MAX_CELLS: usize = 2000;
/// Deepest nesting drawn as tables; deeper is shown as JSON text.
const MAX_DEPTH: usize = 4;
/// Characters of one scalar shown.
const MAX_CHARS: usize = 2000;

/// What a number counts, read off its name (and its parent's, for a
/// composite's items: `HeapMemoryUsage`'s `used`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Millis,
    Nanos,
    /// Milliseconds since 1970.
    Since1970,
    /// A fraction of one (a CPU load); negative is "not available".
    Ratio,
}

pub fn unit_of(name: &str, parent: Option<&str>) -> Option<Unit> {
    let lower = name.to_ascii_lowercase();
    let parent = parent.map(str::to_ascii_lowercase).unwrap_or_default();
    let memory = |s: &str| s.contains("memory") || s.contains("bytes") || s.contains("swapspace");
    if lower.ends_with("starttime") {
        Some(Unit::Since1970)
    } else if lower.ends_with("cputime") {
        Some(Unit::Nanos)
    } else if lower.ends_with("cpuload") {
        Some(Unit::Ratio)
    } else if lower.ends_with("uptime") || lower.ends_with("time") && !lower.contains("count") {
        Some(Unit::Millis)
    } else if memory(&lower) || memory(&parent) {
        Some(Unit::Bytes)
    } else {
        None
    }
}

/// `n` in `unit` as people read it; `None` when it says nothing more
/// than the number (small, negative, or not a number of that unit).
pub fn human(n: f64, unit: Unit) -> Option<String> {
    match unit {
        Unit::Bytes if n >= 1024.0 => {
            let mut v = n;
            let mut i = 0;
            const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
            while v >= 1024.0 && i < UNITS.len() - 1 {
                v /= 1024.0;
                i += 1;
            }
            Some(format!("{v:.1} {}", UNITS[i]))
        }
        Unit::Millis if n >= 1000.0 => Some(duration(n / 1000.0)),
        Unit::Nanos if n >= 1e9 => Some(duration(n / 1e9)),
        Unit::Nanos if n >= 1e6 => Some(format!("{:.1} ms", n / 1e6)),
        Unit::Ratio if (0.0..=1.0).contains(&n) => Some(format!("{:.1} %", n * 100.0)),
        Unit::Since1970 if n > 1e12 => {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(n as u64);
            Some(humantime::format_rfc3339_seconds(at).to_string())
        }
        _ => None,
    }
}

/// Seconds as the two largest units that say it: `3 d 4 h`, `2 min 5 s`,
/// `4.2 s`.
fn duration(seconds: f64) -> String {
    let whole = seconds as u64;
    let (d, h, m, s) = (
        whole / 86_400,
        whole / 3600 % 24,
        whole / 60 % 60,
        whole % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{seconds:.1} s"),
        (0, 0, _) => format!("{m} min {s} s"),
        (0, _, _) => format!("{h} h {m} min"),
        _ => format!("{d} d {h} h"),
    }
}

/// The cell of attribute `name`'s value.
pub fn cell(name: &str, v: &Value) -> Markup {
    let mut budget = MAX_CELLS;
    drawn(name, None, v, 0, &mut budget)
}

fn drawn(name: &str, parent: Option<&str>, v: &Value, depth: usize, budget: &mut usize) -> Markup {
    if *budget == 0 {
        return html! { "…" };
    }
    *budget -= 1;
    match v {
        Value::Object(items) if depth < MAX_DEPTH && !items.is_empty() => html! {
            table.composite {
                @for (key, item) in items {
                    @if *budget > 0 {
                        tr { th { (key) } td { (drawn(key, Some(name), item, depth + 1, budget)) } }
                    }
                }
            }
            @if *budget == 0 { "…" }
        },
        Value::Array(rows)
            if depth < MAX_DEPTH && rows.iter().all(Value::is_object) && !rows.is_empty() =>
        {
            let mut columns: Vec<&String> = Vec::new();
            for row in rows {
                for key in row.as_object().into_iter().flat_map(|o| o.keys()) {
                    if !columns.contains(&key) && columns.len() < 32 {
                        columns.push(key);
                    }
                }
            }
            html! {
                table.tabular {
                    thead { tr { @for c in &columns { th { (c) } } } }
                    tbody {
                        @for row in rows {
                            @if *budget > 0 {
                                tr { @for c in &columns {
                                    td { (drawn(c, Some(name), &row[c.as_str()], depth + 1, budget)) }
                                } }
                            }
                        }
                    }
                }
                @if *budget == 0 { "…" }
            }
        }
        Value::Number(n) => {
            let reading = n
                .as_f64()
                .zip(unit_of(name, parent))
                .and_then(|(n, u)| human(n, u));
            html! {
                (n.to_string())
                @if let Some(reading) = reading { " " small.unit { "(" (reading) ")" } }
            }
        }
        scalar => html! { (text(scalar)) },
    }
}

/// A scalar (or a value nested too deep) as text, cut.
fn text(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if text.chars().count() > MAX_CHARS {
        let cut: String = text.chars().take(MAX_CHARS).collect();
        format!("{cut}… (cut)")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_read_in_the_units_their_names_say() {
        let read = |name: &str, parent: Option<&str>, n: f64| {
            unit_of(name, parent).and_then(|u| human(n, u))
        };
        assert_eq!(
            read("used", Some("HeapMemoryUsage"), 268_435_456.0).as_deref(),
            Some("256.0 MiB")
        );
        assert_eq!(
            read("TotalPhysicalMemorySize", None, 1536.0).as_deref(),
            Some("1.5 KiB")
        );
        assert_eq!(
            read("used", Some("HeapMemoryUsage"), 100.0),
            None,
            "small: the number says it"
        );
        assert_eq!(
            read("Uptime", None, 93_784_000.0).as_deref(),
            Some("1 d 2 h")
        );
        assert_eq!(
            read("CollectionTime", None, 4200.0).as_deref(),
            Some("4.2 s")
        );
        assert_eq!(
            read("ProcessCpuTime", None, 125e9).as_deref(),
            Some("2 min 5 s")
        );
        assert_eq!(
            read("ProcessCpuLoad", None, 0.125).as_deref(),
            Some("12.5 %")
        );
        assert_eq!(read("ProcessCpuLoad", None, -1.0), None, "not available");
        assert_eq!(
            read("StartTime", None, 1_764_806_400_000.0).as_deref(),
            Some("2025-12-04T00:00:00Z")
        );
        assert_eq!(read("ThreadCount", None, 5000.0), None);
        assert_eq!(read("CollectionCount", None, 5000.0), None);
    }

    #[test]
    fn composites_and_rows_are_tables_and_stay_text() {
        let memory = cell(
            "HeapMemoryUsage",
            &json!({"init": 0, "used": 268435456, "max": -1}),
        )
        .into_string();
        assert!(
            memory.starts_with("<table class=\"composite\">"),
            "{memory}"
        );
        assert!(
            memory.contains(
                "<th>used</th><td>268435456 <small class=\"unit\">(256.0 MiB)</small></td>"
            ),
            "{memory}"
        );
        assert!(memory.contains("<th>max</th><td>-1</td>"), "{memory}");
        let rows = cell(
            "Pools",
            &json!([{"name": "<b>a</b>", "size": 1}, {"name": "b", "extra": true}]),
        )
        .into_string();
        assert!(
            rows.contains("<thead><tr><th>name</th><th>size</th><th>extra</th></tr></thead>"),
            "{rows}"
        );
        assert!(rows.contains("&lt;b&gt;a&lt;/b&gt;"), "{rows}");
        assert_eq!(cell("Verbose", &json!(false)).into_string(), "false");
        assert_eq!(cell("Name", &json!("<i>")).into_string(), "&lt;i&gt;");
        // Deep or wide values are bounded.
        let mut deep = json!(1);
        for _ in 0..10 {
            deep = json!({ "k": deep });
        }
        assert!(cell("Deep", &deep)
            .into_string()
            .contains("{&quot;k&quot;:1}"));
        let wide: Vec<Value> = (0..5000).map(|i| json!({"i": i})).collect();
        let drawn = cell("Wide", &Value::Array(wide)).into_string();
        assert!(drawn.ends_with('…'), "bounded");
        assert!(drawn.matches("<tr>").count() <= MAX_CELLS);
    }
}
