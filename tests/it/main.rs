//! The one integration-test binary: real processes, real HTTP on loopback, real Parquet.
mod artifact;
#[cfg(feature = "analysis")]
mod cache_hygiene;
#[cfg(feature = "analysis")]
mod campaign;
mod campaign_run;
#[cfg(feature = "analysis")]
mod capacity;
mod capture;
mod common;
#[cfg(feature = "analysis")]
mod compare;
#[cfg(feature = "analysis")]
mod conformance;
#[cfg(feature = "analysis")]
mod corpus;
mod deploy;
#[cfg(feature = "distributed")]
mod distributed;
/// Without the feature the distributed test is not built: it says so.
#[cfg(not(feature = "distributed"))]
mod distributed {
    #[test]
    fn two_workers_give_the_single_process_results() {
        super::skip::skipped(
            "distributed::two_workers_give_the_single_process_results",
            &super::skip::DISTRIBUTED,
            "this test binary was built without it",
        );
    }

    #[test]
    fn workers_read_artifacts_on_object_storage() {
        super::skip::skipped(
            "distributed::workers_read_artifacts_on_object_storage",
            &super::skip::DISTRIBUTED,
            "this test binary was built without it",
        );
    }

    /// `anvil worker` and `anvil sql --workers` say which build they need.
    #[test]
    fn worker_and_workers_name_the_build_they_need() {
        use super::common::{ANVIL, output_text, run};
        for args in [
            &["worker", "--listen", "127.0.0.1:0"][..],
            &["sql", "--workers", "http://127.0.0.1:9", "SELECT 1"][..],
        ] {
            let o = run(ANVIL, args, &[]);
            let text = output_text(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
            assert!(text.contains("--features distributed"), "{args:?}: {text}");
        }
    }
}
#[cfg(feature = "analysis")]
mod functional;
mod layers;
#[cfg(feature = "analysis")]
mod llama;
#[cfg(feature = "analysis")]
mod llama_sessions;
mod manifest;
#[cfg(feature = "analysis")]
mod misbehaving;
#[cfg(all(feature = "analysis", feature = "object-store"))]
mod object_store;
#[cfg(feature = "analysis")]
mod pipeline;
#[cfg(feature = "analysis")]
mod readme;
#[cfg(feature = "analysis")]
mod report;
#[cfg(feature = "analysis")]
mod rules;
#[cfg(feature = "analysis")]
mod sessions;
#[cfg(feature = "analysis")]
mod shard;
mod sim;
mod sim_cache;
mod skip;
#[cfg(feature = "analysis")]
mod sql;
#[cfg(feature = "analysis")]
mod telemetry;
#[cfg(feature = "analysis")]
mod text;
#[cfg(feature = "analysis")]
mod workloads;
