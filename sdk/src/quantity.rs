//! Kubernetes quantities (`resource.Quantity`): parsed as the API server parses them,
//! compared, added and written back as Kubernetes writes them.
//!
//! The syntax is Kubernetes' own, quirks included: the scanner of `ParseQuantity`
//! accepts a sign, a number with an optional fraction (`1.`, `.5`), and one suffix:
//! decimal SI (`n u m k M G T P E`), binary SI (`Ki Mi Gi Ti Pi Ei`) or a decimal
//! exponent (`e3`, `E-2`). Like Kubernetes it also accepts a number without digits as
//! zero (`"."`, `"m"`, `"Mi"`), and rejects the same strings with the same three
//! messages.
//!
//! A parsed quantity is exact: a count of nano-units in an `i128`, as Kubernetes keeps
//! every quantity at a precision of at most 10⁻⁹ (finer values round away from zero
//! to the next nano, as `ParseQuantity` does). [`milli_value`] and [`value`] round away
//! from zero, as `Quantity.MilliValue` and `Quantity.Value` do.
//!
//! Deliberate differences: where Go silently caps a binary-SI quantity at 2⁶³−1 or
//! wraps a result that does not fit in an `int64`, these functions return
//! [`QuantityError::Overflow`]; a quantity beyond ±1.7 × 10²⁹ (the range of nano-units
//! an `i128` holds) is an overflow too.
//!
//! ```
//! use berth_sdk::quantity::Quantity;
//! let gi = Quantity::from("1Gi");
//! assert_eq!(gi, Quantity::from("1073741824"));
//! assert!(Quantity::from("1500m") > Quantity::from("1"));
//! assert_eq!(gi.checked_add(&Quantity::from("1Gi")).unwrap().as_str(), "2Gi");
//! ```

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// Nano-units in one unit.
const NANOS: i128 = 1_000_000_000;

/// Why a quantity could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// The text does not have the shape of a quantity (Go's `ErrFormatWrong`).
    Format,
    /// The suffix is neither SI, binary SI nor an exponent (Go's `ErrSuffix`).
    Suffix,
    /// The number has no digits where Kubernetes needs some (Go's `ErrNumeric`).
    Numeric,
    /// The value, at the scale asked for, does not fit in the integer asked for.
    Overflow,
    /// A resource quantity is negative, which the API server rejects.
    Negative,
}

impl std::fmt::Display for QuantityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QuantityError::Format => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Suffix => "unable to parse quantity's suffix",
            QuantityError::Numeric => "unable to parse numeric part of quantity",
            QuantityError::Overflow => {
                "quantity is too large: it does not fit in a signed 64-bit integer"
            }
            QuantityError::Negative => "must be greater than or equal to 0",
        })
    }
}

impl std::error::Error for QuantityError {}

/// How a quantity is written, which Kubernetes keeps from the text it parsed and uses
/// again when it writes a computed quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `1500m`, `2k`, `3` (Go's `DecimalSI`).
    DecimalSi,
    /// `1Gi`, `512Ki` (Go's `BinarySI`).
    BinarySi,
    /// `1e3`, `15E-1` (Go's `DecimalExponent`).
    DecimalExponent,
}

/// A parsed quantity: an exact count of nano-units and the way it was written.
#[derive(Clone, Copy, Debug)]
pub struct Amount {
    /// The value times 10⁹.
    pub nanos: i128,
    /// How the value is written back.
    pub format: Format,
}

impl Amount {
    /// An integer value written as `format`.
    pub fn from_int(value: i64, format: Format) -> Amount {
        Amount {
            nanos: i128::from(value) * NANOS,
            format,
        }
    }

    /// The value in thousandths, rounded away from zero (`Quantity.MilliValue`).
    pub fn milli_value(&self) -> Result<i64, QuantityError> {
        i64::try_from(div_away(self.nanos, 1_000_000)).map_err(|_| QuantityError::Overflow)
    }

    /// The value as an integer, rounded away from zero (`Quantity.Value`).
    pub fn value(&self) -> Result<i64, QuantityError> {
        i64::try_from(div_away(self.nanos, NANOS)).map_err(|_| QuantityError::Overflow)
    }

