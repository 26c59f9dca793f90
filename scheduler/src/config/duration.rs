//! Durations as Kubernetes configuration writes them (`metav1.Duration`, the format
//! of Go's `time.ParseDuration`): a sequence of decimal numbers with units, such as
//! `15s`, `1m30s`, `1.5h` or `250ms`.

use std::time::Duration;

/// Why a duration was refused; each names the text it was given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing but blanks.
    #[error("empty duration")]
    Empty,
    /// A leading `-`.
    #[error("{0:?} is negative")]
    Negative(String),
    /// A unit or the end where a number should be.
    #[error("{text:?}: expected a number at {at:?}")]
    NumberExpected {
        /// The whole text.
        text: String,
        /// What follows where the number should be.
        at: String,
    },
    /// Digits and dots that are not a number (`1.2.3`).
    #[error("{text:?}: {number:?} is not a number")]
    BadNumber {
        /// The whole text.
        text: String,
        /// The digits and dots.
        number: String,
    },
    /// A number with no unit after it.
    #[error("{0:?}: a unit is missing (ns, us, ms, s, m or h)")]
    MissingUnit(String),
    /// A unit other than ns, us (µs), ms, s, m and h.
    #[error("{text:?}: unknown unit {unit:?} (ns, us, ms, s, m or h)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit given.
        unit: String,
    },
    /// Too long for a `Duration`.
    #[error("{0:?} is out of range")]
    OutOfRange(String),
}

/// Parses `text`; the error says what was wrong.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative(text.to_owned()));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(DurationError::NumberExpected {
                text: text.to_owned(),
                at: rest.to_owned(),
            });
        }
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::BadNumber {
                text: text.to_owned(),
                number: rest[..digits].to_owned(),
            })?;
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
            "" => return Err(DurationError::MissingUnit(text.to_owned())),
            u => {
                return Err(DurationError::UnknownUnit {
                    text: text.to_owned(),
                    unit: u.to_owned(),
                });
            }
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).map_err(|_| DurationError::OutOfRange(text.to_owned()))
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
        assert_eq!(
            parse("15").unwrap_err().to_string(),
            "\"15\": a unit is missing (ns, us, ms, s, m or h)"
        );
        assert_eq!(
            parse("15d").unwrap_err().to_string(),
            "\"15d\": unknown unit \"d\" (ns, us, ms, s, m or h)"
        );
        assert_eq!(parse("-1s"), Err(DurationError::Negative("-1s".into())));
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert_eq!(
            parse("s").unwrap_err().to_string(),
            "\"s\": expected a number at \"s\""
        );
        assert!(matches!(
            parse("1.2.3s"),
            Err(DurationError::BadNumber { .. })
        ));
    }

    #[test]
    fn formats_as_go() {
        assert_eq!(format(Duration::from_secs(15)), "15s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
    }
}
