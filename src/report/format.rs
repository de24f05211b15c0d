//! The one number policy of anvil's human-facing text — the report, `compare`, `check` and
//! `summary` — so one figure reads the same everywhere: three significant figures (at most
//! three decimals), thousands separated, a true minus sign on differences, `×` on ratios,
//! `n/a` for a figure that is absent or not a finite number. Machine formats (`--format
//! json|csv`) carry full precision instead.

/// Placeholder for a figure that is absent or not a finite number.
pub const NA: &str = "n/a";

/// A figure with three significant figures (at most three decimals), thousands separated:
/// `1,523`, `87.4`, `0.412`; `n/a` when absent or not finite.
pub fn fmt_num(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) => {
            let a = v.abs();
            let decimals = if a >= 100.0 || a == 0.0 {
                0
            } else if a >= 10.0 {
                1
            } else if a >= 1.0 {
                2
            } else {
                3
            };
            group_thousands(&format!("{v:.decimals$}"))
        }
    }
}

/// A figure with its unit: `1,523 tok/s`, `87.4 ms`.
pub fn fmt_unit(value: Option<f64>, unit: &str) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        v => format!("{} {unit}", fmt_num(v)),
    }
}

/// A signed difference: `+12.3`, `−4.10` (true minus sign), `0`.
pub fn fmt_diff(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) if v > 0.0 => format!("+{}", fmt_num(Some(v))),
        Some(v) if v < 0.0 => format!("−{}", fmt_num(Some(-v))),
        Some(_) => "0".to_owned(),
    }
}

/// A ratio: `×1.23`.
pub fn fmt_ratio(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) => format!("×{v:.2}"),
    }
}

/// A fraction 0–1 as a percentage: `73.4%`.
pub fn fmt_percent(value: Option<f64>) -> String {
    match value.filter(|v| v.is_finite()) {
        None => NA.to_owned(),
        Some(v) => format!("{:.1}%", v * 100.0),
    }
}

/// An interval: `[81.2, 93.6]`; `n/a` unless both ends are finite.
pub fn fmt_interval(low: Option<f64>, high: Option<f64>) -> String {
    match (
        low.filter(|v| v.is_finite()),
        high.filter(|v| v.is_finite()),
    ) {
        (Some(l), Some(h)) => format!("[{}, {}]", fmt_num(Some(l)), fmt_num(Some(h))),
        _ => NA.to_owned(),
    }
}

fn group_thousands(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
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
