//! artifact (in progress)
