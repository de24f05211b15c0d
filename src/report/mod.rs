//! The campaign report's pure renderers: view structs in, HTML or Markdown out.

pub mod charts;
pub mod view;
