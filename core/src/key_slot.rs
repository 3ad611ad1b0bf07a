//! The cluster hash slot of a key name, as Redis and Valkey compute it: CRC16 (XMODEM) of
//! the key's hash tag (the part between the first `{` and the next `}`, when not empty) or
//! of the whole name, modulo 16384. The module needs it to drop what it keeps for the keys
//! of slots that moved away; the API call for it exists only on newer servers. Use it as
//! `key_slot::of(name)`.

/// The number of hash slots in a cluster.
pub const SLOTS: u16 = 16_384;

/// The hash slot of `key`.
pub fn of(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of `key` that is hashed.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

/// CRC-16/XMODEM: polynomial 0x1021, initial value 0, no reflection.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_xmodem() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_cluster_keyslot() {
        // What `CLUSTER KEYSLOT` answers on Redis and Valkey.
        assert_eq!(of(b"orders"), 105);
        assert_eq!(of(b"foo"), 12_182);
        assert_eq!(of(b"bar"), 5061);
        assert_eq!(of(b"{bar}.following"), 5061);
        assert_eq!(of(b"foo{}{bar}"), 8363); // an empty first tag: the whole name
        assert_eq!(of(b"{bar"), 4015);
        assert_eq!(of(b"foo{{bar}}zap"), 4015); // the tag is `{bar`
        assert_eq!(of(b""), 0);
    }
}
