//! One run from several client hosts: each shard's part of `run.json`, and the rules that
//! make the shards of one run group one logical run.
//!
//! Shard I of N sends the cell's requests whose index ≡ I (mod N), with the prompts and
//! canaries a single-host run would send (one prompt salt derived from the run group). Every
//! shard writes an ordinary artifact whose `run_id` is the run group's, so every view, which
//! groups by `run_id`, computes over the union's raw rows. Each shard's clock starts (t = 0)
//! at the published start instant as its host's clock reads it, so the shards' times share one
//! timeline, up to the hosts' clock errors, which each shard records ([`HostClock`]).

use serde::{Deserialize, Serialize};

/// `run.json` `shard`: which part of its run group this artifact is, when it started, and the
/// state of its host's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// This shard's index, 0-based.
    pub index: u32,
    /// How many shards the run group has.
    pub of: u32,
    /// The published instant every shard released its first wave at (RFC 3339 UTC): t = 0.
    pub start_at_utc: String,
    /// How late this shard released its first wave, by its own clock (ms; 0 when on time).
    pub started_late_ms: f64,
    /// The latest a shard may start and still run (ms after the instant).
    pub start_margin_ms: f64,
    /// The host, as its name says it.
    pub host: String,
    /// The host's clock when the run started.
    pub clock: HostClock,
}

/// A host's clock as the kernel reports it (`adjtimex(2)`), and the NTP/chrony source when
/// known: how far the host's UTC may be from true UTC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostClock {
    /// Whether the kernel says the clock is synchronised (STA_UNSYNC clear).
    pub synchronized: bool,
    /// The kernel's current offset estimate, ns.
    pub offset_ns: Option<i64>,
    /// The kernel's maximum error, ns: the bound on |host UTC − true UTC|.
    pub max_error_ns: Option<i64>,
    /// The kernel's estimated error, ns.
    pub est_error_ns: Option<i64>,
    /// The time source, when a local daemon names it (chrony's reference).
    pub source: Option<String>,
}

impl HostClock {
    /// The bound on this host's UTC error used when nothing is known: a clock the kernel
    /// calls unsynchronised, or one it gives no maximum error for, is trusted to no better
    /// than 1 s.
    pub const UNKNOWN_ERROR_NS: i64 = 1_000_000_000;

    /// The bound on |host UTC − true UTC| to assume, ns.
    pub fn error_bound_ns(&self) -> i64 {
        match (self.synchronized, self.max_error_ns) {
            (true, Some(e)) if e >= 0 => e,
            _ => Self::UNKNOWN_ERROR_NS,
        }
    }
}

/// The bound on how far two shards' timelines may be apart: the sum of the two largest
/// hosts' error bounds (one host's clock fast, another's slow). Shards on one host (by name)
/// read one clock: zero for a single host.
pub fn timeline_uncertainty_ns(clocks: &[(&str, &HostClock)]) -> i64 {
    let mut by_host: std::collections::BTreeMap<&str, i64> = Default::default();
    for (host, c) in clocks {
        let bound = by_host.entry(host).or_default();
        *bound = (*bound).max(c.error_bound_ns());
    }
    let mut bounds: Vec<i64> = by_host.into_values().collect();
    bounds.sort_unstable_by(|a, b| b.cmp(a));
    match bounds.as_slice() {
        [a, b, ..] => a.saturating_add(*b),
        _ => 0,
    }
}

/// Whether shard `index` of `of` sends request `request_index`.
pub fn sends(index: u32, of: u32, request_index: u32) -> bool {
    of <= 1 || request_index % of == index
}

/// What is wrong with the shards of one run group taken together: the shards present (by
/// index, with where each is), the run group's shard count, the cell's measured request count,
/// and every shard's measured request indices. Every shard once, every index exactly once.
pub fn group_problems(
    of: u32,
    shards: &[(u32, String)],
    total_requests: u64,
    measured: &[u32],
) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: std::collections::BTreeMap<u32, Vec<&str>> = Default::default();
    for (index, at) in shards {
        seen.entry(*index).or_default().push(at);
    }
    let missing: Vec<String> = (0..of)
        .filter(|i| !seen.contains_key(i))
        .map(|i| format!("{i}/{of}"))
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "shard{} {} {} missing (killed, failed, or not uploaded): the run is \
             incomplete",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" }
        ));
    }
    for (index, at) in &seen {
        if at.len() > 1 {
            out.push(format!(
                "shard {index}/{of} appears {} times: {}",
                at.len(),
                at.join(", ")
            ));
        }
        if *index >= of {
            out.push(format!(
                "shard {index} is beyond the group's {of} shards: {}",
                at[0]
            ));
        }
    }
    if out.is_empty() {
        let mut sorted = measured.to_vec();
        sorted.sort_unstable();
        let twice: Vec<u32> = sorted
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        let absent = (0..total_requests)
            .filter(|i| sorted.binary_search(&(*i as u32)).is_err())
            .count();
        if let Some(i) = twice.first() {
            out.push(format!(
                "request {i} was recorded by more than one shard ({} indices twice)",
                twice.len()
            ));
        }
        if absent > 0 {
            out.push(format!(
                "{absent} of the cell's {total_requests} measured requests are in no shard"
            ));
        }
        if let Some(beyond) = sorted.iter().find(|i| u64::from(**i) >= total_requests) {
            out.push(format!(
                "request {beyond} is beyond the cell's {total_requests} measured requests"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(sync: bool, max: Option<i64>) -> HostClock {
        HostClock {
            synchronized: sync,
            offset_ns: Some(0),
            max_error_ns: max,
            est_error_ns: None,
            source: None,
        }
    }

    #[test]
    fn every_index_once_over_the_shards() {
        let shards: Vec<(u32, String)> = (0..3).map(|i| (i, format!("s{i}"))).collect();
        let all: Vec<u32> = (0..10).collect();
        assert!(group_problems(3, &shards, 10, &all).is_empty());
        let p = group_problems(3, &shards[..2], 10, &all);
        assert!(p[0].contains("shard 2/3 is missing"), "{p:?}");
        let mut twice = shards.clone();
        twice.push((1, "again".into()));
        let p = group_problems(3, &twice, 10, &all);
        assert!(
            p[0].contains("shard 1/3 appears 2 times: s1, again"),
            "{p:?}"
        );
        let mut dup = all.clone();
        dup.push(4);
        assert!(group_problems(3, &shards, 10, &dup)[0].contains("request 4"));
        assert!(group_problems(3, &shards, 10, &all[..9])[0].contains("1 of the cell's 10"));
    }

    #[test]
    fn indices_modulo_the_shards() {
        let mine: Vec<u32> = (0..10).filter(|i| sends(1, 3, *i)).collect();
        assert_eq!(mine, [1, 4, 7]);
        assert!((0..5).all(|i| sends(0, 1, i)));
    }

    #[test]
    fn uncertainty_is_the_two_largest_bounds() {
        let (a, b, c) = (
            clock(true, Some(5)),
            clock(true, Some(7)),
            clock(true, Some(1)),
        );
        assert_eq!(
            timeline_uncertainty_ns(&[("a", &a), ("b", &b), ("c", &c)]),
            12
        );
        assert_eq!(timeline_uncertainty_ns(&[("a", &a)]), 0);
        // One host, one clock.
        assert_eq!(timeline_uncertainty_ns(&[("h", &a), ("h", &b)]), 0);
        let unsynced = clock(false, Some(5));
        assert_eq!(
            timeline_uncertainty_ns(&[("a", &a), ("b", &unsynced)]),
            5 + HostClock::UNKNOWN_ERROR_NS
        );
    }
}
