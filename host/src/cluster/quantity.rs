//! Kubernetes resource quantities (`resource.Quantity`), parsed as the API server
//! parses them and read as kube-scheduler reads them.
//!
//! The syntax is Kubernetes' own, quirks included: the scanner of `ParseQuantity`
//! accepts a sign, a number with an optional fraction (`1.`, `.5`), and one suffix:
//! decimal SI (`n u m k M G T P E`), binary SI (`Ki Mi Gi Ti Pi Ei`) or a decimal
//! exponent (`e3`, `E-2`). Like Kubernetes it also accepts a number without digits as
//! zero (`"."`, `"m"`, `"Mi"`), and rejects the same strings with the same three
//! messages. Values are computed exactly (no floating point) and rounded away from
//! zero, as `Quantity.Value` and `Quantity.MilliValue` do.
//!
//! One deliberate difference: where Go silently caps or wraps a result that does not
//! fit in an `int64`, these functions return [`QuantityError::Overflow`].

use std::collections::BTreeMap;

use berth_sdk::ResourceList;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Why a quantity could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text does not have the shape of a quantity (Go's `ErrFormatWrong`).
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The suffix is neither SI, binary SI nor an exponent (Go's `ErrSuffix`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The number has no digits where Kubernetes needs some (Go's `ErrNumeric`).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The value, at the scale asked for, does not fit in a signed 64-bit integer.
    #[error("quantity is too large: it does not fit in a signed 64-bit integer")]
    Overflow,
    /// A resource quantity is negative, which the API server rejects.
    #[error("must be greater than or equal to 0")]
    Negative,
}

/// A bad quantity in a resource list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{resource}: {error}")]
pub struct ResourceError {
    /// The resource name (the key of the list).
    pub resource: String,
    /// What is wrong with its quantity.
    pub error: QuantityError,
}

/// The quantity in thousandths, rounded away from zero (`Quantity.MilliValue`):
/// `"100m"` is 100, `"1.5"` is 1500, `"1Ki"` is 1024000.
pub fn milli_value(q: &str) -> Result<i64, QuantityError> {
    parse(q)?.scaled(3)
}

/// The quantity as an integer, rounded away from zero (`Quantity.Value`):
/// `"100m"` is 1, `"1Gi"` is 1073741824, `"1e3"` is 1000.
pub fn value(q: &str) -> Result<i64, QuantityError> {
    parse(q)?.scaled(0)
}

/// Converts a resource map as kube-scheduler's `framework.Resource` reads it: `cpu`
/// in millicores, every other resource (memory, storage, pods, hugepages, extended
/// resources) as its value rounded up.
///
/// Like the API server's JSON decoding, surrounding whitespace is ignored; like its
/// validation, negative quantities are rejected.
pub fn resource_list(
    quantities: &BTreeMap<String, Quantity>,
) -> Result<ResourceList, ResourceError> {
    quantities
        .iter()
        .map(|(name, q)| {
            let text = q.0.trim();
            let parsed = if name == berth_sdk::CPU {
                milli_value(text)
            } else {
                value(text)
            };
            match parsed {
                Ok(v) if v < 0 => Err(QuantityError::Negative),
                other => other,
            }
            .map(|v| (name.clone(), v))
            .map_err(|error| ResourceError {
                resource: name.clone(),
                error,
            })
        })
        .collect()
}

/// A parsed quantity: `±digits × 10^exp10 × 2^exp2`, exactly.
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    /// Decimal digits (integer and fraction joined), possibly with leading zeros;
    /// empty means zero.
    digits: String,
    exp10: i64,
    exp2: u32,
}

/// What a suffix multiplies by.
enum Suffix {
    /// Decimal SI or a decimal exponent: times 10^n.
    Decimal(i32),
    /// Binary SI: times 2^n.
    Binary(u32),
}

/// Interprets a suffix as Go's `suffixHandler.interpret`.
fn suffix(s: &str) -> Result<Suffix, QuantityError> {
    let decimal = match s {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        "Ki" => return Ok(Suffix::Binary(10)),
        "Mi" => return Ok(Suffix::Binary(20)),
        "Gi" => return Ok(Suffix::Binary(30)),
        "Ti" => return Ok(Suffix::Binary(40)),
        "Pi" => return Ok(Suffix::Binary(50)),
        "Ei" => return Ok(Suffix::Binary(60)),
        _ if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            // Go parses an int64 and truncates it to int32; do the same.
            let n: i64 = s[1..].parse().map_err(|_| QuantityError::Suffix)?;
            n as i32
        }
        _ => return Err(QuantityError::Suffix),
    };
    Ok(Suffix::Decimal(decimal))
}

