//! Per-replica prefix cache with vLLM-style block hashing, a capacity and LRU eviction.
//!
//! A prompt's token ids are cut into full blocks of [`BLOCK`] tokens; block i's hash chains
//! block i−1's hash with its ids, so a block hash identifies the whole prefix up to it. A
//! request's cached tokens are the leading full blocks already held (never the whole prompt:
//! when every block hits, the last one is recomputed, as in vLLM). Only uncached tokens cost
//! prefill time. Unique random prefixes defeat the cache, as they do on a real server.
//!
//! The cache holds at most `capacity` tokens (whole blocks). A lookup touches the prompt's
//! blocks from its last to its first, so a prompt's tail is the least recently used part of it
//! and is evicted before its head, as vLLM frees a finished request's blocks tail first: an
//! eviction shortens a cached prefix, it never cuts one in the middle. A capacity of 0 is
//! prefix caching off (`--no-enable-prefix-caching`): nothing is kept, nothing hits.
//!
//! Every lookup reports what it hit and what it evicted, and [`PrefixCache::reset`] what it
//! dropped, for the truth file (`truth.rs`).

use std::num::NonZeroUsize;

use lru::LruCache;

/// Tokens per block.
pub const BLOCK: usize = 16;

/// The default capacity in tokens: 2^20 blocks (16,777,216 tokens).
pub const DEFAULT_CAPACITY_TOKENS: u64 = (1u64 << 20) * BLOCK as u64;

/// What one lookup found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lookup {
    /// Prompt tokens served from the cache.
    pub cached: u32,
    /// Tokens of other prefixes evicted to make room for this prompt's new blocks.
    pub evicted: u64,
}

#[derive(Debug)]
pub struct PrefixCache {
    /// Block hash → nothing, in recency order; `None` when caching is off.
    blocks: Option<LruCache<u64, ()>>,
}

impl Default for PrefixCache {
    fn default() -> Self {
        PrefixCache::with_capacity(DEFAULT_CAPACITY_TOKENS)
    }
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
    /// A cache of at most `tokens` tokens (rounded down to whole blocks; 0: caching off).
    pub fn with_capacity(tokens: u64) -> Self {
        let blocks = usize::try_from(tokens / BLOCK as u64).unwrap_or(usize::MAX);
        PrefixCache {
            blocks: NonZeroUsize::new(blocks).map(LruCache::new),
        }
    }

    /// Look `ids` up and remember its blocks.
    pub fn lookup_and_insert(&mut self, ids: &[u32]) -> Lookup {
        let Some(blocks) = self.blocks.as_mut() else {
            return Lookup::default();
        };
        let hashes: Vec<u64> = block_hashes(ids).collect();
        let hit = hashes.iter().take_while(|h| blocks.contains(h)).count();
        // The hit prefix first becomes the most recent, so the new blocks evict other
        // prompts' blocks before any of it; then the new blocks go in tail first, and the
        // whole prompt is touched tail first so that its head ends the most recent.
        for h in &hashes[..hit] {
            blocks.promote(h);
        }
        let mut evicted = 0u64;
        for h in hashes[hit..].iter().rev() {
            if let Some((old, ())) = blocks.push(*h, ())
                && old != *h
            {
                evicted += BLOCK as u64;
            }
        }
        for h in hashes.iter().rev() {
            blocks.promote(h);
        }
        let mut cached = hit * BLOCK;
        if cached > 0 && cached >= ids.len() {
            cached -= BLOCK;
        }
        Lookup {
            cached: cached as u32,
            evicted,
        }
    }

    /// Tokens held now.
    pub fn used_tokens(&self) -> u64 {
        self.blocks.as_ref().map_or(0, |b| (b.len() * BLOCK) as u64)
    }

    /// The capacity in tokens (0: caching off).
    pub fn capacity_tokens(&self) -> u64 {
        self.blocks
            .as_ref()
            .map_or(0, |b| (b.cap().get() * BLOCK) as u64)
    }

    /// Forget everything (a reset or a restart); returns the tokens dropped.
    pub fn reset(&mut self) -> u64 {
        let used = self.used_tokens();
        if let Some(b) = self.blocks.as_mut() {
            b.clear();
        }
        used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_prefixes_hit_in_whole_blocks() {
        let mut c = PrefixCache::default();
        let a: Vec<u32> = (0..100).collect();
        assert_eq!(c.lookup_and_insert(&a).cached, 0);
        assert_eq!(c.lookup_and_insert(&a).cached, 96);
        let mut b = a.clone();
        b[40] = 9999;
        assert_eq!(c.lookup_and_insert(&b).cached, 32);
        let exact: Vec<u32> = (0..32).collect();
        assert_eq!(c.lookup_and_insert(&exact).cached, 16);
        let mut d = a.clone();
        d[0] = 7;
        assert_eq!(c.lookup_and_insert(&d).cached, 0);
        // 6 blocks of a, 4 new of b, 6 of d.
        assert_eq!(c.reset(), 16 * (6 + 4 + 6));
        assert_eq!(c.lookup_and_insert(&a).cached, 0);
    }

    fn prompt(start: u32, blocks: usize) -> Vec<u32> {
        (start..start + (blocks * BLOCK) as u32).collect()
    }

    #[test]
    fn a_full_cache_evicts_the_least_recent_tails_first() {
        // Room for 8 blocks. A (4 blocks) and B (4 blocks) fill it; C (2 blocks) evicts the
        // two least recently touched blocks: A's tail (A touched its blocks last to first, so
        // its last block is the oldest).
        let mut c = PrefixCache::with_capacity(8 * BLOCK as u64);
        let (a, b, x) = (prompt(0, 4), prompt(10_000, 4), prompt(20_000, 2));
        assert_eq!(
            c.lookup_and_insert(&a),
            Lookup {
                cached: 0,
                evicted: 0
            }
        );
        assert_eq!(
            c.lookup_and_insert(&b),
            Lookup {
                cached: 0,
                evicted: 0
            }
        );
        assert_eq!(c.used_tokens(), 8 * BLOCK as u64);
        assert_eq!(
            c.lookup_and_insert(&x),
            Lookup {
                cached: 0,
                evicted: 2 * BLOCK as u64
            }
        );
        // A keeps its first two blocks: a shorter prefix, not a hole.
        let mut a5 = prompt(0, 4);
        a5.extend(prompt(50_000, 1));
        let hit = c.lookup_and_insert(&a5);
        assert_eq!(hit.cached, 2 * BLOCK as u32);
        // Its three new blocks evict the least recent: B's tail (B3, B2, B1), never A's head.
        assert_eq!(hit.evicted, 3 * BLOCK as u64);
        assert_eq!(c.used_tokens(), 8 * BLOCK as u64);
    }

    #[test]
    fn capacity_zero_is_caching_off() {
        let mut c = PrefixCache::with_capacity(0);
        let a = prompt(0, 4);
        assert_eq!(c.lookup_and_insert(&a), Lookup::default());
        assert_eq!(c.lookup_and_insert(&a), Lookup::default());
        assert_eq!((c.used_tokens(), c.capacity_tokens(), c.reset()), (0, 0, 0));
        assert_eq!(PrefixCache::with_capacity(15).capacity_tokens(), 0);
        assert_eq!(PrefixCache::with_capacity(40).capacity_tokens(), 32);
    }
}
