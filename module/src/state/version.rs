//! The module's version, from the crate's: `MODULE LIST` shows it as one integer
//! (`major·10000 + minor·100 + patch`, 0.1.0 → 100, as Redis's own modules do), COMMAND DOCS
//! and `INFO idgen` as text.

use std::ffi::CStr;

/// The crate version, such as `0.3.0`.
pub const TEXT: &str = env!("CARGO_PKG_VERSION");

/// The same as a C string, for COMMAND DOCS' `since`: every command exists since the first
/// release.
pub const SINCE: &CStr = c"0.1.0";

/// `major·10000 + minor·100 + patch`, for `MODULE LIST`.
pub const NUMBER: i32 = encode(TEXT.as_bytes());

const fn encode(text: &[u8]) -> i32 {
    let mut parts = [0i32; 3];
    let (mut part, mut i) = (0, 0);
    while i < text.len() && part < 3 {
        match text[i] {
            b'.' => part += 1,
            digit @ b'0'..=b'9' => parts[part] = parts[part] * 10 + (digit - b'0') as i32,
            _ => break, // a pre-release suffix such as `-rc1`
        }
        i += 1;
    }
    parts[0] * 10_000 + parts[1] * 100 + parts[2]
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_encode_as_redis_modules_do() {
        assert_eq!(super::encode(b"0.1.0"), 100);
        assert_eq!(super::encode(b"0.3.0"), 300);
        assert_eq!(super::encode(b"2.6.9"), 20_609);
        assert_eq!(super::encode(b"1.12.3-rc1"), 11_203);
    }
}