    /// The value as an `i64` when it is a whole number that fits (`Quantity.AsInt64`).
    pub fn as_int64(&self) -> Option<i64> {
        if self.nanos % NANOS != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANOS).ok()
    }

    /// The value as the nearest `f64` (`Quantity.AsApproximateFloat64`).
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANOS as f64
    }

    /// -1, 0 or 1 as the value is negative, zero or positive.
    pub fn signum(&self) -> i64 {
        self.nanos.signum() as i64
    }

    /// The sum, written as `self` is; `None` on overflow.
    pub fn checked_add(&self, other: &Amount) -> Option<Amount> {
        Some(Amount {
            nanos: self.nanos.checked_add(other.nanos)?,
            format: self.format,
        })
    }

    /// The difference, written as `self` is; `None` on overflow.
    pub fn checked_sub(&self, other: &Amount) -> Option<Amount> {
        Some(Amount {
            nanos: self.nanos.checked_sub(other.nanos)?,
            format: self.format,
        })
    }

    /// The value as Kubernetes writes it (`Quantity.String` of a computed quantity):
    /// decimal SI with an exponent that is a multiple of three (`1500m`, `2k`), binary
    /// SI with the largest power of 1024 that divides it (`2Gi`; values below 1024 or
    /// with a fraction fall back to decimal SI), or a decimal exponent (`15e2`).
    pub fn to_quantity(&self) -> Quantity {
        Quantity(self.canonical_text())
    }

    fn canonical_text(&self) -> String {
        let mut format = self.format;
        if format == Format::BinarySi
            && (self.nanos.abs() < 1024 * NANOS || self.nanos % NANOS != 0)
        {
            format = Format::DecimalSi;
        }
        if format == Format::BinarySi {
            let mut mantissa = self.nanos / NANOS;
            let mut power = 0;
            while power < 6 && mantissa % 1024 == 0 {
                mantissa /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return format!("{mantissa}{suffix}");
        }
        if self.nanos == 0 {
            return "0".to_owned();
        }
        // nanos × 10⁻⁹: strip factors of ten, then bring the exponent to a multiple of
        // three by putting one or two of them back.
        let mut mantissa = self.nanos;
        let mut exponent: i32 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        match exponent.rem_euclid(3) {
            1 => {
                mantissa *= 10;
                exponent -= 1;
            }
            2 => {
                mantissa *= 100;
                exponent -= 2;
            }
            _ => {}
        }
        let suffix = match (format, exponent) {
            (Format::DecimalExponent, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".to_owned(),
            (_, -6) => "u".to_owned(),
            (_, -3) => "m".to_owned(),
            (_, 0) => String::new(),
            (_, 3) => "k".to_owned(),
            (_, 6) => "M".to_owned(),
            (_, 9) => "G".to_owned(),
            (_, 12) => "T".to_owned(),
            (_, 15) => "P".to_owned(),
            (_, 18) => "E".to_owned(),
            (_, e) => format!("e{e}"),
        };
        format!("{mantissa}{suffix}")
    }
}

impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Amount {}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

/// `n / d` rounded away from zero.
fn div_away(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 {
        q
    } else if n < 0 {
        q - 1
    } else {
        q + 1
    }
}

/// A quantity as the object wrote it (`"80Gi"`, `"100m"`, `"4"`).
///
/// Equality, order and hashing go by value where the text parses (`1Gi` equals
/// `1073741824`), and by text otherwise; a quantity that does not parse sorts after
/// every one that does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Quantity(pub String);

impl Quantity {
    /// The quantity's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The exact value (see [`Amount`]).
    pub fn amount(&self) -> Result<Amount, QuantityError> {
        parse(&self.0)?.amount()
    }

    /// Whether the value is zero (`false` when the text does not parse).
    pub fn is_zero(&self) -> bool {
        self.amount().is_ok_and(|a| a.nanos == 0)
    }

    /// The sum, written as Kubernetes writes a computed quantity in `self`'s format.
    pub fn checked_add(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        self.amount()?
            .checked_add(&other.amount()?)
            .map(|a| a.to_quantity())
            .ok_or(QuantityError::Overflow)
    }

    /// The difference, written as Kubernetes writes a computed quantity in `self`'s
    /// format.
    pub fn checked_sub(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        self.amount()?
            .checked_sub(&other.amount()?)
            .map(|a| a.to_quantity())
            .ok_or(QuantityError::Overflow)
    }

    /// The same value in Kubernetes' canonical text, in the quantity's own format:
    /// `1000` becomes `1k`, `1.5` becomes `1500m`, `1024Ki` becomes `1Mi`.
    pub fn canonical(&self) -> Result<Quantity, QuantityError> {
        Ok(self.amount()?.to_quantity())
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        match (self.amount(), other.amount()) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => self.0 == other.0,
            _ => false,
        }
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.amount(), other.amount()) {
            (Ok(a), Ok(b)) => a.cmp(&b),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => self.0.cmp(&other.0),
        }
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self.amount() {
            Ok(a) => a.nanos.hash(state),
            Err(_) => self.0.hash(state),
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity(s.to_owned())
    }
}

