//! sim integration tests