/// Parses as Go's `ParseQuantity` (and its scanner `parseQuantityString`).
fn parse(s: &str) -> Result<Parsed, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut negative = false;
    match b[0] {
        b'-' => {
            negative = true;
            pos = 1;
        }
        b'+' => pos = 1,
        _ => {}
    }
    let number_start = pos;
    let zero = || Parsed {
        negative,
        digits: String::new(),
        exp10: 0,
        exp2: 0,
    };
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos == end {
        // Only a sign and zeros (or just a sign): Go returns zero right here.
        return Ok(zero());
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = &s[num_start..pos];
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
    }
    let has_digit = b[number_start..pos].iter().any(u8::is_ascii_digit);
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    let suffix = suffix(&s[suffix_start..])?;

    // Go takes a fast int64 path when the digits are few, and otherwise re-parses the
    // number part with inf.Dec, which fails when it has no digit at all ("Ei", "e-10").
    // Go counts an all-zero numerator as "0".
    let num_len = num.len().max(1) as i64;
    let denom_len = denom.len() as i64;
    let slow = match suffix {
        Suffix::Decimal(e) => 18 - (num_len + denom_len) < 0 || i64::from(e) - denom_len < -9,
        Suffix::Binary(e) => !denom.is_empty() || 15 - num_len - i64::from(e) * 3 / 10 - 1 < 0,
    };
    if slow && !has_digit {
        return Err(QuantityError::Numeric);
    }

    let (exp10, exp2) = match suffix {
        Suffix::Decimal(e) => (i64::from(e) - denom_len, 0),
        Suffix::Binary(e) => (-denom_len, e),
    };
    Ok(Parsed {
        negative,
        digits: format!("{num}{denom}"),
        exp10,
        exp2,
    })
}

