//! Which requests a shard sends, and what every shard of a run group derives alike without
//! talking to the others: the run group id and the prompt salt.
//!
//! `--shard I/N` (0-based I), `--shard auto/N` (I from `JOB_COMPLETION_INDEX`, the index of a
//! Kubernetes Indexed Job's pod, else `SLURM_PROCID`), `--shard auto` (I and N from
//! `SLURM_PROCID` and `SLURM_NTASKS`).

use sha2::{Digest, Sha256};

/// Shard `index` of `of`: it sends the requests whose index ≡ `index` (mod `of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: u32,
    pub of: u32,
}

/// The most shards a run group may have.
pub const MAX_SHARDS: u32 = 4096;

/// `--shard` as written: a fixed shard (`I/N`), or one whose index (`auto/N`), or index and
/// count (`auto`), the scheduler's environment gives when the run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardArg {
    Fixed(ShardSpec),
    /// `auto/N`: the index from `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job) or
    /// `SLURM_PROCID`.
    AutoIndex {
        of: u32,
    },
    /// `auto`: index and count from `SLURM_PROCID` and `SLURM_NTASKS`.
    Auto,
}

fn whole(what: &str, v: &str) -> Result<u32, String> {
    v.trim()
        .parse::<u32>()
        .map_err(|_| format!("{what} `{v}` is not a whole number"))
}

impl std::str::FromStr for ShardArg {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once('/') {
            Some(("auto", n)) => Ok(ShardArg::AutoIndex {
                of: ShardSpec::count(whole("the shard count", n)?)?,
            }),
            Some((i, n)) => {
                ShardSpec::new(whole("the shard index", i)?, whole("the shard count", n)?)
                    .map(ShardArg::Fixed)
            }
            None if text == "auto" => Ok(ShardArg::Auto),
            None => Err("expected I/N (e.g. 0/3), auto/N or auto".to_owned()),
        }
    }
}

impl std::fmt::Display for ShardArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardArg::Fixed(s) => write!(f, "{}/{}", s.index, s.of),
            ShardArg::AutoIndex { of } => write!(f, "auto/{of}"),
            ShardArg::Auto => f.write_str("auto"),
        }
    }
}

impl ShardArg {
    /// The shard this process is, reading the environment through `env` for `auto`.
    pub fn resolve(self, env: &dyn Fn(&str) -> Option<String>) -> Result<ShardSpec, String> {
        match self {
            ShardArg::Fixed(spec) => Ok(spec),
            ShardArg::AutoIndex { of } => {
                let (var, value) = ["JOB_COMPLETION_INDEX", "SLURM_PROCID"]
                    .iter()
                    .find_map(|v| env(v).map(|value| (*v, value)))
                    .ok_or(
                        "auto/N takes the shard's index from JOB_COMPLETION_INDEX (a Kubernetes \
                         Indexed Job) or SLURM_PROCID (srun), and neither is set: give I/N",
                    )?;
                ShardSpec::new(whole(var, &value)?, of)
            }
            ShardArg::Auto => {
                let (Some(i), Some(n)) = (env("SLURM_PROCID"), env("SLURM_NTASKS")) else {
                    return Err(
                        "auto takes the index and count from SLURM_PROCID and SLURM_NTASKS \
                         (srun), which are not set: in a Kubernetes Indexed Job give auto/N"
                            .to_owned(),
                    );
                };
                ShardSpec::new(whole("SLURM_PROCID", &i)?, whole("SLURM_NTASKS", &n)?)
            }
        }
    }
}

impl ShardSpec {
    /// Parse `--shard`, reading the environment through `env` for `auto`.
    pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<ShardSpec, String> {
        text.parse::<ShardArg>()?.resolve(env)
    }

    /// Shard `index` of `of`, both checked.
    pub fn new(index: u32, of: u32) -> Result<ShardSpec, String> {
        let of = Self::count(of)?;
        if index >= of {
            return Err(format!(
                "shard {index} of {of}: the index is 0-based, below the count"
            ));
        }
        Ok(ShardSpec { index, of })
    }

    fn count(of: u32) -> Result<u32, String> {
        if of == 0 || of > MAX_SHARDS {
            return Err(format!(
                "the shard count must be between 1 and {MAX_SHARDS}"
            ));
        }
        Ok(of)
    }

    /// Whether this shard sends request `request_index`.
    pub fn sends(&self, request_index: u32) -> bool {
        crate::artifact::shard::sends(self.index, self.of, request_index)
    }

    /// The artifact folder of this shard beneath its cell's (or repeat's) folder.
    pub fn folder(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.of)
    }
}

/// The run group id every shard derives alike from what they are all given: the campaign,
/// arm, cell, repeat, shard count and the published start instant (UTC ns).
pub fn run_group(
    campaign_id: &str,
    arm: &str,
    cell_id: &str,
    repeat: u32,
    of: u32,
    start_at_utc_ns: i128,
) -> String {
    let mut h = Sha256::new();
    for part in [campaign_id, arm, cell_id] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update(repeat.to_le_bytes());
    h.update(of.to_le_bytes());
    h.update(start_at_utc_ns.to_le_bytes());
    let digest = hex::encode(h.finalize());
    let stamp = crate::clock::format_utc_ns(start_at_utc_ns);
    // 20261203T150000Z-group-<8 hex>: sorts by start, says it is a group.
    let compact: String = stamp
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    format!("{compact}Z-group-{}", &digest[..8])
}

/// The prompt salt of a run group: every shard sends the prompts and canaries a single host
/// would send with it.
pub fn prompt_salt(run_group: &str) -> String {
    let digest = hex::encode(Sha256::digest(
        format!("prompt-salt:{run_group}").as_bytes(),
    ));
    digest[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn shards_from_flags_and_schedulers() {
        let none = env(&[]);
        assert_eq!(
            ShardSpec::parse("1/3", &none),
            Ok(ShardSpec { index: 1, of: 3 })
        );
        let k8s = env(&[("JOB_COMPLETION_INDEX", "2")]);
        assert_eq!(
            ShardSpec::parse("auto/4", &k8s),
            Ok(ShardSpec { index: 2, of: 4 })
        );
        let slurm = env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "8")]);
        assert_eq!(
            ShardSpec::parse("auto", &slurm),
            Ok(ShardSpec { index: 3, of: 8 })
        );
        assert_eq!(
            ShardSpec::parse("auto/8", &slurm),
            Ok(ShardSpec { index: 3, of: 8 })
        );
        for bad in ["3/3", "0/0", "x/2", "1", "auto/4"] {
            assert!(ShardSpec::parse(bad, &none).is_err(), "{bad}");
        }
        assert!(
            ShardSpec::parse("auto", &k8s)
                .unwrap_err()
                .contains("auto/N")
        );
        for text in ["1/3", "auto/4", "auto"] {
            assert_eq!(text.parse::<ShardArg>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn every_shard_derives_the_same_group_and_salt() {
        let a = run_group("c", "TP1", "cell", 1, 3, 1_796_000_000_000_000_000);
        let b = run_group("c", "TP1", "cell", 1, 3, 1_796_000_000_000_000_000);
        assert_eq!(a, b);
        assert!(a.contains("-group-"), "{a}");
        assert_ne!(
            a,
            run_group("c", "TP1", "cell", 1, 3, 1_796_000_000_000_000_001)
        );
        assert_ne!(
            a,
            run_group("c", "TP2", "cell", 1, 3, 1_796_000_000_000_000_000)
        );
        assert_eq!(prompt_salt(&a), prompt_salt(&b));
        assert_eq!(prompt_salt(&a).len(), 16);
    }
}
