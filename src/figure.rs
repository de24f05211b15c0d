//! The one number policy of anvil's human-facing text (the report, `compare`, `check`,
//! `summary` and the rules' reasons): three significant figures (at most three decimals),
//! thousands separated, a true minus sign (−, U+2212), and a value that rounds to zero
//! without a sign. Machine formats (`--format json|csv`) carry full precision instead.

/// `v` with three significant figures (at most three decimals), thousands separated, a
/// true minus sign: `1,523`, `87.4`, `0.412`, `−4.10`. `v` must be finite.
pub fn sig3(v: f64) -> String {
    let decimals = |a: f64| {
        if a >= 100.0 || a == 0.0 {
            0
        } else if a >= 10.0 {
            1
        } else if a >= 1.0 {
            2
        } else {
            3
        }
    };
    // Rounding can carry into the next magnitude (99.97 → 100.0): decide the decimals
    // again on the rounded figure.
    let first = decimals(v.abs());
    let rounded: f64 = format!("{:.first$}", v.abs()).parse().unwrap_or(v.abs());
    let d = if rounded == 0.0 {
        first
    } else {
        decimals(rounded).min(first)
    };
    group_thousands(&format!("{v:.d$}"))
}

/// An integer bare (`1790000420`, `−3`: counts and timestamps stay as they are), anything
/// else as [`sig3`].
pub fn count_or_sig3(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let text = format!("{v:.0}");
        match text.strip_prefix('-') {
            Some(rest) if rest != "0" => format!("−{rest}"),
            Some(rest) => rest.to_owned(),
            None => text,
        }
    } else {
        sig3(v)
    }
}

/// `-1234.5` → `−1,234.5`; `-0.0` → `0.0`.
pub fn group_thousands(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        // A value that rounds to zero keeps no sign.
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => ("", rest),
        Some(rest) => ("−", rest),
        None => ("", text),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_figures_one_minus_sign() {
        assert_eq!(sig3(648.784), "649");
        assert_eq!(sig3(-21.127), "−21.1");
        assert_eq!(sig3(99.97), "100");
        assert_eq!(sig3(9.999), "10.0");
        assert_eq!(sig3(0.4123), "0.412");
        assert_eq!(sig3(-0.0001), "0.000");
        assert_eq!(sig3(1523.0), "1,523");
        assert_eq!(count_or_sig3(90.0), "90");
        assert_eq!(count_or_sig3(-3.0), "−3");
        assert_eq!(count_or_sig3(23.333), "23.3");
    }
}
