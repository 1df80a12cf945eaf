//! A vector kept sorted, for fast lookups.

#[derive(Debug, Default)]
pub struct SortedVec {
    items: Vec<i64>,
}

impl SortedVec {
    pub fn new() -> Self {
        Self::default()
    }

    /// Where `value` is, or where it would go to keep the order.
    fn position(&self, value: i64) -> Result<usize, usize> {
        if self.items.is_empty() {
            return Err(0);
        }
        let (mut lo, mut hi) = (0, self.items.len() - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.items[mid].cmp(&value) {
                std::cmp::Ordering::Equal => return Ok(mid),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Err(lo)
    }

    pub fn insert(&mut self, value: i64) {
        match self.position(value) {
            Ok(at) | Err(at) => self.items.insert(at, value),
        }
    }

    pub fn contains(&self, value: i64) -> bool {
        self.position(value).is_ok()
    }

    pub fn as_slice(&self) -> &[i64] {
        &self.items
    }
}
