//! An arm's serving topology (`TPn`: one replica over n GPUs; `DPn`: n single-GPU replicas)
//! and the GPUs it uses, read from its configuration keys (`gpus`, else derived from
//! `topology`). The rules, the `runs` table and every per-GPU figure read them from here.

use std::fmt;

use serde::Serialize;

/// The configuration key naming an arm's serving topology (`TP1`, `TP2`, `DP2`, …).
pub const TOPOLOGY_KEY: &str = "topology";

/// The configuration key recording the GPUs an arm uses.
pub const GPUS_KEY: &str = "gpus";

/// How many GPUs an arm uses, and whether the count was derived from its topology rather
/// than recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gpus {
    pub count: u32,
    /// True when read off the topology name (`TP2` → 2), not from a `gpus` key.
    pub derived: bool,
}

impl fmt::Display for Gpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.derived {
            write!(f, "{} (from topology)", self.count)
        } else {
            write!(f, "{}", self.count)
        }
    }
}

/// A serving topology: tensor parallel over n GPUs in one replica, or n data-parallel
/// replicas of one GPU each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Topology {
    /// `TPn`: one replica sharded over n GPUs.
    Tp(u32),
    /// `DPn`: n independent single-GPU replicas.
    Dp(u32),
}

impl Topology {
    /// Parse `TPn` or `DPn` (n ≥ 1; letters in either case).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("topology `{text}` is not TPn or DPn");
        let trimmed = text.trim();
        if !trimmed.is_ascii() || trimmed.len() < 3 {
            return Err(bad());
        }
        let (kind, digits) = trimmed.split_at(2);
        let n: u32 = digits.parse().map_err(|_| bad())?;
        if n == 0 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        match kind.to_ascii_uppercase().as_str() {
            "TP" => Ok(Topology::Tp(n)),
            "DP" => Ok(Topology::Dp(n)),
            _ => Err(bad()),
        }
    }

    /// GPUs the topology uses: n for both `TPn` and `DPn`.
    pub fn gpus(self) -> u32 {
        match self {
            Topology::Tp(n) | Topology::Dp(n) => n,
        }
    }

    /// Replicas the topology implies: 1 for `TPn`, n for `DPn`.
    pub fn replicas(self) -> u32 {
        match self {
            Topology::Tp(_) => 1,
            Topology::Dp(n) => n,
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Topology::Tp(n) => write!(f, "TP{n}"),
            Topology::Dp(n) => write!(f, "DP{n}"),
        }
    }
}

/// The GPUs of an arm whose effective configuration `setting` reads: its `gpus` key (a
/// positive integer), else derived from its topology (`TPn` and `DPn` use n), else unknown.
pub fn gpus<'a>(setting: impl Fn(&str) -> Option<&'a str>) -> Option<Gpus> {
    if let Some(count) = setting(GPUS_KEY).and_then(|v| v.trim().parse::<u32>().ok()) {
        return (count > 0).then_some(Gpus {
            count,
            derived: false,
        });
    }
    match setting(TOPOLOGY_KEY).map(Topology::parse) {
        Some(Ok(topology)) => Some(Gpus {
            count: topology.gpus(),
            derived: true,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_count_wins_over_the_topology_and_nonsense_is_unknown() {
        let of = |pairs: &'static [(&'static str, &'static str)]| {
            gpus(|k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v))
        };
        assert_eq!(
            of(&[("topology", "TP2")]),
            Some(Gpus {
                count: 2,
                derived: true
            })
        );
        assert_eq!(
            of(&[("topology", "dp4"), ("gpus", "8")]),
            Some(Gpus {
                count: 8,
                derived: false
            })
        );
        assert_eq!(of(&[("topology", "TP0")]), None);
        assert_eq!(of(&[("topology", "EP2")]), None);
        assert_eq!(of(&[]), None);
        assert_eq!(Topology::parse("DP2").map(Topology::replicas), Ok(2));
    }
}
