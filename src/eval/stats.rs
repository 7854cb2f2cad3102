//! The figures of an eval: rates, medians, and whether two runs of a suite differ beyond
//! noise (a two-proportion z-test for rates, a bootstrap interval for a difference of
//! medians), as plain functions on plain numbers.

/// The median of `xs` (none of none).
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Whether two rates (`a` of `n` against `b` of `m`) differ: the two-sided p-value of the
/// pooled two-proportion z-test (1 when either side has no runs or both rates are 0 or 1).
pub fn two_proportion_p(a: usize, n: usize, b: usize, m: usize) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let (p1, p2) = (a as f64 / n as f64, b as f64 / m as f64);
    let pooled = (a + b) as f64 / (n + m) as f64;
    let se = (pooled * (1.0 - pooled) * (1.0 / n as f64 + 1.0 / m as f64)).sqrt();
    if se == 0.0 {
        return if p1 == p2 { 1.0 } else { 0.0 };
    }
    let z = ((p1 - p2) / se).abs();
    2.0 * (1.0 - normal_cdf(z))
}

/// The standard normal distribution function (Abramowitz and Stegun 7.1.26; error < 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * z.abs() / std::f64::consts::SQRT_2);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-(z * z) / 2.0).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// A 95 % bootstrap interval for the difference of medians `median(b) - median(a)` (2,000
/// resamples, a fixed seed so a report reads the same twice); none when a side is empty.
pub fn median_difference_interval(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut diffs: Vec<f64> = (0..2_000)
        .map(|_| {
            let ra: Vec<f64> = (0..a.len()).map(|_| a[rng.below(a.len())]).collect();
            let rb: Vec<f64> = (0..b.len()).map(|_| b[rng.below(b.len())]).collect();
            median(&rb).unwrap_or(0.0) - median(&ra).unwrap_or(0.0)
        })
        .collect();
    diffs.sort_by(f64::total_cmp);
    Some((diffs[50], diffs[1_949]))
}

/// A small deterministic generator for the bootstrap.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_rates_read_as_statistics_books_give_them() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        // 45/50 against 30/50: pooled 0.75, z = 3.46, p = 0.00053.
        let p = two_proportion_p(45, 50, 30, 50);
        assert!((p - 0.00053).abs() < 0.0001, "{p}");
        // 3 of 3 against 2 of 3 cannot be told apart.
        assert!(two_proportion_p(3, 3, 2, 3) > 0.05);
        assert_eq!(two_proportion_p(1, 0, 1, 1), 1.0);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-4);
    }

    #[test]
    fn a_shift_of_medians_lies_in_its_interval_and_none_is_told_from_noise() {
        let a: Vec<f64> = (0..40).map(|i| 100.0 + (i % 7) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 50.0).collect();
        let (lo, hi) = median_difference_interval(&a, &b).unwrap();
        assert!(lo <= 50.0 && 50.0 <= hi && lo > 0.0, "({lo}, {hi})");
        let (lo, hi) = median_difference_interval(&a, &a).unwrap();
        assert!(lo <= 0.0 && 0.0 <= hi, "({lo}, {hi})");
    }
}
