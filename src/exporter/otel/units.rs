//! `sourceUnit` to `unit`, the conversions OpenTelemetry's JMX rules
//! know (`UnitConverter`): durations to seconds and percentages to
//! fractions. Any other pair is refused when the file is read, not when
//! a value comes (upstream reports it as values are processed).

/// One known conversion: what a source value is divided by (divided, so
/// 25 ms is exactly the double nearest 0.025 s, as upstream's tests say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conversion {
    divisor: f64,
}

const KNOWN: &[(&str, &str, f64)] = &[
    ("ms", "s", 1e3),
    ("us", "s", 1e6),
    ("ns", "s", 1e9),
    ("%", "1", 1e2),
];

impl Conversion {
    /// The conversion from `source` to `target`: none when either is
    /// unset or empty (nothing to convert), an error for a pair with no
    /// known conversion, in upstream's words.
    pub fn between(
        source: Option<&str>,
        target: Option<&str>,
    ) -> Result<Option<Conversion>, String> {
        let (Some(source), Some(target)) = (source, target) else {
            return Ok(None);
        };
        if source.is_empty() || target.is_empty() {
            return Ok(None);
        }
        KNOWN
            .iter()
            .find(|(s, t, _)| *s == source && *t == target)
            .map(|&(_, _, divisor)| Some(Conversion { divisor }))
            .ok_or_else(|| {
                let known: Vec<String> = KNOWN
                    .iter()
                    .map(|(s, t, _)| format!("{s} to {t}"))
                    .collect();
                format!(
                    "Unsupported conversion from [{source}] to [{target}] (known: {})",
                    known.join(", ")
                )
            })
    }

    /// The value in the target unit.
    pub fn apply(self, value: f64) -> f64 {
        value / self.divisor
    }
}