impl std::str::FromStr for Amount {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)?.amount()
    }
}

/// The quantity in thousandths, rounded away from zero (`Quantity.MilliValue`):
/// `"100m"` is 100, `"1.5"` is 1500, `"1Ki"` is 1024000.
pub fn milli_value(q: &str) -> Result<i64, QuantityError> {
    parse(q)?.amount()?.milli_value()
}

/// The quantity as an integer, rounded away from zero (`Quantity.Value`):
/// `"100m"` is 1, `"1Gi"` is 1073741824, `"1e3"` is 1000.
pub fn value(q: &str) -> Result<i64, QuantityError> {
    parse(q)?.amount()?.value()
}

/// A scanned quantity: `±digits × 10^exp10 × 2^exp2`, exactly.
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    /// Decimal digits (integer and fraction joined), possibly with leading zeros;
    /// empty means zero.
    digits: String,
    exp10: i64,
    exp2: u32,
    format: Format,
}

/// What a suffix multiplies by.
enum Suffix {
    /// Decimal SI: times 10^n.
    Decimal(i32),
    /// A decimal exponent: times 10^n.
    Exponent(i32),
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
            return Ok(Suffix::Exponent(n as i32));
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
        format: Format::DecimalSi,
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
        Suffix::Decimal(e) | Suffix::Exponent(e) => {
            18 - (num_len + denom_len) < 0 || i64::from(e) - denom_len < -9
        }
        Suffix::Binary(e) => !denom.is_empty() || 15 - num_len - i64::from(e) * 3 / 10 - 1 < 0,
    };
    if slow && !has_digit {
        return Err(QuantityError::Numeric);
    }

    let (exp10, exp2, format) = match suffix {
        Suffix::Decimal(e) => (i64::from(e) - denom_len, 0, Format::DecimalSi),
        Suffix::Exponent(e) => (i64::from(e) - denom_len, 0, Format::DecimalExponent),
        Suffix::Binary(e) => (-denom_len, e, Format::BinarySi),
    };
    Ok(Parsed {
        negative,
        digits: format!("{num}{denom}"),
        exp10,
        exp2,
        format,
    })
}

impl Parsed {
    /// The exact value in nano-units, rounded away from zero to a whole nano.
    fn amount(&self) -> Result<Amount, QuantityError> {
        let nanos = self.scaled(9)?;
        Ok(Amount {
            nanos,
            format: self.format,
        })
    }

