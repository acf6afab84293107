//! Deterministic randomness: SplitMix64, and stateless hashes so any pod-hour's values can
//! be recomputed from its ids alone (the CUR, metrics and truth passes agree without sharing
//! state).

/// A small, fast, seedable generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator derived from a seed and a stream of ids.
    pub fn derive(seed: u64, ids: &[u64]) -> Rng {
        Rng(hash(seed, ids))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high)`.
    pub fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// Uniform integer in `[low, high]`.
    pub fn int(&mut self, low: i64, high: i64) -> i64 {
        low + (self.next_u64() % ((high - low + 1) as u64)) as i64
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }

    /// Lower-case alphanumerics like Kubernetes pod-name suffixes.
    pub fn suffix(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..len).map(|_| ALPHABET[(self.next_u64() % ALPHABET.len() as u64) as usize] as char).collect()
    }

    /// A random UUID-shaped string (version 4 layout).
    pub fn uuid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a seed and ids into one well-mixed value.
pub fn hash(seed: u64, ids: &[u64]) -> u64 {
    ids.iter().fold(mix(seed ^ 0x5851_F42D_4C95_7F2D), |acc, &id| mix(acc ^ mix(id)))
}

/// A value in `[0, 1)` fixed by a seed and ids.
pub fn unit(seed: u64, ids: &[u64]) -> f64 {
    (hash(seed, ids) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(Rng::new(8).next_u64(), first[0]);
        assert_eq!(unit(1, &[2, 3]), unit(1, &[2, 3]));
        let x = Rng::new(1).uuid();
        assert_eq!(x.len(), 36);
        assert_eq!(&x[14..15], "4");
    }
}