impl Parsed {
    /// The value times 10^scale, rounded away from zero.
    fn scaled(&self, scale: i64) -> Result<i64, QuantityError> {
        let digits = self.digits.trim_start_matches('0');
        let significant = digits.trim_end_matches('0');
        if significant.is_empty() {
            return Ok(0);
        }
        let len = significant.len() as i64;
        // value = significant × 10^k × 2^exp2
        let k = self.exp10 + scale + (digits.len() - significant.len()) as i64;
        // With `len` digits the value is at least 10^(len-1+k) > i64::MAX once that
        // exponent reaches 19; this also bounds the integer part to 19 digits.
        if len + k > 19 {
            return Err(QuantityError::Overflow);
        }
        let multiplier = 1u128 << self.exp2;
        let (integer, fraction, pad) = if k >= 0 {
            let mut i: u128 = significant.parse().map_err(|_| QuantityError::Overflow)?;
            i *= 10u128.pow(k as u32);
            (i, "", 0)
        } else if len + k > 0 {
            let split = (len + k) as usize;
            let i: u128 = significant[..split]
                .parse()
                .map_err(|_| QuantityError::Overflow)?;
            (i, &significant[split..], 0)
        } else {
            // 0.000ddd: `pad` zeros between the point and the digits.
            (0, significant, (-(len + k)) as u64)
        };
        // fraction × multiplier, digit by digit from the right: the carry left after
        // the last fractional position is the integer part of the product, and any
        // non-zero digit produced on the way means it is inexact.
        let mut carry: u128 = 0;
        let mut inexact = false;
        for d in fraction.bytes().rev() {
            let t = u128::from(d - b'0') * multiplier + carry;
            inexact |= !t.is_multiple_of(10);
            carry = t / 10;
        }
        let mut pad = pad;
        while carry > 0 && pad > 0 {
            inexact |= !carry.is_multiple_of(10);
            carry /= 10;
            pad -= 1;
        }
        let magnitude = integer * multiplier + carry + u128::from(inexact);
        let magnitude = i64::try_from(magnitude).map_err(|_| QuantityError::Overflow)?;
        Ok(if self.negative { -magnitude } else { magnitude })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(q: &str) -> (Result<i64, QuantityError>, Result<i64, QuantityError>) {
        (milli_value(q), value(q))
    }

    #[test]
    fn decimal_si_suffixes() {
        assert_eq!(both("1"), (Ok(1000), Ok(1)));
        assert_eq!(both("0"), (Ok(0), Ok(0)));
        assert_eq!(both("100m"), (Ok(100), Ok(1)));
        assert_eq!(both("1500m"), (Ok(1500), Ok(2)));
        assert_eq!(both("1k"), (Ok(1_000_000), Ok(1000)));
        assert_eq!(both("2M"), (Ok(2_000_000_000), Ok(2_000_000)));
        assert_eq!(value("3G"), Ok(3_000_000_000));
        assert_eq!(value("4T"), Ok(4_000_000_000_000));
        assert_eq!(value("5P"), Ok(5_000_000_000_000_000));
        assert_eq!(value("6E"), Ok(6_000_000_000_000_000_000));
        assert_eq!(both("1n"), (Ok(1), Ok(1)));
        assert_eq!(both("1u"), (Ok(1), Ok(1)));
        assert_eq!(both("1000000u"), (Ok(1000), Ok(1)));
        assert_eq!(both("250000000n"), (Ok(250), Ok(1)));
    }

    #[test]
    fn binary_si_suffixes() {
        assert_eq!(both("1Ki"), (Ok(1_024_000), Ok(1024)));
        assert_eq!(value("1Mi"), Ok(1 << 20));
        assert_eq!(value("128Mi"), Ok(128 << 20));
        assert_eq!(value("1Gi"), Ok(1 << 30));
        assert_eq!(value("2Ti"), Ok(2 << 40));
        assert_eq!(value("3Pi"), Ok(3 << 50));
        assert_eq!(value("7Ei"), Ok(7 << 60));
        assert_eq!(value("1.5Gi"), Ok(1_610_612_736));
        assert_eq!(value("0.5Ki"), Ok(512));
        // 1.1 × 1024 = 1126.4 rounds up.
        assert_eq!(value("1.1Ki"), Ok(1127));
        assert_eq!(milli_value("1.1Ki"), Ok(1_126_400));
        assert_eq!(value("0.001Ki"), Ok(2));
    }

    #[test]
    fn exponents() {
        assert_eq!(value("1e3"), Ok(1000));
        assert_eq!(value("1E6"), Ok(1_000_000));
        assert_eq!(value("1e+3"), Ok(1000));
        assert_eq!(both("1e-3"), (Ok(1), Ok(1)));
        assert_eq!(both("15e-1"), (Ok(1500), Ok(2)));
        assert_eq!(both("1.5e2"), (Ok(150_000), Ok(150)));
        // Smaller than a nano: rounded up, never to zero.
        assert_eq!(both("1e-10"), (Ok(1), Ok(1)));
        // Go truncates the exponent to 32 bits.
        assert_eq!(value("1e4294967296"), Ok(1));
        assert_eq!(both("1e2147483648"), (Ok(1), Ok(1)));
    }

    #[test]
    fn signs_and_fractions() {
        assert_eq!(both("+1"), (Ok(1000), Ok(1)));
        assert_eq!(both("-1"), (Ok(-1000), Ok(-1)));
        // Away from zero, as Quantity.Value.
        assert_eq!(both("-1.5"), (Ok(-1500), Ok(-2)));
        assert_eq!(both("-0.0001"), (Ok(-1), Ok(-1)));
        assert_eq!(both("0.5"), (Ok(500), Ok(1)));
        assert_eq!(both(".5"), (Ok(500), Ok(1)));
        assert_eq!(both("1."), (Ok(1000), Ok(1)));
        assert_eq!(value("1.G"), Ok(1_000_000_000));
        assert_eq!(both("0.1m"), (Ok(1), Ok(1)));
        assert_eq!(both("007"), (Ok(7000), Ok(7)));
        assert_eq!(both("-0"), (Ok(0), Ok(0)));
        assert_eq!(both("000"), (Ok(0), Ok(0)));
        assert_eq!(both("0.000"), (Ok(0), Ok(0)));
        assert_eq!(both("1.000"), (Ok(1000), Ok(1)));
        assert_eq!(
            value("1234567890123456789012345678901234567890e-30"),
            Ok(1_234_567_891)
        );
        assert_eq!(
            value("0.000000000000000000000000000000000000000000001"),
            Ok(1)
        );
        assert_eq!(
            value("0.0000000000000000000000000000000000000000000000Ki"),
            Ok(0)
        );
    }

    #[test]
    fn numbers_without_digits_are_zero_as_in_kubernetes() {
        for q in ["-", "+", ".", "-.", "m", "Mi", "Ki", "Ti", "k", "e3"] {
            assert_eq!(both(q), (Ok(0), Ok(0)), "{q}");
        }
        // ...except where Go takes its slow path and finds no digits.
        for q in ["Pi", "Ei", "-Ei", ".Ei", "e-10"] {
            assert_eq!(value(q), Err(QuantityError::Numeric), "{q}");
        }
        assert_eq!(value("0Ei"), Ok(0));
    }

    #[test]
    fn bad_formats() {
        for q in [
            "", "1x", "1.5.5", " 1", "1 ", "1e3e", "1Mi ", "abc", "1,5", "1_000", "１",
        ] {
            assert_eq!(value(q), Err(QuantityError::Format), "{q:?}");
        }
        for q in [
            "--1",
            "1kk",
            "1K",
            "1e",
            "1e+",
            "1Mi3",
            "1ee3",
            "1iM",
            "1mi",
            "1e99999999999999999999",
        ] {
            assert_eq!(value(q), Err(QuantityError::Suffix), "{q:?}");
        }
    }

    #[test]
    fn overflow() {
        assert_eq!(value("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(value("-9223372036854775807"), Ok(-i64::MAX));
        assert_eq!(value("9223372036854775808"), Err(QuantityError::Overflow));
        assert_eq!(
            milli_value("9223372036854775807"),
            Err(QuantityError::Overflow)
        );
        assert_eq!(milli_value("9223372036854775.807"), Ok(i64::MAX));
        assert_eq!(
            milli_value("9223372036854775.8071"),
            Err(QuantityError::Overflow)
        );
        assert_eq!(value("8Ei"), Err(QuantityError::Overflow));
        assert_eq!(milli_value("1E"), Err(QuantityError::Overflow));
        assert_eq!(value("1e19"), Err(QuantityError::Overflow));
        assert_eq!(value("1e999999999"), Err(QuantityError::Overflow));
        assert_eq!(value(&"9".repeat(10_000)), Err(QuantityError::Overflow));
        assert_eq!(
            value("12345678901234567890123456789"),
            Err(QuantityError::Overflow)
        );
    }

    #[test]
    fn error_messages_are_kubernetes_messages() {
        assert_eq!(
            QuantityError::Format.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
        assert_eq!(
            QuantityError::Numeric.to_string(),
            "unable to parse numeric part of quantity"
        );
    }

    #[test]
    fn resource_lists_use_millicores_for_cpu_only() {
        let map: BTreeMap<String, Quantity> = [
            ("cpu", "250m"),
            ("memory", "1.5Gi"),
            ("ephemeral-storage", " 10G "),
            ("pods", "110"),
            ("hugepages-2Mi", "100Mi"),
            ("example.com/gpu", "1"),
            ("example.com/fraction", "100m"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
        .collect();
        let list = resource_list(&map).unwrap();
        assert_eq!(list["cpu"], 250);
        assert_eq!(list["memory"], 1_610_612_736);
        assert_eq!(list["ephemeral-storage"], 10_000_000_000);
        assert_eq!(list["pods"], 110);
        assert_eq!(list["hugepages-2Mi"], 100 << 20);
        assert_eq!(list["example.com/gpu"], 1);
        assert_eq!(list["example.com/fraction"], 1);
    }

    #[test]
    fn resource_list_errors_name_the_resource() {
        let one = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), Quantity(v.to_owned()))]);
        let err = resource_list(&one("memory", "1x")).unwrap_err();
        assert_eq!(
            err,
            ResourceError {
                resource: "memory".into(),
                error: QuantityError::Format
            }
        );
        assert!(err.to_string().starts_with("memory: quantities must match"));
        let err = resource_list(&one("cpu", "-1")).unwrap_err();
        assert_eq!(err.to_string(), "cpu: must be greater than or equal to 0");
        let err = resource_list(&one("cpu", "9223372036854775807")).unwrap_err();
        assert_eq!(err.error, QuantityError::Overflow);
        assert_eq!(resource_list(&one("memory", "-0")).unwrap()["memory"], 0);
    }
}
