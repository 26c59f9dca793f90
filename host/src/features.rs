//! `--feature-gates`: kube-scheduler's flag, for the gates Berth has. A gate Berth
//! does not know is refused by name (rather than ignored), so a typo does not leave a
//! feature on that the operator meant to turn off.

use crate::framework::FrameworkOptions;

/// The gates Berth knows, each with its default.
pub const GATES: &[(&str, bool, &str)] = &[(
    "OpportunisticBatching",
    true,
    "reuse a cycle's ranked nodes for the next pod with the same signature",
)];

/// Applies a `--feature-gates` value (`Name=true,Other=false`) to the framework's
/// options. An error names the entry and what was wrong with it.
pub fn apply(list: &str, options: &mut FrameworkOptions) -> Result<(), String> {
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("--feature-gates: {entry:?} is not NAME=true or NAME=false"))?;
        let (name, value) = (name.trim(), value.trim());
        let on = match value.to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(format!(
                    "--feature-gates: {name}={value:?}: the value must be true or false"
                ));
            }
        };
        match name {
            "OpportunisticBatching" => options.batching = on,
            _ => {
                let known: Vec<&str> = GATES.iter().map(|(n, _, _)| *n).collect();
                return Err(format!(
                    "--feature-gates: unknown feature gate {name:?} (Berth knows {})",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batching_is_on_by_default_and_the_flag_turns_it_off() {
        let mut o = FrameworkOptions::default();
        assert!(o.batching);
        apply("OpportunisticBatching=false", &mut o).unwrap();
        assert!(!o.batching);
        apply(" OpportunisticBatching = True ", &mut o).unwrap();
        assert!(o.batching);
    }

    #[test]
    fn bad_entries_are_refused_by_name() {
        let mut o = FrameworkOptions::default();
        let e = apply("OpportunisticBatchin=false", &mut o).unwrap_err();
        assert!(
            e.contains("unknown feature gate \"OpportunisticBatchin\""),
            "{e}"
        );
        assert!(e.contains("OpportunisticBatching"), "{e}");
        let e = apply("OpportunisticBatching=no", &mut o).unwrap_err();
        assert!(e.contains("must be true or false"), "{e}");
        let e = apply("OpportunisticBatching", &mut o).unwrap_err();
        assert!(e.contains("is not NAME=true"), "{e}");
        assert!(
            o.batching,
            "a refused list changes nothing it did not get to"
        );
    }
}
