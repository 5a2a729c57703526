//! Exact count tables of encoded rows: every 1-way table and every 2-way table, from one scan.

/// Zeroed or filled exact counts: the 1-way table of each column and the 2-way table of each pair
/// i < j (row-major c_i × c_j). Built by [`super::SyntheticSpec::counter`]; never released as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairCounts {
    pub(crate) cards: Vec<usize>,
    /// Start of column j's 1-way table in `one`.
    one_off: Vec<usize>,
    one: Vec<u64>,
    /// Start of pair (i, j)'s table in `two`, indexed by [`pair_index`].
    two_off: Vec<usize>,
    two: Vec<u64>,
    rows: u64,
}

/// Index of the pair i < j among the d(d−1)/2 pairs in the order (0,1), (0,2), …, (1,2), …
#[inline]
pub fn pair_index(d: usize, i: usize, j: usize) -> usize {
    debug_assert!(i < j && j < d);
    i * (2 * d - i - 1) / 2 + (j - i - 1)
}

/// The pairs i < j in [`pair_index`] order.
pub fn pairs(d: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..d).flat_map(move |i| (i + 1..d).map(move |j| (i, j)))
}

impl PairCounts {
    pub(crate) fn zeroed(cards: &[usize]) -> Self {
        let d = cards.len();
        let mut one_off = Vec::with_capacity(d);
        let mut acc = 0;
        for &c in cards {
            one_off.push(acc);
            acc += c;
        }
        let one = vec![0; acc];
        let mut two_off = Vec::with_capacity(d * d.saturating_sub(1) / 2);
        let mut acc = 0;
        for (i, j) in pairs(d) {
            two_off.push(acc);
            acc += cards[i] * cards[j];
        }
        PairCounts { cards: cards.to_vec(), one_off, one, two_off, two: vec![0; acc], rows: 0 }
    }

    /// Counts one encoded row (`row[j] < c_j`, guaranteed by the caller; a larger code is counted
    /// in the column's last cell rather than panicking).
    pub fn push(&mut self, row: &[u32]) {
        let d = self.cards.len();
        debug_assert_eq!(row.len(), d, "row of the wrong width");
        debug_assert!(row.iter().zip(&self.cards).all(|(&v, &c)| (v as usize) < c), "code out of range");
        let code = |j: usize| (row.get(j).copied().unwrap_or(0) as usize).min(self.cards[j] - 1);
        let mut pi = 0;
        for i in 0..d {
            let a = code(i);
            self.one[self.one_off[i] + a] += 1;
            for j in i + 1..d {
                self.two[self.two_off[pi] + a * self.cards[j] + code(j)] += 1;
                pi += 1;
            }
        }
        self.rows += 1;
    }

    /// Adds another table of the same shape (partial counts of another scan). Panics if the shapes
    /// differ (both must come from the same spec's [`super::SyntheticSpec::counter`]).
    pub fn merge(&mut self, other: &PairCounts) {
        assert_eq!(self.cards, other.cards, "PairCounts::merge: different shapes");
        for (a, b) in self.one.iter_mut().zip(&other.one) {
            *a += b;
        }
        for (a, b) in self.two.iter_mut().zip(&other.two) {
            *a += b;
        }
        self.rows += other.rows;
    }

    /// The number of rows counted (private: never released as is).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn columns(&self) -> usize {
        self.cards.len()
    }

    pub fn cardinalities(&self) -> &[usize] {
        &self.cards
    }

    /// Column j's exact 1-way table.
    pub fn one_way(&self, j: usize) -> &[u64] {
        &self.one[self.one_off[j]..self.one_off[j] + self.cards[j]]
    }

    /// The exact 2-way table of columns i < j, row-major c_i × c_j.
    pub fn two_way(&self, i: usize, j: usize) -> &[u64] {
        assert!(i < j && j < self.cards.len(), "two_way needs i < j < d");
        let s = self.two_off[pair_index(self.cards.len(), i, j)];
        &self.two[s..s + self.cards[i] * self.cards[j]]
    }
}
