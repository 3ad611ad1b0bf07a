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
/// (every counter below 10^18). Eight digits at a time as one 64-bit word (this runs on
/// every `SEGMENT.NEXT`): up to 16 digits as the last eight and the rest padded with zeros
/// to a word, fewer than eight one by one.
fn parse_short(digits: &[u8]) -> Option<i64> {
    let len = digits.len();
    if len < 8 {
        return parse_digits(digits);
    }
    if len > 16 {
        let (high, low) = digits.split_at(len - 16);
        return Some(parse_digits(high)? * 10_i64.pow(16) + parse_sixteen(low)?);
    }
    parse_sixteen(digits)
}

/// The value of 8 to 16 digits.
#[inline]
fn parse_sixteen(digits: &[u8]) -> Option<i64> {
    let len = digits.len();
    let low = eight_digits(word_at(digits, len - 8))?;
    let high_len = len - 8;
    if high_len == 0 {
        return Some(low as i64);
    }
    // The first word holds the `high_len` leading digits in its low bytes (the text's
    // first byte is the word's lowest): shifted up, they become the high bytes of an
    // eight-digit number whose low bytes are filled with '0'.
    let first = word_at(digits, 0);
    let high_word = if high_len == 8 {
        first
    } else {
        (first << (8 * (8 - high_len))) | (0x3030_3030_3030_3030 >> (8 * high_len))
    };
    Some((eight_digits(high_word)? * 100_000_000 + low) as i64)
}

/// The eight bytes of `digits` from `start` as a little-endian word.
#[inline]
fn word_at(digits: &[u8], start: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&digits[start..start + 8]);
    u64::from_le_bytes(word)
}

/// The value of a few digits, one by one (no overflow checks: at most [`SAFE_DIGITS`]).
fn parse_digits(digits: &[u8]) -> Option<i64> {
    let mut value: i64 = 0;
    for &byte in digits {
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
#[inline]
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
