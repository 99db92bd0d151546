//! Deterministic randomness. No `rand` crate: a seeded splitmix64 keeps runs reproducible
//! (same scenario seed => same ids and the same fault pattern for the same call order).

/// splitmix64: tiny, fast, and good enough for ids and fault coin-flips.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (p <= 0 never draws, so a zero rate costs no randomness and
    /// does not shift the id stream).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }

    /// `prefix` + 17 lowercase hex digits, the shape of EC2 resource ids.
    pub fn resource_id(&mut self, prefix: &str) -> String {
        hex17(prefix, self.next_u64() ^ (self.next_u64() << 4))
    }

    /// A UUID-shaped request id.
    pub fn uuid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Stable 64-bit hash of a string (FNV-1a then a splitmix finaliser). Used for ids that must be
/// identical across calls and restarts, e.g. offering ids. Not `DefaultHasher`: its output may
/// change between Rust releases.
pub fn stable_hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix(h)
}

/// `prefix` + 17 hex digits derived from `key`, stable forever.
pub fn stable_id(prefix: &str, key: &str) -> String {
    let h = stable_hash(key);
    hex17(prefix, h ^ (stable_hash(&format!("{key}#2")) << 4))
}

fn hex17(prefix: &str, v: u64) -> String {
    // 17 hex digits = 68 bits; the top nibble comes from a second mix of the value.
    let top = (mix(v) & 0xf) as u8;
    format!("{prefix}{top:x}{v:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        assert_eq!(a.resource_id("cr-"), b.resource_id("cr-"));
        assert_eq!(a.uuid(), b.uuid());
    }

    #[test]
    fn ids_have_ec2_shape() {
        let mut r = SplitMix64::new(1);
        let id = r.resource_id("cr-");
        assert_eq!(id.len(), 3 + 17);
        assert!(id[3..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        let s = stable_id("cb-", "x");
        assert_eq!(s.len(), 20);
        assert_eq!(s, stable_id("cb-", "x"));
        assert_ne!(s, stable_id("cb-", "y"));
        assert_eq!(r.uuid().len(), 36);
    }

    #[test]
    fn chance_is_roughly_right_and_zero_is_free() {
        let mut r = SplitMix64::new(3);
        let before = r.clone().next_u64();
        assert!(!r.chance(0.0));
        assert_eq!(r.clone().next_u64(), before);
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_200..2_800).contains(&hits), "{hits}");
    }
}
