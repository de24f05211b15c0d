//! The one integration-test binary: real processes, real HTTP on loopback, real Parquet.
mod artifact;
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
}
#[cfg(feature = "analysis")]
mod functional;
mod layers;
#[cfg(feature = "analysis")]
mod llama;
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
mod shard;
mod sim;
mod skip;
#[cfg(feature = "analysis")]
mod sql;
#[cfg(feature = "analysis")]
mod text;
