//! Integers written in decimal into a stack buffer, without allocating (replies and string
//! keys are written on every call).

/// Room for the decimal digits of any u64, or of any i64 with its sign.
pub struct DecimalBuffer([u8; 21]);

impl DecimalBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        DecimalBuffer([0; 21])
    }

    /// `value` in decimal.
    pub fn u64(&mut self, value: u64) -> &str {
        self.write(false, value)
    }

    /// `value` in decimal, with a `-` if negative.
    pub fn i64(&mut self, value: i64) -> &str {
        self.write(value < 0, value.unsigned_abs())
    }

    fn write(&mut self, negative: bool, mut magnitude: u64) -> &str {
        let buffer = &mut self.0;
        let mut start = buffer.len();
        loop {
            start -= 1;
            buffer[start] = b'0' + (magnitude % 10) as u8;
            magnitude /= 10;
            if magnitude == 0 {
                break;
            }
        }
        if negative {
            start -= 1;
            buffer[start] = b'-';
        }
        // Only ASCII digits and a sign were written.
        std::str::from_utf8(&buffer[start..]).unwrap_or("0")
    }
}

#[cfg(test)]
mod tests {
    use super::DecimalBuffer;

    #[test]
    fn writes_what_to_string_writes() {
        for value in [0, 1, -1, 9, 10, -10, 4_096, i64::MAX, i64::MIN] {
            assert_eq!(DecimalBuffer::new().i64(value), value.to_string());
        }
        for value in [0, 7, u64::MAX, 1 << 63] {
            assert_eq!(DecimalBuffer::new().u64(value), value.to_string());
        }
    }
}
