//! A fixed-size bit set: which operations a search path has linearized (a memo-key part).

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Bits {
    words: Vec<u64>,
}

impl Bits {
    pub(crate) fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
        }
    }

    pub(crate) fn get(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|word| word & (1 << (i % 64)) != 0)
    }

    /// A copy with bit `i` set.
    pub(crate) fn with(&self, i: usize) -> Self {
        let mut copy = self.clone();
        if let Some(word) = copy.words.get_mut(i / 64) {
            *word |= 1 << (i % 64);
        }
        copy
    }

    pub(crate) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
}
