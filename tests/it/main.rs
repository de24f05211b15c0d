//! The one integration-test binary: real processes, real HTTP on loopback, real Parquet.
mod artifact;
mod manifest;
mod sim;
#[cfg(feature = "analysis")]
mod sql;
