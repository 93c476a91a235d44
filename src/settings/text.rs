//! Durations as text ("500ms", "10s", "1.5m") and decimal milliseconds
//! ("12.25"), parsed exactly in integer nanoseconds: no float rounding, no new
//! dependency.

use std::time::Duration;

/// The units a duration may be written in, largest first, with their length in
/// nanoseconds. [`format_duration`] picks the largest that divides the value.
const UNITS: [(&str, u64); 6] = [
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// Parses a duration written as a decimal number and a unit (`ns`, `us` or `µs`
/// with the micro sign or the Greek mu, `ms`, `s`, `m`, `h`), with an optional
/// space between: "500ms", "10s", "1.5 m". Zero parses ("0s"); whether it is
/// allowed is for the setting to say.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_alphabetic())
        .ok_or_else(|| format!("`{text}` has no unit: write it as 500ms, 10s, 2m or 1h"))?;
    let (number, unit) = text.split_at(split);
    let number = number.trim_end();
    // The micro sign (U+00B5, as `Duration`'s `Debug` writes it) or the Greek
    // mu (U+03BC, as many keyboards type it).
    let unit = match unit {
        "\u{b5}s" | "\u{3bc}s" => "us",
        unit => unit,
    };
    let (_, nanos) = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .ok_or_else(|| format!("`{text}`: `{unit}` is not a unit (ns, us, ms, s, m or h)"))?;
    decimal(number, *nanos)
        .map(Duration::from_nanos)
        .map_err(|why| format!("`{text}`: {why}"))
}

/// Writes `d` in the largest unit that holds it exactly: "500ms", "10s", "90s",
/// "1h"; zero is "0s". [`parse_duration`] reads it back to the same value.
pub(crate) fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    let (name, unit) = UNITS
        .iter()
        .find(|(_, unit)| nanos.is_multiple_of(u128::from(*unit)))
        .unwrap_or(&("ns", 1));
    format!("{}{name}", nanos / u128::from(*unit))
}

/// Parses a decimal number of milliseconds ("12", "12.5", "0.000001") into
/// nanoseconds, exactly.
#[cfg_attr(not(feature = "replay"), allow(dead_code))]
pub(crate) fn parse_millis(text: &str) -> Result<Duration, String> {
    decimal(text.trim(), 1_000_000).map(Duration::from_nanos)
}

/// Writes `d` as decimal milliseconds, exactly, with no trailing zeros: "12",
/// "12.5", "0.000001". [`parse_millis`] reads it back to the same value.
#[cfg_attr(not(feature = "replay"), allow(dead_code))]
pub(crate) fn format_millis(d: Duration) -> String {
    let nanos = d.as_nanos();
    let (whole, fraction) = (nanos / 1_000_000, nanos % 1_000_000);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// `number` (digits, at most one `.`) times `unit` nanoseconds, as whole
/// nanoseconds: refused if it is not a plain non-negative decimal, is finer than
/// a nanosecond, or is beyond `u64::MAX` nanoseconds (about 584 years).
fn decimal(number: &str, unit: u64) -> Result<u64, String> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty()
        || !digits_only(whole)
        || !digits_only(fraction)
        || number.ends_with('.')
    {
        return Err(format!("`{number}` is not a non-negative decimal number"));
    }
    let too_long = || "beyond 584 years (u64::MAX nanoseconds)".to_owned();
    let mut nanos: u64 = 0;
    for b in whole.bytes() {
        nanos = nanos
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or_else(too_long)?;
    }
    nanos = nanos.checked_mul(unit).ok_or_else(too_long)?;
    // The fraction is `digits / 10^k` of a unit: exact where `digits * unit` is
    // a multiple of 10^k. Past its trailing zeros no exact fraction has more
    // than 13 digits (a unit has at most 2^13 in it), so 19 bound the sums.
    let finer = || format!("`{number}` is finer than a nanosecond");
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > 19 {
        return Err(finer());
    }
    let digits = fraction
        .bytes()
        .fold(0u128, |n, b| n * 10 + u128::from(b - b'0'));
    let (scaled, scale) = (digits * u128::from(unit), 10u128.pow(fraction.len() as u32));
    if !scaled.is_multiple_of(scale) {
        return Err(finer());
    }
    let part = u64::try_from(scaled / scale).map_err(|_| too_long())?;
    nanos = nanos.checked_add(part).ok_or_else(too_long)?;
    Ok(nanos)
}

#[cfg(all(test, not(cutout_loom)))]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_exactly_in_every_unit() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("500ms"), Ok(ms(500)));
        assert_eq!(parse_duration("10s"), Ok(ms(10_000)));
        assert_eq!(parse_duration(" 1.5 m "), Ok(ms(90_000)));
        assert_eq!(parse_duration("2h"), Ok(ms(7_200_000)));
        assert_eq!(parse_duration("0.1s"), Ok(ms(100)));
        for micro in ["250us", "250\u{b5}s", "250\u{3bc}s"] {
            assert_eq!(parse_duration(micro), Ok(Duration::from_micros(250)));
        }
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        // Exact fractions of an hour or a minute, whose tenths are no whole
        // number of nanoseconds on the way.
        assert_eq!(
            parse_duration("0.000000000005h"),
            Ok(Duration::from_nanos(18))
        );
        assert_eq!(
            parse_duration("0.00000000025m"),
            Ok(Duration::from_nanos(15))
        );
        assert_eq!(parse_duration("1.50000000000000000000000s"), Ok(ms(1_500)));
    }

    #[test]
    fn bad_durations_say_why() {
        for (text, why) in [
            ("500", "no unit"),
            ("10 parsecs", "not a unit"),
            ("-1s", "not a non-negative decimal"),
            ("1.2.3s", "not a non-negative decimal"),
            ("1.s", "not a non-negative decimal"),
            (".s", "not a non-negative decimal"),
            ("1.5ns", "finer than a nanosecond"),
            ("0.0000000000001h", "finer than a nanosecond"),
            ("0.00000000000000000001s", "finer than a nanosecond"),
            ("99999999999999999999s", "584 years"),
            ("", "no unit"),
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn formatting_round_trips_in_the_largest_exact_unit() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_nanos(1_500), "1500ns"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
    }

    #[test]
    fn milliseconds_round_trip_to_the_nanosecond() {
        for nanos in [0, 1, 999_999, 1_000_000, 12_500_000, 123_456_789_012] {
            let d = Duration::from_nanos(nanos);
            assert_eq!(parse_millis(&format_millis(d)), Ok(d), "{nanos}");
        }
        assert_eq!(format_millis(Duration::from_micros(12_250)), "12.25");
        assert!(parse_millis("12ms").is_err());
        assert!(parse_millis("-3").is_err());
        assert!(parse_millis("0.0000001").is_err());
    }
}
