//! Deterministic filler text: pseudo-words assembled from syllables, so prompts look like text
//! to a whitespace or BPE tokenizer while carrying no meaning the target could short-cut.

use rand::Rng;
use rand::rngs::SmallRng;

const SYLLABLES: [&str; 40] = [
    "ka", "lo", "mi", "ra", "ten", "vo", "shi", "un", "dar", "el", "po", "qui", "sa", "ne", "tor",
    "bi", "ga", "fen", "zu", "ho", "ri", "mas", "pel", "tu", "go", "ven", "lis", "cor", "da", "nu",
    "ser", "wa", "jo", "ky", "bel", "fa", "tri", "om", "xe", "yal",
];

pub fn random_word(rng: &mut SmallRng) -> String {
    let syllables = rng.random_range(1..=3);
    (0..syllables)
        .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
        .collect()
}

/// `count` space-separated pseudo-words, with a full stop every dozen words or so.
pub fn random_words(rng: &mut SmallRng, count: usize) -> String {
    let mut text = String::with_capacity(count * 7);
    for index in 0..count {
        if index > 0 {
            if index % 12 == 0 {
                text.push('.');
            }
            text.push(' ');
        }
        text.push_str(&random_word(rng));
    }
    text
}

/// SplitMix64 finaliser: turns (seed, stream) pairs into unrelated seeds for independent RNGs.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn word_count_is_exact_and_output_is_seeded() {
        let mut rng = SmallRng::seed_from_u64(1);
        let text = random_words(&mut rng, 300);
        assert_eq!(text.split_whitespace().count(), 300);
        let again = random_words(&mut SmallRng::seed_from_u64(1), 300);
        assert_eq!(text, again);
        let other = random_words(&mut SmallRng::seed_from_u64(2), 300);
        assert_ne!(text, other);
    }

    #[test]
    fn derived_seeds_differ_per_stream() {
        assert_ne!(derive_seed(1, 0), derive_seed(1, 1));
        assert_ne!(derive_seed(1, 0), derive_seed(2, 0));
        assert_eq!(derive_seed(5, 9), derive_seed(5, 9));
    }
}
