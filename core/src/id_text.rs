//! IDs as text: decimal digits, and fixed-width Crockford base32 and base62 strings whose
//! byte order is the IDs' numeric order (most significant digit first, zero-padded), for
//! JavaScript (whose numbers hold 53 bits) and URLs.

use std::fmt;
use std::str::FromStr;

/// Crockford's base32 alphabet: digits and upper-case letters without I, L, O and U.
const BASE32: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// base62 in ASCII order: digits, upper case, lower case.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// How an ID is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdFormat {
    /// The usual decimal digits, as a string (`"383182656508002312"`).
    Decimal,
    /// Crockford base32, 13 characters (`"0AKY5E3V0J030"`).
    Base32,
    /// base62 in `0-9A-Za-z`, 11 characters (`"0SaSc2p1dEC"`).
    Base62,
}

impl IdFormat {
    /// Every format, in the order commands list them.
    pub const ALL: [IdFormat; 3] = [IdFormat::Decimal, IdFormat::Base32, IdFormat::Base62];

    /// The name commands take: `decimal`, `base32`, `base62`.
    pub fn name(self) -> &'static str {
        match self {
            IdFormat::Decimal => "decimal",
            IdFormat::Base32 => "base32",
            IdFormat::Base62 => "base62",
        }
    }

    /// The fixed width of a 63-bit ID in this format (decimal: up to 19 digits, not fixed).
    pub fn width(self) -> Option<usize> {
        match self {
            IdFormat::Decimal => None,
            IdFormat::Base32 => Some(13),
            IdFormat::Base62 => Some(11),
        }
    }

    /// Writes `id` in this format.
    pub fn encode(self, id: u64) -> String {
        match self {
            IdFormat::Decimal => id.to_string(),
            IdFormat::Base32 => fixed_width(id, BASE32, 13),
            IdFormat::Base62 => fixed_width(id, BASE62, 11),
        }
    }

    /// Reads an ID written in this format. base32 is read as Crockford says: any case, and
    /// `I`/`L` as 1, `O` as 0.
    pub fn decode(self, text: &str) -> Result<u64, IdTextError> {
        let bytes = text.as_bytes();
        let (alphabet_len, width) = match self {
            IdFormat::Decimal => {
                if bytes.is_empty() || bytes.len() > 19 || !bytes.iter().all(u8::is_ascii_digit) {
                    return Err(IdTextError::new(
                        self,
                        text,
                        "is not 1 to 19 decimal digits",
                    ));
                }
                return text
                    .parse::<u64>()
                    .ok()
                    .filter(|&id| id <= i64::MAX as u64)
                    .ok_or_else(|| IdTextError::new(self, text, "is above 2^63 - 1"));
            }
            IdFormat::Base32 => (32u64, 13),
            IdFormat::Base62 => (62u64, 11),
        };
        if bytes.len() != width {
            return Err(IdTextError::new(
                self,
                text,
                &format!(
                    "has {} characters; a {} ID has {width}",
                    bytes.len(),
                    self.name()
                ),
            ));
        }
        let mut id: u64 = 0;
        for &byte in bytes {
            let digit = match self {
                IdFormat::Base32 => base32_digit(byte),
                _ => base62_digit(byte),
            }
            .ok_or_else(|| {
                IdTextError::new(
                    self,
                    text,
                    &format!(
                        "has '{}', which is not in the {} alphabet",
                        byte as char,
                        self.name()
                    ),
                )
            })?;
            id = id
                .checked_mul(alphabet_len)
                .and_then(|id| id.checked_add(u64::from(digit)))
                .filter(|&id| id <= i64::MAX as u64)
                .ok_or_else(|| IdTextError::new(self, text, "is above 2^63 - 1"))?;
        }
        Ok(id)
    }
}

impl fmt::Display for IdFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IdFormat {
    type Err = String;

