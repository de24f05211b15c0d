//! Per-replica prefix cache with vLLM-style block hashing.
//!
//! A prompt's token ids are cut into full blocks of [`BLOCK`] tokens; block i's hash chains
//! block i−1's hash with its ids, so a block hash identifies the whole prefix up to it. A
//! request's cached tokens are the leading full blocks already seen (never the whole prompt:
//! when every block hits, the last one is recomputed, as in vLLM). Only uncached tokens cost prefill
//! time. Unique random prefixes defeat the cache, as they do on a real server.

use std::collections::HashSet;

/// Tokens per block.
pub const BLOCK: usize = 16;
/// Blocks kept before the cache is emptied (a crude eviction bound).
const MAX_BLOCKS: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct PrefixCache {
    blocks: HashSet<u64>,
}

fn block_hashes(ids: &[u32]) -> impl Iterator<Item = u64> + '_ {
    ids.chunks_exact(BLOCK)
        .scan(0xcbf2_9ce4_8422_2325u64, |h, block| {
            let mut x = *h;
            for id in block {
                for b in id.to_le_bytes() {
                    x ^= b as u64;
                    x = x.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
            *h = x;
            Some(x)
        })
}

impl PrefixCache {
    /// Look `ids` up and remember its blocks; returns the number of cached tokens.
    pub fn lookup_and_insert(&mut self, ids: &[u32]) -> u32 {
        if self.blocks.len() > MAX_BLOCKS {
            self.blocks.clear();
        }
        let mut cached = 0usize;
        let mut matching = true;
        for h in block_hashes(ids) {
            if matching && self.blocks.contains(&h) {
                cached += BLOCK;
            } else {
                matching = false;
                self.blocks.insert(h);
            }
        }
        if cached > 0 && cached >= ids.len() {
            cached -= BLOCK;
        }
        cached as u32
    }

    /// Forget everything (a restart).
    pub fn clear(&mut self) {
        self.blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_prefixes_hit_in_whole_blocks() {
        let mut c = PrefixCache::default();
        let a: Vec<u32> = (0..100).collect();
        assert_eq!(c.lookup_and_insert(&a), 0);
        assert_eq!(c.lookup_and_insert(&a), 96);
        let mut b = a.clone();
        b[40] = 9999;
        assert_eq!(c.lookup_and_insert(&b), 32);
        let exact: Vec<u32> = (0..32).collect();
        assert_eq!(c.lookup_and_insert(&exact), 16);
        let mut d = a.clone();
        d[0] = 7;
        assert_eq!(c.lookup_and_insert(&d), 0);
        c.clear();
        assert_eq!(c.lookup_and_insert(&a), 0);
    }
}
