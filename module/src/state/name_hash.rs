//! SipHash-1-3 of a key name under a random per-process key: what `state::reservations`
//! indexes its table by, on every `SEGMENT.NEXT`.
//!
//! The same function as the standard library's `DefaultHasher` (and Redis's keyspace
//! hash): key names come from clients, and a hash they could make collide would let one
//! client slow the server's main thread. Written out for byte strings because the
//! standard library's streaming hasher costs `SEGMENT.NEXT` about 50 more instructions a
//! call, which takes it below 0.9 of the floor of a module command (docs/performance.md,
//! measured by `scripts/bench.sh --floor-only`); `tests` check it against the standard
//! library's SipHash-2-4 and the published vectors.

use std::hash::{BuildHasher, RandomState};

/// A random SipHash key, drawn once per table.
#[derive(Clone, Copy)]
pub struct NameHasher {
    k0: u64,
    k1: u64,
}

impl Default for NameHasher {
    fn default() -> Self {
        // Two outputs of the standard library's SipHash under its own random key (seeded
        // from the operating system): unpredictable to clients.
        let state = RandomState::new();
        NameHasher {
            k0: state.hash_one(0u64),
            k1: state.hash_one(1u64),
        }
    }
}

impl NameHasher {
    /// SipHash-1-3 of `name`.
    #[inline]
    pub fn hash(&self, name: &[u8]) -> u64 {
        siphash::<1, 3>(self.k0, self.k1, name)
    }
}

/// SipHash-`C`-`D` (C rounds per 8-byte block, D to finish) of `bytes` under the key
/// (`k0`, `k1`), as the SipHash paper defines it.
#[inline]
fn siphash<const C: usize, const D: usize>(k0: u64, k1: u64, bytes: &[u8]) -> u64 {
    let mut state = State {
        v0: k0 ^ 0x736f_6d65_7073_6575,
        v1: k1 ^ 0x646f_7261_6e64_6f6d,
        v2: k0 ^ 0x6c79_6765_6e65_7261,
        v3: k1 ^ 0x7465_6462_7974_6573,
    };
    let mut blocks = bytes.chunks_exact(8);
    for block in &mut blocks {
        let mut word = [0u8; 8];
        word.copy_from_slice(block);
        state.absorb::<C>(u64::from_le_bytes(word));
    }
    // The last block: the remaining bytes, little-endian, and the length's low byte on top.
    let mut last = (bytes.len() as u64) << 56;
    for (index, &byte) in blocks.remainder().iter().enumerate() {
        last |= u64::from(byte) << (8 * index);
    }
    state.absorb::<C>(last);
    state.v2 ^= 0xff;
    for _ in 0..D {
        state.round();
    }
    state.v0 ^ state.v1 ^ state.v2 ^ state.v3
}

struct State {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
}

impl State {
    #[inline(always)]
    fn absorb<const C: usize>(&mut self, word: u64) {
        self.v3 ^= word;
        for _ in 0..C {
            self.round();
        }
        self.v0 ^= word;
    }

    #[inline(always)]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13) ^ self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16) ^ self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21) ^ self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17) ^ self.v2;
        self.v2 = self.v2.rotate_left(32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    const KEY: (u64, u64) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);

    /// The key 00 01 … 0f and messages 00 01 … (n-1): the SipHash paper's vectors.
    #[test]
    fn siphash_2_4_gives_the_published_vectors() {
        let message: Vec<u8> = (0..16).collect();
        assert_eq!(siphash::<2, 4>(KEY.0, KEY.1, &[]), 0x726f_db47_dd0e_0e31);
        assert_eq!(
            siphash::<2, 4>(KEY.0, KEY.1, &message[..1]),
            0x74f8_39c5_93dc_67fd
        );
        assert_eq!(
            siphash::<2, 4>(KEY.0, KEY.1, &message[..15]),
            0xa129_ca61_49be_45e5
        );
    }

    #[test]
    fn siphash_2_4_agrees_with_the_standard_library_at_every_length() {
        let message: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for len in 0..=message.len() {
            #[allow(deprecated)]
            let mut std_hasher = std::hash::SipHasher::new_with_keys(KEY.0, KEY.1);
            std_hasher.write(&message[..len]);
            assert_eq!(
                siphash::<2, 4>(KEY.0, KEY.1, &message[..len]),
                std_hasher.finish(),
                "length {len}"
            );
        }
    }

    #[test]
    fn each_table_draws_its_own_key() {
        let (a, b) = (NameHasher::default(), NameHasher::default());
        assert_ne!((a.k0, a.k1), (b.k0, b.k1));
        assert_eq!(a.hash(b"counter"), a.hash(b"counter"));
        assert_ne!(a.hash(b"counter"), a.hash(b"counter2"));
    }
}