    /// Reads a format's name, in any case.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        IdFormat::ALL
            .into_iter()
            .find(|format| format.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                format!("unknown format '{name}'; the formats are decimal, base32 and base62")
            })
    }
}

fn fixed_width(mut id: u64, alphabet: &[u8], width: usize) -> String {
    let base = alphabet.len() as u64;
    let mut digits = vec![b'0'; width];
    for slot in digits.iter_mut().rev() {
        *slot = alphabet[(id % base) as usize];
        id /= base;
    }
    debug_assert_eq!(id, 0, "a 63-bit ID fits the width");
    String::from_utf8(digits).expect("the alphabets are ASCII")
}

fn base32_digit(byte: u8) -> Option<u8> {
    let byte = match byte.to_ascii_uppercase() {
        b'I' | b'L' => b'1',
        b'O' => b'0',
        other => other,
    };
    BASE32.iter().position(|&c| c == byte).map(|p| p as u8)
}

fn base62_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'A'..=b'Z' => Some(byte - b'A' + 10),
        b'a'..=b'z' => Some(byte - b'a' + 36),
        _ => None,
    }
}

/// Text that is not an ID in the format asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdTextError {
    message: String,
}

impl IdTextError {
    fn new(format: IdFormat, text: &str, problem: &str) -> Self {
        let shown: String = text.chars().take(40).collect();
        IdTextError {
            message: format!("'{shown}' is not a {format} ID: it {problem}"),
        }
    }
}

impl fmt::Display for IdTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for IdTextError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(IdFormat::Base32.encode(0), "0000000000000");
        assert_eq!(IdFormat::Base62.encode(0), "00000000000");
        assert_eq!(IdFormat::Base32.encode(i64::MAX as u64), "7ZZZZZZZZZZZZ");
        assert_eq!(IdFormat::Base62.encode(i64::MAX as u64), "AzL8n0Y58m7");
        assert_eq!(IdFormat::Base32.encode(32), "0000000000010");
        assert_eq!(IdFormat::Base62.encode(61), "0000000000z");
        assert_eq!(IdFormat::Decimal.encode(42), "42");
    }

    #[test]
    fn crockford_reading_is_forgiving() {
        let id = IdFormat::Base32.decode("0000000000010").unwrap();
        assert_eq!(id, 32);
        assert_eq!(IdFormat::Base32.decode("000000000001o").unwrap(), 32);
        assert_eq!(IdFormat::Base32.decode("00000000000IL").unwrap(), 33);
        assert_eq!(IdFormat::Base32.decode("00000000000il").unwrap(), 33);
    }

    #[test]
    fn bad_text_is_refused_with_the_reason() {
        let wide = IdFormat::Base32
            .decode("00000000000010")
            .unwrap_err()
            .to_string();
        assert!(
            wide.contains("has 14 characters; a base32 ID has 13"),
            "{wide}"
        );
        let alien = IdFormat::Base32
            .decode("000000000000U")
            .unwrap_err()
            .to_string();
        assert!(
            alien.contains("'U', which is not in the base32 alphabet"),
            "{alien}"
        );
        let over = IdFormat::Base32
            .decode("8000000000000")
            .unwrap_err()
            .to_string();
        assert!(over.contains("above 2^63 - 1"), "{over}");
        let over = IdFormat::Base62
            .decode("zzzzzzzzzzz")
            .unwrap_err()
            .to_string();
        assert!(over.contains("above 2^63 - 1"), "{over}");
        assert!(IdFormat::Base62.decode("0000000000-").is_err());
        assert!(IdFormat::Decimal.decode("9223372036854775808").is_err());
        assert!(IdFormat::Decimal.decode("-1").is_err());
        assert!(IdFormat::Decimal.decode("").is_err());
        assert_eq!("BASE62".parse::<IdFormat>(), Ok(IdFormat::Base62));
        assert!("hex"
            .parse::<IdFormat>()
            .unwrap_err()
            .contains("decimal, base32 and base62"));
    }
}
