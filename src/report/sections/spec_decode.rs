//! The spec-decode section: acceptance, drafts and tokens per chunk per run and arm.

use crate::manifest::RunPlan;
use crate::rules::input::Artifact;

use crate::report::format::{fmt_num, fmt_percent, fmt_unit};
use crate::report::input::*;
use crate::report::view::*;

/// Section 8: spec-decode figures per arm, run and replica, with tokens per chunk.
pub fn spec_decode_view(
    plan: &RunPlan,
    artifacts: &[Artifact],
    runs: &[RunInfo],
    chunks: &[TokensPerChunk],
) -> Vec<SpecDecodeRow> {
    // One row per arm and cell: the runs' and replicas' figures averaged.
    let mut groups: Vec<((String, String), Vec<&Artifact>)> = Vec::new();
    for a in artifacts {
        let has = a
            .figures
            .spec_decode
            .iter()
            .any(|s| s.acceptance_rate.is_some());
        if !has {
            continue;
        }
        let cell = runs
            .iter()
            .find(|r| r.run_id == a.facts.run_id)
            .map(|r| r.cell_id.clone())
            .unwrap_or_default();
        let key = (a.facts.arm.clone(), cell);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(a),
            None => groups.push((key, vec![a])),
        }
    }
    groups.sort_by_key(|((arm, cell), _)| {
        (
            crate::rules::stage::plan_rank(plan, arm),
            super::decision::cell_label(cell),
        )
    });
    let mean = |values: Vec<f64>| {
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    groups
        .into_iter()
        .map(|((arm, cell), group)| {
            let specs: Vec<&crate::rules::input::SpecDecode> =
                group.iter().flat_map(|a| &a.figures.spec_decode).collect();
            let ids: Vec<&str> = group.iter().map(|a| a.facts.run_id.as_str()).collect();
            SpecDecodeRow {
                arm,
                run_id: ids.join(", "),
                cell: super::decision::cell_label(&cell),
                replica: group.len().to_string(),
                acceptance_rate: fmt_percent(mean(
                    specs.iter().filter_map(|s| s.acceptance_rate).collect(),
                )),
                mean_accepted_length: fmt_unit(
                    mean(
                        specs
                            .iter()
                            .filter_map(|s| s.mean_accepted_length)
                            .collect(),
                    ),
                    "tok",
                ),
                tokens_per_chunk: fmt_num(mean(
                    chunks
                        .iter()
                        .filter(|c| ids.contains(&c.run_id.as_str()))
                        .map(|c| c.tokens_per_chunk)
                        .collect(),
                )),
            }
        })
        .collect()
}
