//! manifest integration tests
