//! Prompt content that requests of one run share on purpose: the blocks a trace's
//! `hash_ids` name (equal ids, byte-identical text) and the prefixes of prefix groups.
//!
//! Every shared text is seeded by the manifest seed, the run's salt, what it is (a trace
//! block or a group prefix) and its id, through SHA-256 into the same filler as every other
//! prompt body. Inside a run, equal ids give byte-identical text, so the server's prefix
//! cache can hold it once; another run's salt gives other text, so runs never share a cache
//! (cache hygiene: the salt is applied once per run to every block and group).
//!
//! Lengths are in filler words ("units"); how many tokens a unit makes is the server's
//! tokenizer's business, found by calibration, and realised prompt tokens are read back from
//! usage. A trace block's text is exactly as long for every row that names it, so equal
//! leading ids make equal leading bytes.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::filler::filler;

/// The seed of everything shared in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedContent {
    /// The manifest's `random_prefix_seed`.
    pub seed: u64,
    /// The run's salt.
    pub run_salt: String,
}

impl SharedContent {
    fn text(&self, domain: &[u8], id: u64, units: u32) -> String {
        let mut h = Sha256::new();
        h.update(domain);
        h.update(self.seed.to_le_bytes());
        h.update(self.run_salt.as_bytes());
        h.update([0]);
        h.update(id.to_le_bytes());
        let d = h.finalize();
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&d[..8]);
        filler(u64::from_le_bytes(seed), units)
    }

    /// The text of trace block `id`, `units` words long.
    pub fn block(&self, id: u64, units: u32) -> String {
        self.text(b"anvil-trace-block/v1\0", id, units)
    }

    /// The shared prefix of prefix group `group`, `units` words long.
    pub fn group_prefix(&self, group: u32, units: u32) -> String {
        self.text(b"anvil-prefix-group/v1\0", u64::from(group), units)
    }

    /// A trace row's prompt body: its blocks in order, each `units_per_block` words, the last
    /// cut to what is left of `input_units`; blocks joined by a blank line.
    pub fn trace_body(&self, hash_ids: &[u64], units_per_block: u32, input_units: u32) -> String {
        let mut left = input_units;
        let mut parts = Vec::with_capacity(hash_ids.len());
        for (i, id) in hash_ids.iter().enumerate() {
            if left == 0 {
                break;
            }
            let units = if i + 1 == hash_ids.len() {
                left
            } else {
                units_per_block.min(left)
            };
            left -= units;
            parts.push(self.block(*id, units));
        }
        parts.join("\n\n")
    }
}

/// G groups of P shared prompt tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixGroups {
    /// How many groups (G ≥ 1).
    pub groups: u32,
    /// Tokens of each group's shared prefix (P), calibrated like the rest of the prompt.
    pub shared_tokens: u64,
}

impl PrefixGroups {
    /// The share of all prompt tokens a prefix cache can serve when every request after its
    /// group's first finds that group's prefix still cached: `(n − G) / n × P / context`
    /// (0 when no group is used twice). What the declaration promises, before block rounding
    /// and eviction; the servers' hit rates are measured against it.
    pub fn expected_cacheable_share(&self, context: u64, requests: u64) -> f64 {
        let repeats = requests.saturating_sub(u64::from(self.groups));
        if requests == 0 || context == 0 {
            return 0.0;
        }
        repeats as f64 / requests as f64 * (self.shared_tokens.min(context) as f64) / context as f64
    }
}

/// The group of request `index` among `groups` prefix groups: requests take the groups in
/// turn (0, 1, …, G−1, 0, …), so every group is used from the first wave on.
pub fn group_of(index: u32, groups: u32) -> Option<u32> {
    (groups > 0).then(|| index % groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(salt: &str) -> SharedContent {
        SharedContent {
            seed: 38027,
            run_salt: salt.to_owned(),
        }
    }

    #[test]
    fn equal_ids_are_byte_identical_within_a_run_and_differ_across_runs() {
        let a = shared("run-a");
        // Rows opening with the same blocks share those bytes; the first differing block
        // makes the rest differ.
        let r1 = a.trace_body(&[0, 1, 2], 100, 300);
        let r2 = a.trace_body(&[0, 1, 7], 100, 260);
        let shared_prefix = format!("{}\n\n{}\n\n", a.block(0, 100), a.block(1, 100));
        assert!(r1.starts_with(&shared_prefix) && r2.starts_with(&shared_prefix));
        assert_ne!(r1, r2);
        assert!(r2.ends_with(&a.block(7, 60)));
        // Another run's salt: nothing in common with run a's block 0.
        let b = shared("run-b");
        assert_ne!(b.block(0, 100), a.block(0, 100));
        assert_ne!(b.group_prefix(0, 100), a.group_prefix(0, 100));
        // A group prefix is not a trace block of the same id.
        assert_ne!(a.group_prefix(0, 100), a.block(0, 100));
    }

    #[test]
    fn a_body_sends_only_the_words_its_input_asks_for() {
        let a = shared("run-a");
        assert!(a.block(3, 512).len() > a.block(3, 100).len());
        // Blocks beyond the input's words are not sent.
        assert_eq!(
            a.trace_body(&[0, 1, 2], 100, 150),
            format!("{}\n\n{}", a.block(0, 100), a.block(1, 50))
        );
    }

    #[test]
    fn groups_are_taken_in_turn() {
        assert_eq!(group_of(0, 0), None);
        let got: Vec<u32> = (0..7).filter_map(|i| group_of(i, 3)).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2, 0]);
    }
}
