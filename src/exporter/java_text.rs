//! Numbers as Java writes and reads them: jmx_exporter's rules match the
//! text `Double.toString` gives (`1.0`, `1.0E7`, `0.20000000298023224`
//! for a `float` 0.2), and the exposition formats print sample values the
//! same way; a rule's `value:` is read with `Double.valueOf`.

/// `Double.toString(d)`: the shortest digits that read back as `d`, as
/// `1234.5` for 10⁻³ ≤ |d| < 10⁷ and `1.2345E7` otherwise, always with a
/// digit after the point.
pub fn double_to_string(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.5e7".
    layout(&format!("{d:e}"))
}

/// `Float.toString(f)`, the same for the shortest digits of an `f32`.
pub fn float_to_string(f: f32) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    layout(&format!("{f:e}"))
}

/// Java's layout of scientific digits `[-]d[.ddd]e[-]x`.
fn layout(scientific: &str) -> String {
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::from(sign);
    if (-3..7).contains(&exponent) {
        // Plain notation: the point after exponent + 1 digits.
        if exponent < 0 {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let point = exponent as usize + 1;
            if digits.len() > point {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            } else {
                out.push_str(&digits);
                for _ in digits.len()..point {
                    out.push('0');
                }
                out.push_str(".0");
            }
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        if digits.len() > 1 {
            out.push_str(&digits[1..]);
        } else {
            out.push('0');
        }
        out.push('E');
        out.push_str(&exponent.to_string());
    }
    out
}

/// `Double.valueOf(s)`: surrounding white space (anything up to U+0020)
/// ignored, an optional `d`/`f` type suffix, `NaN` and `Infinity` with a
/// sign; `None` where Java throws `NumberFormatException`.
pub fn parse_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (sign, body) = match t.strip_prefix('-') {
        Some(b) => (-1.0, b),
        None => (1.0, t.strip_prefix('+').unwrap_or(t)),
    };
    match body {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let body = body.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(body);
    // Java takes `1.`, `.5`, `1e5`; not `inf`, `nan`, `1_000`, hex here.
    let numeric = !body.is_empty()
        && body.chars().any(|c| c.is_ascii_digit())
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if !numeric {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java_prints_them() {
        for (d, java) in [
            (1.0, "1.0"),
            (200.0, "200.0"),
            (0.2, "0.2"),
            (1.0e7, "1.0E7"),
            (9999999.0, "9999999.0"),
            (1.5e7, "1.5E7"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1.573285945111e9, "1.573285945111E9"),
            (9007199254740993.0, "9.007199254740992E15"),
            (-2.5, "-2.5"),
            (123456.789, "123456.789"),
            (0.0, "0.0"),
            (f64::from(0.2f32), "0.20000000298023224"),
            (1.0e21, "1.0E21"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(double_to_string(d), java, "{d}");
        }
        assert_eq!(float_to_string(0.2), "0.2");
        assert_eq!(float_to_string(1.0e10), "1.0E10");
    }

    #[test]
    fn values_read_as_java_reads_them() {
        assert_eq!(parse_double(" 42 "), Some(42.0));
        assert_eq!(parse_double("1.5d"), Some(1.5));
        assert_eq!(parse_double("-1e3"), Some(-1000.0));
        assert_eq!(parse_double(".5"), Some(0.5));
        assert!(parse_double("NaN").unwrap().is_nan());
        assert_eq!(parse_double("-Infinity"), Some(f64::NEG_INFINITY));
        for bad in ["", "abc", "RUNNING", "inf", "1,5", "0x10", "1_000", "."] {
            assert_eq!(parse_double(bad), None, "{bad:?}");
        }
    }
}
