//! Canary markers: the unique per-request token a reply must echo.
//!
//! The pattern is shared by the recorder (which puts a canary in every prompt), the
//! simulator (which echoes it, or another request's under the `contaminate` fault) and the
//! analysis (which checks that each reply carries its own canary and no other).
//!
//! Format: `ANV-` followed by exactly 12 lowercase hex digits (48 bits), e.g.
//! `ANV-3f9a0c17be42`. A match must not be followed by another hex digit or preceded by
//! an alphanumeric character, so `XANV-…` or a 13-digit run is not a canary.

use sha2::{Digest, Sha256};

/// The literal prefix of every canary.
pub const PREFIX: &str = "ANV-";
/// Number of hex digits after the prefix.
pub const HEX_DIGITS: usize = 12;
/// Total length of a canary in bytes.
pub const LEN: usize = PREFIX.len() + HEX_DIGITS;

/// The canary of request `request_index` in a run, derived from the manifest seed and the
/// run's salt so that canaries differ between runs and never repeat within one.
pub fn make(seed: u64, run_salt: &str, request_index: u64) -> String {
    let mut h = Sha256::new();
    h.update(b"anvil-canary/v1\0");
    h.update(seed.to_le_bytes());
    h.update(run_salt.as_bytes());
    h.update([0]);
    h.update(request_index.to_le_bytes());
    let digest = h.finalize();
    format!("{PREFIX}{}", &hex::encode(digest)[..HEX_DIGITS])
}

/// Whether `s` is exactly one canary.
pub fn is_canary(s: &str) -> bool {
    s.len() == LEN
        && s.starts_with(PREFIX)
        && s[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Every canary in `text`, in order of appearance (duplicates kept).
pub fn find_all(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find(PREFIX) {
        let start = from + pos;
        let end = start + LEN;
        let preceded = start > 0 && bytes[start - 1].is_ascii_alphanumeric();
        let followed = bytes.get(end).is_some_and(|b| b.is_ascii_hexdigit());
        // (`get`: the 12 bytes after the prefix may end inside a multi-byte character)
        let candidate = text.get(start..end).filter(|c| is_canary(c));
        if let Some(canary) = candidate.filter(|_| !preceded && !followed) {
            out.push(canary);
            from = end;
        } else {
            from = start + 1;
        }
    }
    out
}

/// The first canary in `text`, if any.
pub fn find_first(text: &str) -> Option<&str> {
    find_all(text).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_cut_inside_a_multibyte_character_is_no_canary_and_no_panic() {
        assert_eq!(
            find_all("ANV-0123456789aé and ANV-0123456789ab"),
            ["ANV-0123456789ab"]
        );
        assert!(find_all("ANV-éééééé").is_empty());
    }

    #[test]
    fn made_canaries_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            let c = make(38027, "salt", i);
            assert!(is_canary(&c), "{c}");
            assert!(seen.insert(c));
        }
        assert_ne!(make(1, "a", 0), make(1, "b", 0));
        assert_ne!(make(1, "a", 0), make(2, "a", 0));
    }

    #[test]
    fn finds_canaries_in_text_and_rejects_near_misses() {
        let t =
            "ANV-0123456789ab then ANV-ffffffffffff. XANV-0123456789ab ANV-0123456789abc ANV-01234";
        assert_eq!(find_all(t), vec!["ANV-0123456789ab", "ANV-ffffffffffff"]);
        assert_eq!(find_first("no marker"), None);
        assert_eq!(find_all("ANV-ANV-0123456789ab"), vec!["ANV-0123456789ab"]);
        assert!(!is_canary("ANV-0123456789AB"));
    }
}
