//! Durations as Kubernetes configuration writes them (`metav1.Duration`, the format
//! of Go's `time.ParseDuration`): a sequence of decimal numbers with units, such as
//! `15s`, `1m30s`, `1.5h` or `250ms`.

use std::time::Duration;

/// Parses `text`; the error says what was wrong.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(format!("{text:?} is negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("{text:?}: expected a number at {rest:?}"));
        }
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?}: {:?} is not a number", &rest[..digits]))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "{text:?}: a unit is missing (ns, us, ms, s, m or h)"
                ));
            }
            u => {
                return Err(format!(
                    "{text:?}: unknown unit {u:?} (ns, us, ms, s, m or h)"
                ));
            }
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("{text:?} is out of range"))
}

/// Renders as Go does for whole hours, minutes and seconds (`1h0m0s`, `15s`,
/// `1.5s`), for printing effective configurations.
pub fn format(d: Duration) -> String {
    let secs = d.as_secs();
    let frac = d.subsec_nanos();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let seconds = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{:09}", frac);
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// Deserializes an optional duration string with [`parse`].
pub fn deserialize_opt<'de, D>(de: D) -> Result<Option<Duration>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    match Option::<String>::deserialize(de)? {
        None => Ok(None),
        Some(s) => parse(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("2s500ms"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert!(parse("15").unwrap_err().contains("unit is missing"));
        assert!(parse("15d").unwrap_err().contains("unknown unit \"d\""));
        assert!(parse("-1s").unwrap_err().contains("negative"));
        assert!(parse("").is_err());
        assert!(parse("s").is_err());
    }

    #[test]
    fn formats_as_go() {
        assert_eq!(format(Duration::from_secs(15)), "15s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
    }
}
