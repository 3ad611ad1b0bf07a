//! Parses integers the way Redis does for INCR: an optional `-`, digits, no leading zeros,
//! no spaces or `+`, inside the signed 64-bit range.

/// The value of `bytes` if it is an integer Redis itself would accept, else `None`.
///
/// A plain digit loop rather than `str::parse`: this runs on every `SEGMENT.NEXT`, where
/// `from_utf8` and `parse` cost about 280 instructions for a ten-digit counter and this loop
/// about a fifth of that (docs/performance.md). The tests below hold it to `str::parse`.
pub fn parse_redis_integer(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        // No `+`, no leading zero: "0" is the one integer that starts with a zero (and
        // "-0" is refused, as Redis does).
        [b'1'..=b'9', ..] if digits.len() <= MAX_DIGITS => {}
        [b'0'] if !negative => return Some(0),
        _ => return None,
    }
    // At most 19 digits: below 10^19 < 2^64, so the sum cannot overflow a u64.
    let mut magnitude: u64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        magnitude = magnitude * 10 + u64::from(digit);
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// The most digits an `i64` has.
const MAX_DIGITS: usize = 19;

#[cfg(test)]
mod tests {
    use super::parse_redis_integer as parse;

    #[test]
    fn accepts_what_redis_accepts() {
        assert_eq!(parse(b"0"), Some(0));
        assert_eq!(parse(b"42"), Some(42));
        assert_eq!(parse(b"-7"), Some(-7));
        assert_eq!(parse(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn refuses_what_redis_refuses() {
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"007",
            b"+5",
            b" 5",
            b"5 ",
            b"1e3",
            b"3.0",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"abc",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn eight_digit_words_refuse_every_byte_that_is_not_a_digit() {
        for byte in 0..=255u8 {
            for position in 0..8 {
                let mut text = *b"12345678";
                text[position] = byte;
                // Valid exactly when the text is an integer in canonical form (a sign
                // first, or a digit anywhere but a leading zero).
                let expected = std::str::from_utf8(&text)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok().filter(|v| v.to_string() == t));
                assert_eq!(parse(&text), expected, "{text:?}");
            }
        }
    }

    #[test]
    fn a_byte_that_is_not_a_digit_is_refused_at_every_length_and_place() {
        for len in 1..=20 {
            for place in 0..len {
                for byte in [b'/', b':', b' ', 0, 0x80, 0xff, b'0' + 16, b'9' + 1, b'a'] {
                    let mut text: Vec<u8> = (0..len).map(|i| b'1' + (i % 9) as u8).collect();
                    text[place] = byte;
                    assert_eq!(parse(&text), None, "{text:?}");
                }
            }
        }
    }

    proptest::proptest! {
        /// Every i64 reads back from its decimal form, on both sides of the 18-digit switch.
        #[test]
        fn every_integer_reads_back(value in proptest::num::i64::ANY, small in -10i64.pow(18)..10i64.pow(18)) {
            proptest::prop_assert_eq!(parse(value.to_string().as_bytes()), Some(value));
            proptest::prop_assert_eq!(parse(small.to_string().as_bytes()), Some(small));
        }

        /// Counters of every length up to 19 digits read back (the 18-digit range above is
        /// mostly 17 and 18 digits long).
        #[test]
        fn every_length_reads_back(text in "-?[1-9][0-9]{0,17}") {
            proptest::prop_assert_eq!(parse(text.as_bytes()), text.parse::<i64>().ok());
        }

        /// Any short string of digits and a few other bytes parses exactly when Rust's own
        /// parser accepts it in canonical form.
        #[test]
        fn agrees_with_the_canonical_form(text in "-?[0-9a+ /:]{0,20}") {
            let canonical = text.parse::<i64>().ok().filter(|v| v.to_string() == text);
            proptest::prop_assert_eq!(parse(text.as_bytes()), canonical);
        }
    }
}
