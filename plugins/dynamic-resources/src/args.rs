//! The plugin's args, as upstream's `DynamicResourcesArgs`.

use serde::Deserialize;

/// How long PreBind waits for the devices' binding conditions when the args give no
/// `bindingTimeout` (upstream's `DynamicResourcesBindingTimeoutDefault`).
pub const DEFAULT_BINDING_TIMEOUT_MS: u64 = 600_000;

/// The validated args.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// `bindingTimeout`: how long PreBind waits for the binding conditions of the
    /// allocated devices, in milliseconds.
    pub binding_timeout_ms: u64,
    /// `filterTimeout`: accepted and validated; Berth bounds every plugin call with
    /// its own deadline instead.
    pub filter_timeout_ms: u64,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            binding_timeout_ms: DEFAULT_BINDING_TIMEOUT_MS,
            filter_timeout_ms: 0,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    #[allow(dead_code)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    binding_timeout: Option<String>,
    #[serde(default)]
    filter_timeout: Option<String>,
}

impl Args {
    /// Parses, defaults and validates the args (`Null` means none); errors name the
    /// field, as upstream's `ValidateDynamicResourcesArgs` does: `filterTimeout` must
    /// not be negative, `bindingTimeout` must be positive.
    pub fn from_json(args: berth_sdk::serde_json::Value) -> Result<Args, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "DynamicResourcesArgs")?;
        let mut errs = Vec::new();
        let mut out = Args::default();
        if let Some(text) = &raw.filter_timeout {
            match parse_duration_ms(text) {
                Ok(ms) if ms < 0 => errs.push(berth_sdk::validation::invalid(
                    "filterTimeout",
                    text,
                    "must be zero or positive",
                )),
                Ok(ms) => out.filter_timeout_ms = ms as u64,
                Err(e) => errs.push(berth_sdk::validation::invalid("filterTimeout", text, &e)),
            }
        }
        if let Some(text) = &raw.binding_timeout {
            match parse_duration_ms(text) {
                Ok(ms) if ms <= 0 => errs.push(berth_sdk::validation::invalid(
                    "bindingTimeout",
                    text,
                    "must be positive",
                )),
                Ok(ms) => out.binding_timeout_ms = ms as u64,
                Err(e) => errs.push(berth_sdk::validation::invalid("bindingTimeout", text, &e)),
            }
        }
        match berth_sdk::validation::aggregate(errs) {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// A duration as Go writes it (`metav1.Duration`: `600s`, `10m`, `1h30m`, `1.5s`,
/// `250ms`, `-1s`), in milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err("not a duration".to_owned());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit in duration {text:?}"))?;
        if number_len == 0 {
            return Err(format!("invalid duration {text:?}"));
        }
        let value: f64 = rest[..number_len]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let ms_per_unit = match &rest[..unit_len] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            unit => return Err(format!("unknown unit {unit:?} in duration {text:?}")),
        };
        total += value * ms_per_unit;
        rest = &rest[unit_len..];
    }
    let ms = total.round() as i64;
    Ok(if negative { -ms } else { ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::serde_json::json;

    #[test]
    fn durations_parse_as_go_writes_them() {
        assert_eq!(parse_duration_ms("600s"), Ok(600_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("-1s"), Ok(-1000));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert!(parse_duration_ms("10").is_err());
        assert!(parse_duration_ms("10d").is_err());
        assert!(parse_duration_ms("").is_err());
    }

    #[test]
    fn args_default_and_validate() {
        assert_eq!(
            Args::from_json(berth_sdk::serde_json::Value::Null),
            Ok(Args::default())
        );
        assert_eq!(
            Args::from_json(json!({"bindingTimeout": "5m", "filterTimeout": "10s"})),
            Ok(Args {
                binding_timeout_ms: 300_000,
                filter_timeout_ms: 10_000
            })
        );
        assert_eq!(
            Args::from_json(json!({"bindingTimeout": "0s", "filterTimeout": "-1s"})).unwrap_err(),
            "[filterTimeout: Invalid value: \"-1s\": must be zero or positive, bindingTimeout: Invalid value: \"0s\": must be positive]"
        );
        assert!(
            Args::from_json(json!({"bogus": 1}))
                .unwrap_err()
                .contains("bogus")
        );
    }
}
