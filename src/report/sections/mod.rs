//! The report's sections, one room each: each turns the rules' results, the plan, the
//! manifest and the query layer's figures ([`super::input::ReportInput`]) into its part of the
//! view ([`super::view`]), its numbers formatted by [`super::format`] (the one policy);
//! [`super::build`] assembles them in page order.

pub mod appendix;
pub mod cache;
pub mod context;
pub mod curves;
pub mod decision;
pub mod header;
pub mod headline;
pub mod objectives;
pub mod plan;
pub mod server;
pub mod slo;
pub mod spec_decode;
pub mod stages;
pub mod topology;
pub mod verdicts;

pub use appendix::*;
pub use context::*;
pub use header::*;
pub use headline::*;
pub use plan::*;
pub use server::*;
pub use spec_decode::*;
pub use topology::*;
pub use verdicts::*;
