//! The SQL files of `queries/`, embedded in the binary so it works from any directory, in
//! the order they are loaded (their numeric prefix: a view only uses tables and views
//! loaded before it). Each file holds one `CREATE VIEW <name>` whose name is the file name
//! without its prefix, and opens with a comment stating the definition in words.

/// One view definition file.
#[derive(Debug, Clone, Copy)]
pub struct ViewFile {
    /// The view's name.
    pub name: &'static str,
    /// File name under `queries/`.
    pub file: &'static str,
    /// The file's text.
    pub sql: &'static str,
}

macro_rules! view {
    ($name:literal, $file:literal) => {
        ViewFile {
            name: $name,
            file: $file,
            sql: include_str!(concat!("../../queries/", $file)),
        }
    };
}

/// Every view, in load order.
pub const VIEWS: &[ViewFile] = &[
    view!("server_metric_names", "05_server_metric_names.sql"),
    view!("counter_steps", "06_counter_steps.sql"),
    view!("counter_increases", "07_counter_increases.sql"),
    view!("counter_falls", "08_counter_falls.sql"),
    view!("request_timing", "10_request_timing.sql"),
    view!("request_figures", "20_request_figures.sql"),
    view!("request_canaries", "25_request_canaries.sql"),
    view!("request_metrics", "30_request_metrics.sql"),
    view!("cell_stats", "40_cell_stats.sql"),
    view!("percentile_ci", "41_percentile_ci.sql"),
    view!("aggregate_throughput", "50_aggregate_throughput.sql"),
    view!("run_slos", "51_run_slos.sql"),
    view!("client_queueing", "52_client_queueing.sql"),
    view!("slo_attainment", "53_slo_attainment.sql"),
    view!("goodput", "54_goodput.sql"),
    view!("across_runs", "55_across_runs.sql"),
    view!("tradeoff", "56_tradeoff.sql"),
    view!("prefill_wait", "57_prefill_wait.sql"),
    view!("chunk_gaps", "60_chunk_gaps.sql"),
    view!("spec_decode", "70_spec_decode.sql"),
    view!("restarts", "71_restarts.sql"),
    view!("spec_decode_positions", "72_spec_decode_positions.sql"),
    view!("server_queue", "73_server_queue.sql"),
    view!("server_timings", "74_server_timings.sql"),
    view!("server_timing_summary", "75_server_timing_summary.sql"),
    view!("request_timeline", "76_request_timeline.sql"),
    view!("server_queue_timeline", "77_server_queue_timeline.sql"),
    view!("tokens_per_chunk", "78_tokens_per_chunk.sql"),
    view!("completion_lengths", "79_completion_lengths.sql"),
    view!("prompt_calibration", "80_prompt_calibration.sql"),
    view!(
        "prompt_calibration_cells",
        "81_prompt_calibration_cells.sql"
    ),
    view!("kv_cache_timeline", "84_kv_cache_timeline.sql"),
    view!("prefix_cache", "85_prefix_cache.sql"),
    view!("session_turns", "86_session_turns.sql"),
    view!("turn_stats", "87_turn_stats.sql"),
    view!("sessions", "88_sessions.sql"),
    view!("trace_bursts", "89_trace_bursts.sql"),
    view!("functional_results", "90_functional_results.sql"),
    view!("session_goodput", "91_session_goodput.sql"),
    view!("gpu_timeline", "92_gpu_timeline.sql"),
    view!("gpu_energy", "93_gpu_energy.sql"),
    view!("gpu_throttle", "94_gpu_throttle.sql"),
    view!("run_energy", "95_run_energy.sql"),
];

impl ViewFile {
    /// The leading `--` comment block up to its `Columns:` section: the definition in words
    /// (each column's unit and meaning are [`super::docs::view_columns`]).
    pub fn definition(&self) -> String {
        self.sql
            .lines()
            .take_while(|l| l.starts_with("--"))
            .map(|l| l.trim_start_matches("--").trim_start_matches(' '))
            .take_while(|l| l.trim() != "Columns:")
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sql_file_is_listed_in_load_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/queries");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        on_disk.sort();
        let listed: Vec<&str> = VIEWS.iter().map(|v| v.file).collect();
        assert_eq!(
            on_disk, listed,
            "queries/*.sql and VIEWS must agree, in order"
        );
    }

    #[test]
    fn each_file_opens_with_its_definition_and_creates_its_view() {
        for v in VIEWS {
            assert!(
                v.sql.starts_with(&format!("-- {}: ", v.name)),
                "{} must open with `-- {}: <definition>`",
                v.file,
                v.name
            );
            assert!(v.definition().lines().count() >= 2, "{}", v.file);
            assert!(
                v.sql.contains(&format!("CREATE VIEW {} AS", v.name)),
                "{} must create view {}",
                v.file,
                v.name
            );
            let stem = v.file.split_once('_').unwrap().1.trim_end_matches(".sql");
            assert_eq!(stem, v.name, "{}", v.file);
        }
    }
}
