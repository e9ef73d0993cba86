//! Summaries of repeated measurements, shared by the benchmarks.

/// The median of a list (the mean of the middle two for an even count); NaN when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => f64::NAN,
        len if len % 2 == 1 => sorted[middle],
        _ => (sorted[middle - 1] + sorted[middle]) / 2.0,
    }
}

/// The median of the finite values that exist, or `None` when there are none.
pub(crate) fn median_of_present(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let values: Vec<f64> = values.into_iter().flatten().filter(|v| v.is_finite()).collect();
    (!values.is_empty()).then(|| median(&values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
        assert_eq!(median_of_present([Some(4.0), None, Some(f64::NAN), Some(2.0)]), Some(3.0));
        assert_eq!(median_of_present([None, Some(f64::INFINITY)]), None);
    }
}