    /// The value times 10^scale, rounded away from zero.
    fn scaled(&self, scale: i64) -> Result<i128, QuantityError> {
        let digits = self.digits.trim_start_matches('0');
        let significant = digits.trim_end_matches('0');
        if significant.is_empty() {
            return Ok(0);
        }
        let len = significant.len() as i64;
        // value = significant × 10^k × 2^exp2
        let k = self.exp10 + scale + (digits.len() - significant.len()) as i64;
        // With `len` digits the value is at least 10^(len-1+k), beyond an i128 once
        // that exponent reaches 39; this also bounds the integer part to 38 digits.
        if len + k > 38 {
            return Err(QuantityError::Overflow);
        }
        let multiplier = 1u128 << self.exp2;
        let (integer, fraction, pad) = if k >= 0 {
            let i: u128 = significant.parse().map_err(|_| QuantityError::Overflow)?;
            let i = i
                .checked_mul(10u128.pow(k as u32))
                .ok_or(QuantityError::Overflow)?;
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
        let magnitude = integer
            .checked_mul(multiplier)
            .and_then(|m| m.checked_add(carry + u128::from(inexact)))
            .ok_or(QuantityError::Overflow)?;
        let magnitude = i128::try_from(magnitude).map_err(|_| QuantityError::Overflow)?;
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
        // Beyond what nano-units in an i128 hold.
        assert_eq!("1e30".parse::<Amount>(), Err(QuantityError::Overflow));
        assert!("1e28".parse::<Amount>().is_ok());
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

    fn q(s: &str) -> Quantity {
        Quantity::from(s)
    }

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1k"), q("1000"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("0.5"), q("500m"));
        assert_ne!(q("1Gi"), q("1G"));
        assert!(q("1G") < q("1Gi"));
        assert!(q("999m") < q("1"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("1n").cmp(&q("0.0000000001")), Ordering::Equal);
        let mut v = [q("2"), q("1Ki"), q("100m"), q("1k")];
        v.sort();
        assert_eq!(
            v.iter().map(Quantity::as_str).collect::<Vec<_>>(),
            ["100m", "2", "1k", "1Ki"]
        );
        // Text that does not parse compares as text and after every value.
        assert_eq!(q("x"), q("x"));
        assert_ne!(q("x"), q("0"));
        assert!(q("0") < q("x"));
        let hash = |x: &Quantity| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            x.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&q("1Ki")), hash(&q("1024")));
    }

    #[test]
    fn quantities_add_subtract_and_know_zero() {
        assert_eq!(q("1Gi").checked_add(&q("1Gi")).unwrap().as_str(), "2Gi");
        assert_eq!(q("1").checked_add(&q("500m")).unwrap().as_str(), "1500m");
        assert_eq!(q("1Gi").checked_sub(&q("1Gi")).unwrap().as_str(), "0");
        assert_eq!(q("2").checked_sub(&q("3")).unwrap().as_str(), "-1");
        assert_eq!(q("1Ki").checked_sub(&q("1")).unwrap().as_str(), "1023");
        assert_eq!(q("1k").checked_add(&q("1")).unwrap().as_str(), "1001");
        assert!(q("0").is_zero());
        assert!(q("0Gi").is_zero());
        assert!(q("-0").is_zero());
        assert!(!q("1n").is_zero());
        assert!(!q("x").is_zero());
        assert_eq!(q("x").checked_add(&q("1")), Err(QuantityError::Format));
    }

    #[test]
    fn canonical_text_is_kubernetes_text() {
        for (input, canonical) in [
            ("1000", "1k"),
            ("1500", "1500"),
            ("1.5", "1500m"),
            ("0.1", "100m"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("12e6", "12e6"),
            ("12000000", "12M"),
            ("1e3", "1e3"),
            ("15e-1", "1500e-3"),
            ("1024", "1024"),
            ("1Ki", "1Ki"),
            ("1024Ki", "1Mi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("0.5Ki", "512"),
            ("0Gi", "0"),
            ("0", "0"),
            ("-2k", "-2k"),
            ("1n", "1n"),
            ("1u", "1u"),
            ("1E", "1E"),
        ] {
            assert_eq!(q(input).canonical().unwrap().as_str(), canonical, "{input}");
        }
        assert_eq!(
            Amount::from_int(3, Format::BinarySi).to_quantity().as_str(),
            "3"
        );
        assert_eq!(
            Amount::from_int(2048, Format::BinarySi)
                .to_quantity()
                .as_str(),
            "2Ki"
        );
    }

    #[test]
    fn amounts_convert_like_kubernetes() {
        let a: Amount = "1.5".parse().unwrap();
        assert_eq!(a.as_int64(), None);
        assert_eq!(a.as_f64(), 1.5);
        assert_eq!(a.signum(), 1);
        let b: Amount = "2k".parse().unwrap();
        assert_eq!(b.as_int64(), Some(2000));
        assert_eq!("-3".parse::<Amount>().unwrap().signum(), -1);
        assert_eq!("0".parse::<Amount>().unwrap().signum(), 0);
        assert_eq!("1e19".parse::<Amount>().unwrap().as_int64(), None);
    }
}
