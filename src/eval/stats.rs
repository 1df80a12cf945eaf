//! Pure statistics of repeated runs: unbiased pass@k and pass^k, Wilson intervals, medians.

/// C(n, k) as a float; 0 when k > n. A running product keeps it exact for small n.
pub fn choose(n: u64, k: u64) -> f64 {
    if k > n {
        return 0.0;
    }
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// The chance that at least one of k runs drawn from n (c of them passing) passes:
/// 1 - C(n-c, k) / C(n, k). None when k is 0 or more than n.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    Some(1.0 - choose(n - c, k) / choose(n, k))
}

/// The chance that all of k runs drawn from n (c of them passing) pass: C(c, k) / C(n, k).
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    Some(choose(c, k) / choose(n, k))
}

/// z of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval of c successes in n trials; (0, 1) when n is 0.
pub fn wilson(c: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p, z2) = (n as f64, c as f64 / n as f64, Z95 * Z95);
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Whether two pass rates differ beyond noise: their 95% Wilson intervals do not overlap.
pub fn beyond_noise(a: (u64, u64), b: (u64, u64)) -> bool {
    let (a_lo, a_hi) = wilson(a.0, a.1);
    let (b_lo, b_hi) = wilson(b.0, b.1);
    a.1 > 0 && b.1 > 0 && (a_hi < b_lo || b_hi < a_lo)
}

/// The median; the mean of the middle two for an even count. None for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        len if len % 2 == 1 => Some(sorted[mid]),
        _ => Some((sorted[mid - 1] + sorted[mid]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn pass_at_k_of_five_runs_with_two_passes() {
        let expected = [0.4, 0.7, 0.9, 1.0, 1.0];
        for (k, want) in (1..=5).zip(expected) {
            assert!(close(pass_at_k(5, 2, k), want), "pass@{k}");
        }
        assert_eq!(pass_at_k(5, 2, 0), None);
        assert_eq!(pass_at_k(5, 2, 6), None);
    }

    #[test]
    fn pass_hat_k_of_five_runs_with_two_passes() {
        let expected = [0.4, 0.1, 0.0, 0.0, 0.0];
        for (k, want) in (1..=5).zip(expected) {
            assert!(close(pass_hat_k(5, 2, k), want), "pass^{k}");
        }
        assert!(close(pass_hat_k(4, 4, 4), 1.0));
        assert!(close(pass_at_k(4, 0, 4), 0.0));
    }

    #[test]
    fn binomials() {
        assert_eq!(choose(5, 2), 10.0);
        assert_eq!(choose(10, 0), 1.0);
        assert_eq!(choose(3, 4), 0.0);
        assert_eq!(choose(50, 25), 126_410_606_437_752.0);
    }

    #[test]
    fn wilson_intervals() {
        let (lo, hi) = wilson(8, 10);
        assert!((lo - 0.490_162).abs() < 1e-6 && (hi - 0.943_318).abs() < 1e-6);
        let (lo, hi) = wilson(0, 10);
        assert!(lo.abs() < 1e-12 && (hi - 0.277_533).abs() < 1e-6);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn noise() {
        assert!(!beyond_noise((3, 5), (4, 5)));
        assert!(beyond_noise((2, 40), (38, 40)));
        assert!(!beyond_noise((0, 0), (5, 5)));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
