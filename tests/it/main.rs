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
