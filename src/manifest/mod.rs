//! manifest (in progress)
