//! artifact integration tests
