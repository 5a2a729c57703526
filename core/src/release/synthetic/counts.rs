//! Exact count tables of encoded rows: every 1-way table and every 2-way table, from one scan, and
//! (for [`super::Method::Tree2`]) every 3-way table in the same scan.

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
    /// Start of triple (i, j, k)'s table in `three`, indexed by [`triple_index`]; empty unless the
    /// counter was made with its 3-way part.
    three_off: Vec<usize>,
    /// The 3-way tables of every triple i < j < k, row-major c_i × c_j × c_k.
    three: Vec<u64>,
    rows: u64,
}

/// C(n, 3).
fn choose3(n: usize) -> usize {
    if n < 3 {
        0
    } else {
        n * (n - 1) * (n - 2) / 6
    }
}

/// Index of the triple i < j < k among the C(d, 3) triples in lexicographic order.
#[inline]
pub fn triple_index(d: usize, i: usize, j: usize, k: usize) -> usize {
    debug_assert!(i < j && j < k && k < d);
    choose3(d) - choose3(d - i) + pair_index(d - i - 1, j - i - 1, k - i - 1)
}

/// The triples i < j < k in [`triple_index`] order.
pub fn triples(d: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..d).flat_map(move |i| (i + 1..d).flat_map(move |j| (j + 1..d).map(move |k| (i, j, k))))
}

/// Σ_{i<j<k} c_i·c_j·c_k, saturating: the cells of every 3-way table.
pub fn triple_cells(cards: &[usize]) -> usize {
    // elementary symmetric sums e1, e2, e3 in one pass
    let (mut e1, mut e2, mut e3): (u128, u128, u128) = (0, 0, 0);
    for &c in cards {
        let c = c as u128;
        e3 = e3.saturating_add(e2.saturating_mul(c));
        e2 = e2.saturating_add(e1.saturating_mul(c));
        e1 = e1.saturating_add(c);
    }
    usize::try_from(e3).unwrap_or(usize::MAX)
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
        PairCounts { cards: cards.to_vec(), one_off, one, two_off, two: vec![0; acc], three_off: Vec::new(), three: Vec::new(), rows: 0 }
    }

    /// Zeroed 1-way, 2-way and 3-way tables (the caller has checked their size).
    pub(crate) fn zeroed_with_triples(cards: &[usize]) -> Self {
        let mut c = Self::zeroed(cards);
        let d = cards.len();
        let mut three_off = Vec::with_capacity(choose3(d));
        let mut acc = 0;
        for (i, j, k) in triples(d) {
            three_off.push(acc);
            acc += cards[i] * cards[j] * cards[k];
        }
        c.three_off = three_off;
        c.three = vec![0; acc];
        c
    }

    /// Whether the 3-way tables are counted.
    pub fn has_triples(&self) -> bool {
        self.cards.len() < 3 || !self.three_off.is_empty()
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
        if !self.three_off.is_empty() {
            let mut t = 0;
            for i in 0..d {
                let a = code(i);
                for j in i + 1..d {
                    let ab = a * self.cards[j] + code(j);
                    for k in j + 1..d {
                        self.three[self.three_off[t] + ab * self.cards[k] + code(k)] += 1;
                        t += 1;
                    }
                }
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
        assert_eq!(self.three.len(), other.three.len(), "PairCounts::merge: one has 3-way tables, the other not");
        for (a, b) in self.three.iter_mut().zip(&other.three) {
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

    /// Mean total-variation distance between these tables and another counter's of the same shape,
    /// over every 1-way and every 2-way table (each table normalised by its own rows): how far a
    /// synthetic copy's tables are from the data's.
    pub fn mean_tvd(&self, other: &PairCounts) -> (f64, f64) {
        let d = self.cards.len();
        let tvd = |x: &[u64], y: &[u64]| {
            let (nx, ny) = (x.iter().sum::<u64>().max(1) as f64, y.iter().sum::<u64>().max(1) as f64);
            x.iter().zip(y).map(|(&p, &q)| (p as f64 / nx - q as f64 / ny).abs()).sum::<f64>() / 2.0
        };
        let one = (0..d).map(|j| tvd(self.one_way(j), other.one_way(j))).sum::<f64>() / d.max(1) as f64;
        let pairs: Vec<(usize, usize)> = pairs(d).collect();
        let two = if pairs.is_empty() {
            0.0
        } else {
            pairs.iter().map(|&(i, j)| tvd(self.two_way(i, j), other.two_way(i, j))).sum::<f64>() / pairs.len() as f64
        };
        (one, two)
    }

    /// The exact 3-way table of columns i < j < k, row-major c_i × c_j × c_k. Panics unless the
    /// counter has its 3-way part ([`super::Method::Tree2`]).
    pub fn three_way(&self, i: usize, j: usize, k: usize) -> &[u64] {
        assert!(i < j && j < k && k < self.cards.len(), "three_way needs i < j < k < d");
        assert!(!self.three_off.is_empty(), "three_way: these counts have no 3-way tables");
        let s = self.three_off[triple_index(self.cards.len(), i, j, k)];
        &self.three[s..s + self.cards[i] * self.cards[j] * self.cards[k]]
    }

    /// The 3-way table of three distinct columns in any order: the table of the sorted triple and
    /// the stride of each requested column in it.
    pub(crate) fn three_way_view(&self, cols: [usize; 3]) -> (&[u64], [usize; 3]) {
        let mut s = cols;
        s.sort_unstable();
        assert!(s[0] < s[1] && s[1] < s[2], "a 3-way table of a repeated column");
        let t = self.three_way(s[0], s[1], s[2]);
        let cards = &self.cards;
        let stride = |x: usize| {
            if x == s[2] {
                1
            } else if x == s[1] {
                cards[s[2]]
            } else {
                cards[s[1]] * cards[s[2]]
            }
        };
        (t, cols.map(stride))
    }

    /// The exact table of 1, 2 or 3 distinct columns in the given order (row-major, the first
    /// column slowest).
    pub fn table(&self, cols: &[usize]) -> Vec<u64> {
        let cards = &self.cards;
        match *cols {
            [j] => self.one_way(j).to_vec(),
            [a, b] => {
                let t = self.two_way(a.min(b), a.max(b));
                if a < b {
                    t.to_vec()
                } else {
                    super::model::transpose(t, cards[b], cards[a])
                }
            }
            [a, b, c] => {
                let (t, [sa, sb, sc]) = self.three_way_view([a, b, c]);
                let mut out = Vec::with_capacity(t.len());
                for x in 0..cards[a] {
                    for y in 0..cards[b] {
                        for z in 0..cards[c] {
                            out.push(t[x * sa + y * sb + z * sc]);
                        }
                    }
                }
                out
            }
            _ => panic!("table: 1 to 3 columns"),
        }
    }
}
