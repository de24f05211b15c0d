//! The one integration-test binary: real processes, real HTTP on loopback, real Parquet.
mod artifact;
mod capture;
mod common;
mod manifest;
mod sim;
#[cfg(feature = "analysis")]
mod sql;
